"""transpose(x): a CUDA array transposed by the configuration the daemon tuned for it.

The kernels run through libtransposed_launch.so, the C ABI of the kernel library
(kernels/include/transposed/kernels/c_api.h), loaded with ctypes, on the array's device and its
framework's current stream. Found, in order: transposed.load_library(path), $TRANSPOSED_LAUNCH_LIBRARY,
the package's own directory, the system's library path (cmake --install puts it in <prefix>/lib).

A call is planned once per (array layout, device, daemon, policy): the daemon is asked for the
problem's variant (then again while the answer is provisional), the variant is prepared into a
launch handle of the library (one per device, problem and variant: parsed, validated and looked
up once), and later calls of the same layout only check the output and launch the handle
(transposed_launch_prepared: no parsing, no allocation). PyTorch tensors take the path in
transposed/_torch.py, the same plans.

Thread-safety: plans and handles are created under a lock and never change; readers look them
up without it (dict reads are atomic in CPython). Launches hold the GIL (the launch function is
called through ctypes.PyDLL), so a handle is never freed while a launch of it runs.
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
_launch_fn = None  # transposed_launch_prepared through ctypes.PyDLL (keeps the GIL)
_default_client = None
# (daemon address, device uuid, problem key) -> (variant name, final?, asked at)
_answers = {}
# device ordinal -> device uuid
_devices = {}
# (device ordinal, dtype, rows, cols, batch, ld_in, ld_out, variant) -> handle (int)
_handles = {}
# At most this many handles are kept; past it, every plan and handle is dropped (and re-made on
# the next call of each layout): memory stays bounded in a process that sees endless shapes.
MAX_HANDLES = 4096
# layout key -> Plan (see plan_key in _generic_transpose and transposed/_torch.py)
_plans = {}

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
    global _lib, _launch_fn
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
            fast = ctypes.PyDLL(c).transposed_launch_prepared
            fast.argtypes = [ctypes.c_void_p] * 4
            fast.restype = ctypes.c_int
            _release_all_locked()
            _lib, _launch_fn = lib, fast
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
    if not hasattr(lib, "transposed_prepare"):
        raise OSError("transposed: this libtransposed_launch.so predates prepared launches "
                      "(transposed_prepare); rebuild or reinstall it")
    lib.transposed_prepare.argtypes = [c_char_p, c_char_p, c_int64, c_int64, c_int64, c_int64,
                                       c_int64, c_int, ctypes.POINTER(c_void_p), c_char_p,
                                       c_size_t]
    lib.transposed_prepare.restype = c_int
    lib.transposed_last_error.restype = c_char_p
    lib.transposed_prepared_variant.argtypes = [c_void_p]
    lib.transposed_prepared_variant.restype = c_char_p
    lib.transposed_prepared_alignment.argtypes = [c_void_p]
    lib.transposed_prepared_alignment.restype = c_int
    lib.transposed_destroy.argtypes = [c_void_p]
    lib.transposed_destroy.restype = None


_CODES = {3: "INVALID_ARGUMENT", 5: "NOT_FOUND", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION",
          12: "UNIMPLEMENTED", 13: "INTERNAL"}


def _checked(rc, err):
    if rc != 0:
        raise _client.Error(_CODES.get(rc, f"CODE_{rc}"), err.value.decode(errors="replace"))


def check(variant, dtype, rows, cols, batch=1, ld_in=0, ld_out=0):
    """Raises transposed.Error unless `variant` can run the problem (host-only, no GPU needed)."""
    lib = load_library()
    err = ctypes.create_string_buffer(512)
    _checked(lib.transposed_check(variant.encode(), dtype.encode(), rows, cols, batch, ld_in,
                                  ld_out, err, len(err)), err)


def prepared_handle(device, variant, dtype, rows, cols, batch=1, ld_in=0, ld_out=0):
    """The launch handle of `variant` for the problem on CUDA device ordinal `device`: prepared
    once (host-only: no GPU needed), then the same handle (an int) for the same arguments."""
    key = (device, dtype, rows, cols, batch, ld_in, ld_out, variant)
    h = _handles.get(key)
    if h is not None:
        return h
    lib = load_library()
    out, err = ctypes.c_void_p(), ctypes.create_string_buffer(1024)
    _checked(lib.transposed_prepare(variant.encode(), dtype.encode(), rows, cols, batch, ld_in,
                                    ld_out, device, ctypes.byref(out), err, len(err)), err)
    with _lock:
        if len(_handles) >= MAX_HANDLES:
            _release_all_locked()
        if key in _handles:  # another thread prepared it meanwhile
            lib.transposed_destroy(out.value)
        else:
            _handles[key] = out.value
        return _handles[key]


def _release_all_locked():
    """Drops every plan and frees every handle (called with _lock held; launches hold the GIL,
    which this thread holds too, so no launch of a freed handle is running)."""
    _plans.clear()
    if _lib is not None:
        for h in _handles.values():
            _lib.transposed_destroy(h)
    _handles.clear()


def launch_error(rc):
    """transposed.Error for a non-zero transposed_launch_prepared result."""
    msg = load_library().transposed_last_error().decode(errors="replace")
    return _client.Error(_CODES.get(rc, f"CODE_{rc}"), msg)


class Plan:
    """How one layout of a call runs. kind "kernel": launch `handle` on (in, out); "copy": the
    input is a transposed view, its transpose is a strided copy (the framework's copy);
    "framework": a layout the kernels cannot serve, done by the framework's own transpose and
    copy. Immutable once made."""
    __slots__ = ("kind", "handle", "variant", "final", "asked", "out_shape", "alias")

    def __init__(self, kind, out_shape, handle=None, variant=None, final=True, asked=0.0):
        self.kind, self.out_shape, self.handle, self.variant = kind, out_shape, handle, variant
        self.final, self.asked = final, asked
        # The input's transposed view is contiguous already (what torch's .contiguous() would
        # return as is): contiguous_t returns that view.
        self.alias = False

    def stale(self):
        return not self.final and time.monotonic() - self.asked >= REFRESH_SECONDS


def _merge_batch(shape, strides):
    """(batch, stride of one matrix) when the leading dims of an array of >= 2 dims collapse into
    one batch dimension with a single stride, else None. Dims of size 1 take any stride."""
    batch, stride = 1, None
    for n, s in zip(reversed(shape[:-2]), reversed(strides[:-2])):
        if n == 1:
            continue
        if stride is None:
            stride = s
        elif s != stride * batch:
            return None
        batch *= n
    return batch, stride


def layout(shape, strides):
    """How an input of `shape` and element `strides` (>= 2 dims) is transposed, on the CPU:
    ("kernel", rows, cols, batch, ld) for rows of contiguous elements (ld = row stride, or the
    dense row length), matrices of a batch one after the other; ("copy",) for a transposed view
    (elements of a column contiguous): the result is a strided copy of its storage; ("framework",)
    for anything else (including empty arrays)."""
    if len(shape) < 2:
        raise ValueError(f"transpose: needs an array of at least 2 dims, got shape {tuple(shape)}")
    rows, cols = shape[-2], shape[-1]
    merged = _merge_batch(shape, strides)
    if rows == 0 or cols == 0 or any(n == 0 for n in shape) or merged is None:
        return ("framework",)
    batch, bstride = merged
    rs, cs = strides[-2], strides[-1]
    if cols == 1 or cs == 1:
        ld = rs if rows > 1 else (bstride if batch > 1 and bstride is not None and bstride >= cols
                                  else cols)
        if cols == 1 and rows > 1 and rs < 1:
            return ("framework",)
        if ld >= cols and (batch == 1 or bstride == rows * ld):
            return ("kernel", rows, cols, batch, ld)
    if rs == 1 and rows > 1 and cols > 1 and cs >= rows:
        return ("copy",)
    return ("framework",)


def out_layout(shape, strides, rows, cols, batch):
    """ld_out (0: dense) when an output of `shape`/`strides` suits the kernels for an input of
    (batch x) rows x cols, else None."""
    k = layout(shape, strides)
    if k[0] != "kernel" or k[1] != cols or k[2] != rows or k[3] != batch:
        return None
    return 0 if k[4] == rows else k[4]


def _get_client():
    global _default_client
    with _lock:
        if _default_client is None:
            _default_client = _client.Client()
        return _default_client


def default_client():
    return _default_client or _get_client()


def device_uuid(ordinal):
    uuid = _devices.get(ordinal)
    if uuid is None:
        lib = load_library()
        buf, err = ctypes.create_string_buffer(64), ctypes.create_string_buffer(512)
        _checked(lib.transposed_device_uuid(ordinal, buf, len(buf), err, len(err)), err)
        uuid = buf.value.decode()
        with _lock:
            _devices[ordinal] = uuid
    return uuid


def _answer(client, device_uuid, rows, cols, dtype, batch, ld_in, ld_out, policy, value_exact):
    """(variant name, final?, asked at) for a problem, cached per problem in this process; a
    provisional answer (source NEAREST or HEURISTIC) is re-asked after REFRESH_SECONDS."""
    policy = policy or _default_policy()
    key = (client.address, device_uuid, rows, cols, dtype, batch, ld_in, ld_out, bool(value_exact),
           policy)
    now = time.monotonic()
    hit = _answers.get(key)
    if hit is not None and (hit[1] or now - hit[2] < REFRESH_SECONDS):
        return hit
    answer = client.get_config(rows, cols, dtype, batch=batch, ld_in=ld_in, ld_out=ld_out,
                               device=device_uuid, policy=policy, value_exact=value_exact)
    if answer.variant.backend != "cuda":
        raise _client.Error("FAILED_PRECONDITION",
                            f"the daemon at {client.address} answered with a "
                            f"{answer.variant.backend or 'non-CUDA'} configuration "
                            f"({answer.variant.name}); it needs its CUDA backend")
    hit = (answer.variant.name,
           answer.source in (pb.SOURCE_CACHE, pb.SOURCE_TUNED, pb.SOURCE_PEER,
                             pb.SOURCE_SHARED), now)
    with _lock:
        if len(_answers) >= MAX_HANDLES:
            _answers.clear()
        _answers[key] = hit
    return hit


def config_for(client, device_uuid, rows, cols, dtype, batch=1, ld_in=0, ld_out=0,
               policy=None, value_exact=False):
    """The variant name to launch for a problem on the daemon's device `device_uuid`, cached in
    this process per problem. A provisional answer (source NEAREST or HEURISTIC) is re-asked
    after REFRESH_SECONDS until the daemon has the tuned one."""
    return _answer(client, device_uuid, rows, cols, dtype, batch, ld_in, ld_out, policy,
                   value_exact)[0]


def _default_policy():
    return "answer_now" if "answer_now" in _client.POLICIES else "tune_if_missing"


def kernel_plan(client, device, dtype, k, ld_out, out_shape, policy, value_exact):
    """The Plan of a "kernel" layout k = ("kernel", rows, cols, batch, ld): the daemon's answer
    for the problem on `device` and its prepared handle."""
    _, rows, cols, batch, ld = k
    ld_in = 0 if ld == cols else ld
    variant, final, asked = _answer(client, device_uuid(device), rows, cols, dtype, batch, ld_in,
                                    ld_out, policy, value_exact)
    handle = prepared_handle(device, variant, dtype, rows, cols, batch, ld_in, ld_out)
    return Plan("kernel", out_shape, handle, variant, final, asked)


def remember(key, plan):
    with _lock:
        if len(_plans) >= MAX_HANDLES:
            _plans.clear()
        _plans[key] = plan
    return plan


class _View:
    """What transpose needs of a non-PyTorch array: pointer, shape, element strides, dtype,
    device, stream."""

    def __init__(self, ptr, shape, strides, dtype, device, stream, framework, obj):
        self.ptr, self.shape, self.strides, self.dtype = ptr, tuple(shape), tuple(strides), dtype
        self.device, self.stream, self.framework, self.obj = device, stream, framework, obj


def _is_cupy(x):
    return type(x).__module__.startswith("cupy")


def _view(x):
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
    raise TypeError(f"transpose: {type(x).__name__} is not a CUDA array (PyTorch, CuPy, "
                    "__cuda_array_interface__ or DLPack)")


def _out_shape(shape):
    return tuple(shape[:-2]) + (shape[-1], shape[-2])


def generic_transpose(x, out, client, policy, value_exact):
    """transpose() of a CuPy or __cuda_array_interface__ array."""
    v = _view(x)
    k = layout(v.shape, v.strides)
    expect = _out_shape(v.shape)
    if out is None:
        if v.framework != "cupy":
            raise TypeError("transpose: pass out= for arrays that are neither PyTorch nor CuPy")
        import cupy
        with cupy.cuda.Device(v.device):
            out = cupy.empty(expect, dtype=v.obj.dtype)
    o = _view(out)
    if o.shape != expect:
        raise ValueError(f"transpose: out has shape {o.shape}, expected {expect}")
    if _SIZES[o.dtype] != _SIZES[v.dtype] or (o.framework == v.framework and o.dtype != v.dtype):
        raise TypeError(f"transpose: out has dtype {o.dtype}, x has {v.dtype}")
    if o.device != v.device:
        raise ValueError(f"transpose: out is on device {o.device}, x on {v.device}")
    client = client or default_client()
    misaligned = (v.ptr | o.ptr) & 15
    key = ("generic", v.dtype, v.shape, v.strides, o.strides, v.device, client, policy,
           bool(value_exact), misaligned)
    plan = _plans.get(key)
    if plan is None or plan.stale():
        plan = None
        if k[0] == "kernel":
            ld_out = out_layout(o.shape, o.strides, k[1], k[2], k[3])
            if ld_out is not None:
                plan = kernel_plan(client, v.device, v.dtype, k, ld_out, expect, policy,
                                   value_exact)
                if misaligned % load_library().transposed_prepared_alignment(plan.handle):
                    plan = None  # a slice whose start the variant's vectors cannot load
        plan = remember(key, plan or Plan(k[0] if k[0] == "copy" else "framework", expect))
    if plan.kind == "kernel":
        rc = _launch_fn(plan.handle, v.ptr, o.ptr, v.stream)
        if rc:
            raise launch_error(rc)
        return out
    if v.framework == "cupy" and o.framework == "cupy":
        import cupy
        with cupy.cuda.Device(v.device):
            cupy.copyto(out, cupy.swapaxes(x, -1, -2))
        return out
    raise ValueError(f"transpose: the kernels cannot serve this layout (shape {v.shape}, element "
                     f"strides {v.strides}, out strides {o.strides}); pass rows of contiguous "
                     "elements and a contiguous out")


def transpose(x, out=None, client=None, policy=None, value_exact=False):
    """Transposes the last two dims of the CUDA array x: (..., rows, cols) -> (..., cols, rows),
    with the daemon's tuned configuration for this problem on x's GPU, launched asynchronously on
    the current stream of x's framework (PyTorch: torch.cuda.current_stream; CuPy: the current
    stream; __cuda_array_interface__: its 'stream'). Returns `out` (allocated, contiguous, when
    None; for DLPack-only inputs, a torch tensor). Bit-exact: a transpose moves bytes.

    The kernels take rows of contiguous elements with any row stride (column slices), leading
    dims that merge into one batch, and an out of the same kind. A transposed view (x.t() of a
    row-major matrix) is the framework's strided copy of its storage; any other layout of a
    PyTorch or CuPy array is done by the framework itself (x.transpose(-2, -1) copied into out).
    value_exact=True (f32/f64) also accepts a kernel that may change NaN payloads, every other
    element bit-exact (cuBLAS geam where it is faster; docs/user/api.md "Value-exact answers").
    Under torch.compile this is the custom op torch.ops.transposed.transpose (no graph break).
    """
    t = _torch_module()
    if t is not None and t.is_tensor(x):
        return t.transpose_tensor(x, out, client, policy, value_exact)
    if not _is_cupy(x) and getattr(x, "__cuda_array_interface__", None) is None \
            and hasattr(x, "__dlpack__"):
        import torch
        return transpose(torch.from_dlpack(x), out, client, policy, value_exact)
    return generic_transpose(x, out, client, policy, value_exact)


# transposed._torch when PyTorch is installed (set by transposed/__init__.py), else None.
_torch_mod = None


def _torch_module():
    return _torch_mod


def clear_cache():
    """Forgets the answers, plans and launch handles cached in this process."""
    with _lock:
        _answers.clear()
        _release_all_locked()
