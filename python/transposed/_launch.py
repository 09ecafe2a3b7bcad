"""transpose(x): a CUDA array transposed by the configuration the daemon tuned for it.

The kernels run through libtransposed_launch.so, the C ABI of the kernel library
(kernels/include/transposed/kernels/c_api.h), loaded with ctypes, on the array's device and its
framework's current stream. Found, in order: transposed.load_library(path), $TRANSPOSED_LAUNCH_LIBRARY,
the package's own directory, the system's library path (cmake --install puts it in <prefix>/lib).
"""
import ctypes
import ctypes.util
import os
import threading
import time

from transposed import client as _client
from transposed.v1 import transposed_pb2 as pb

_lock = threading.Lock()
_lib = None
_default_client = None
# (daemon address, device uuid, problem key) -> (variant name, final?, asked at)
_answers = {}
# (daemon address, device ordinal) -> daemon device selector
_devices = {}

# An answer that is not final (the daemon answered from a neighbour or its heuristic while it
# tunes in the background) is asked for again after this many seconds.
REFRESH_SECONDS = 1.0

_TORCH_DTYPES = {
    "torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32",
    "torch.float64": "f64", "torch.int8": "i8", "torch.uint8": "u8", "torch.bool": "u8",
    "torch.int16": "i16", "torch.int32": "i32", "torch.int64": "i64",
    "torch.complex64": "c64", "torch.complex128": "c128",
}
# __cuda_array_interface__ typestr (kind + size) -> our dtype. Unsigned types of 2, 4, 8 bytes
# share the signed type's kernels and cache entries (only the element size matters to a kernel).
_TYPESTR = {
    "f2": "f16", "f4": "f32", "f8": "f64", "i1": "i8", "u1": "u8", "b1": "u8", "i2": "i16",
    "u2": "i16", "i4": "i32", "u4": "i32", "i8": "i64", "u8": "i64", "c8": "c64", "c16": "c128",
}
_SIZES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "i32": 4,
          "i64": 8, "c64": 8, "c128": 16}


def load_library(path=None):
    """Loads libtransposed_launch.so (from `path` if given) and returns the ctypes handle."""
    global _lib
    with _lock:
        if _lib is not None and path is None:
            return _lib
        candidates = [path] if path else []
        if not path:
            env = os.environ.get("TRANSPOSED_LAUNCH_LIBRARY")
            if env:
                candidates.append(env)
            candidates.append(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "libtransposed_launch.so"))
            found = ctypes.util.find_library("transposed_launch")
            if found:
                candidates.append(found)
        errors = []
        for c in candidates:
            try:
                lib = ctypes.CDLL(c)
            except OSError as e:
                errors.append(f"{c}: {e}")
                continue
            _declare(lib)
            _lib = lib
            return lib
        raise OSError("transposed: libtransposed_launch.so not found (build the "
                      "transposed_launch target, then set TRANSPOSED_LAUNCH_LIBRARY or install it); "
                      "tried: " + ("; ".join(errors) or "no candidate"))


def _declare(lib):
    c_int64, c_int, c_char_p, c_void_p, c_size_t = (ctypes.c_int64, ctypes.c_int, ctypes.c_char_p,
                                                    ctypes.c_void_p, ctypes.c_size_t)
    lib.transposed_c_api_version.restype = c_int
    lib.transposed_library_version.restype = c_char_p
    lib.transposed_has_cuda.restype = c_int
    lib.transposed_check.argtypes = [c_char_p, c_char_p, c_int64, c_int64, c_int64, c_int64,
                                     c_int64, c_char_p, c_size_t]
    lib.transposed_check.restype = c_int
    lib.transposed_launch.argtypes = [c_char_p, c_char_p, c_int64, c_int64, c_int64, c_int64,
                                      c_int64, c_void_p, c_void_p, c_int, c_void_p, c_char_p,
                                      c_size_t]
    lib.transposed_launch.restype = c_int
    lib.transposed_pointer_device.argtypes = [c_void_p, ctypes.POINTER(c_int), c_char_p, c_size_t]
    lib.transposed_pointer_device.restype = c_int
    lib.transposed_device_uuid.argtypes = [c_int, c_char_p, c_size_t, c_char_p, c_size_t]
    lib.transposed_device_uuid.restype = c_int
    if lib.transposed_c_api_version() != 1:
        raise OSError(f"transposed: libtransposed_launch.so has C ABI version "
                      f"{lib.transposed_c_api_version()}, this package needs 1")


_CODES = {3: "INVALID_ARGUMENT", 5: "NOT_FOUND", 9: "FAILED_PRECONDITION", 12: "UNIMPLEMENTED",
          13: "INTERNAL"}


def _checked(rc, err):
    if rc != 0:
        raise _client.Error(_CODES.get(rc, f"CODE_{rc}"), err.value.decode(errors="replace"))


def check(variant, dtype, rows, cols, batch=1, ld_in=0, ld_out=0):
    """Raises transposed.Error unless `variant` can run the problem (host-only, no GPU needed)."""
    lib = load_library()
    err = ctypes.create_string_buffer(512)
    _checked(lib.transposed_check(variant.encode(), dtype.encode(), rows, cols, batch, ld_in,
                                  ld_out, err, len(err)), err)


class _View:
    """What transpose needs of an array: pointer, shape, element strides, dtype, device, stream."""

    def __init__(self, ptr, shape, strides, dtype, device, stream, framework, obj):
        self.ptr, self.shape, self.strides, self.dtype = ptr, tuple(shape), tuple(strides), dtype
        self.device, self.stream, self.framework, self.obj = device, stream, framework, obj


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _is_cupy(x):
    return type(x).__module__.startswith("cupy")


def _view(x):
    if _is_torch(x):
        import torch
        if not x.is_cuda:
            raise TypeError("transpose: the tensor is on the CPU; transposed runs CUDA tensors")
        dtype = _TORCH_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise TypeError(f"transpose: unsupported dtype {x.dtype}")
        stream = torch.cuda.current_stream(x.device).cuda_stream
        return _View(x.data_ptr(), x.shape, x.stride(), dtype, x.device.index, stream, "torch", x)
    if _is_cupy(x):
        import cupy
        dtype = _TYPESTR.get(x.dtype.str[1:])
        if dtype is None:
            raise TypeError(f"transpose: unsupported dtype {x.dtype}")
        item = x.dtype.itemsize
        if any(s % item for s in x.strides):
            raise ValueError("transpose: strides must be multiples of the element size")
        return _View(x.data.ptr, x.shape, [s // item for s in x.strides], dtype, x.device.id,
                     cupy.cuda.get_current_stream().ptr, "cupy", x)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        typestr = cai["typestr"]
        dtype = _TYPESTR.get(typestr[1:])
        if dtype is None:
            raise TypeError(f"transpose: unsupported typestr {typestr!r}")
        item = _SIZES[dtype]
        shape = tuple(cai["shape"])
        if cai.get("strides") is None:
            strides, acc = [], 1
            for n in reversed(shape):
                strides.insert(0, acc)
                acc *= n
        else:
            if any(s % item for s in cai["strides"]):
                raise ValueError("transpose: strides must be multiples of the element size")
            strides = [s // item for s in cai["strides"]]
        ptr = cai["data"][0]
        lib = load_library()
        dev, err = ctypes.c_int(-1), ctypes.create_string_buffer(512)
        _checked(lib.transposed_pointer_device(ptr, ctypes.byref(dev), err, len(err)), err)
        stream = cai.get("stream") or 0
        return _View(ptr, shape, strides, dtype, dev.value, stream, "cai", x)
    if hasattr(x, "__dlpack__"):
        import torch
        return _view(torch.from_dlpack(x))
    raise TypeError(f"transpose: {type(x).__name__} is not a CUDA array (PyTorch, CuPy, "
                    "__cuda_array_interface__ or DLPack)")


def _problem_of(v):
    """(rows, cols, batch, ld_in) of an input view, laid out as the kernels need."""
    if len(v.shape) not in (2, 3):
        raise ValueError(f"transpose: needs a 2-D (rows, cols) or 3-D (batch, rows, cols) array, "
                         f"got shape {v.shape}")
    rows, cols = v.shape[-2], v.shape[-1]
    batch = v.shape[0] if len(v.shape) == 3 else 1
    if rows == 0 or cols == 0 or batch == 0:
        raise ValueError(f"transpose: empty array of shape {v.shape}")
    if cols > 1 and v.strides[-1] != 1:
        raise ValueError("transpose: the rows must be contiguous (last stride 1); call "
                         ".contiguous() first")
    ld = v.strides[-2] if rows > 1 else cols
    if ld < cols:
        raise ValueError(f"transpose: row stride {ld} is smaller than the row length {cols}")
    if batch > 1 and v.strides[0] != rows * ld:
        raise ValueError("transpose: the matrices of a batch must follow each other "
                         f"(batch stride {v.strides[0]}, expected {rows * ld})")
    return rows, cols, batch, (0 if ld == cols else ld)


def _empty_like_transposed(v, rows, cols, batch):
    shape = (cols, rows) if len(v.shape) == 2 else (batch, cols, rows)
    if v.framework == "torch":
        import torch
        return torch.empty(shape, dtype=v.obj.dtype, device=v.obj.device)
    if v.framework == "cupy":
        import cupy
        with cupy.cuda.Device(v.device):
            return cupy.empty(shape, dtype=v.obj.dtype)
    raise TypeError("transpose: pass out= for arrays that are neither PyTorch nor CuPy")


def _get_client():
    global _default_client
    with _lock:
        if _default_client is None:
            _default_client = _client.Client()
        return _default_client


def _device_uuid(lib, ordinal):
    uuid, err = ctypes.create_string_buffer(64), ctypes.create_string_buffer(512)
    _checked(lib.transposed_device_uuid(ordinal, uuid, len(uuid), err, len(err)), err)
    return uuid.value.decode()


def config_for(client, device_uuid, rows, cols, dtype, batch=1, ld_in=0, ld_out=0,
               policy=None, value_exact=False):
    """The variant name to launch for a problem on the daemon's device `device_uuid`, cached in
    this process per problem. A provisional answer (source NEAREST or HEURISTIC) is re-asked
    after REFRESH_SECONDS until the daemon has the tuned one."""
    policy = policy or _default_policy()
    key = (client.address, device_uuid, rows, cols, dtype, batch, ld_in, ld_out, bool(value_exact))
    now = time.monotonic()
    with _lock:
        hit = _answers.get(key)
    if hit is not None and (hit[1] or now - hit[2] < REFRESH_SECONDS):
        return hit[0]
    answer = client.get_config(rows, cols, dtype, batch=batch, ld_in=ld_in, ld_out=ld_out,
                               device=device_uuid, policy=policy, value_exact=value_exact)
    if answer.variant.backend != "cuda":
        raise _client.Error("FAILED_PRECONDITION",
                            f"the daemon at {client.address} answered with a "
                            f"{answer.variant.backend or 'non-CUDA'} configuration "
                            f"({answer.variant.name}); it needs its CUDA backend")
    final = answer.source in (pb.SOURCE_CACHE, pb.SOURCE_TUNED)
    with _lock:
        _answers[key] = (answer.variant.name, final, now)
    return answer.variant.name


def _default_policy():
    return "answer_now" if "answer_now" in _client.POLICIES else "tune_if_missing"


def transpose(x, out=None, client=None, policy=None, value_exact=False):
    """Transposes the CUDA array x (rows, cols) -> (cols, rows), or a batch (b, rows, cols) ->
    (b, cols, rows), with the daemon's tuned configuration for this problem on x's GPU, launched
    asynchronously on the current stream of x's framework (PyTorch: torch.cuda.current_stream;
    CuPy: the current stream; __cuda_array_interface__: its 'stream'). Returns `out` (allocated
    like x when None; for DLPack-only inputs, a torch tensor). Bit-exact: a transpose moves bytes.
    value_exact=True (f32/f64) also accepts a kernel that may change NaN payloads, every other
    element bit-exact (cuBLAS geam where it is faster; README "Value-exact answers").
    """
    lib = load_library()
    v = _view(x)
    rows, cols, batch, ld_in = _problem_of(v)
    if out is None:
        out = _empty_like_transposed(v, rows, cols, batch)
    o = _view(out)
    expect = (cols, rows) if len(v.shape) == 2 else (batch, cols, rows)
    if o.shape != expect:
        raise ValueError(f"transpose: out has shape {o.shape}, expected {expect}")
    if o.dtype != v.dtype or _SIZES[o.dtype] != _SIZES[v.dtype]:
        raise TypeError(f"transpose: out has dtype {o.dtype}, x has {v.dtype}")
    if o.device != v.device:
        raise ValueError(f"transpose: out is on device {o.device}, x on {v.device}")
    o_rows, o_cols, o_batch, ld_out = _problem_of(o)
    del o_rows, o_cols, o_batch
    client = client or _get_client()
    with _lock:
        uuid = _devices.get(v.device)
    if uuid is None:
        uuid = _device_uuid(lib, v.device)
        with _lock:
            _devices[v.device] = uuid
    variant = config_for(client, uuid, rows, cols, v.dtype, batch, ld_in, ld_out, policy,
                         value_exact)
    err = ctypes.create_string_buffer(1024)
    _checked(lib.transposed_launch(variant.encode(), v.dtype.encode(), rows, cols, batch, ld_in,
                                   ld_out, v.ptr, o.ptr, v.device, v.stream, err, len(err)), err)
    return out


def clear_cache():
    """Forgets the answers cached in this process."""
    with _lock:
        _answers.clear()
