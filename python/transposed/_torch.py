"""PyTorch as a first-class caller: transposed.transpose on torch tensors, the custom ops
torch.ops.transposed.transpose / transpose_out (torch.library), and contiguous_t.

Imported by transposed/__init__.py when PyTorch is installed (the package imports without it).

Eager calls take the shortest path the library allows: the call's layout (dtype, shape, strides,
device, out's strides, pointer alignment, daemon, policy) finds its Plan (transposed/_launch.py)
in a dict; a "kernel" plan launches its prepared handle on torch's current raw stream through
one ctypes call that keeps the GIL. No lock, no string, no host synchronization; with out= given,
no allocation either, so the call can be captured into a CUDA graph (torch.cuda.graph) once the
plan exists (make one call before capture). Under torch.compile, transposed.transpose becomes
the custom op (its fake implementation gives the shape: contiguous (..., cols, rows)), so the
graph does not break; the op's implementation is the eager path.

Thread-safety: as transposed/_launch.py (plans made under its lock, read without it).
"""
from typing import Optional

import torch

from transposed import _launch as L

_Tensor = torch.Tensor
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)


def _current_stream(dev):
    if _raw_stream is not None:
        return _raw_stream(dev)
    return torch.cuda.current_stream(dev).cuda_stream


_BY_SIZE = {1: "u8", 2: "i16", 4: "i32", 8: "i64", 16: "c128"}


def is_tensor(x):
    return isinstance(x, _Tensor)


# Clients passed to the custom op by number (an op takes no Python objects); 0: the default.
_clients = {0: None}
_client_numbers = {}


def _client_number(client):
    if client is None:
        return 0
    n = _client_numbers.get(id(client))
    if n is None:
        with L._lock:
            n = len(_clients)
            _clients[n] = client
            _client_numbers[id(client)] = n
    return n


def _out_shape(shape):
    return tuple(shape[:-2]) + (shape[-1], shape[-2])


def _plan(x, out, dev, client, policy, value_exact, key):
    """Makes the Plan of a call's layout (the slow path: layout checks, the daemon's answer, the
    handle), remembers it under `key`."""
    if len(x.shape) < 2:
        raise ValueError(f"transpose: needs a tensor of at least 2 dims, got shape "
                         f"{tuple(x.shape)}")
    expect = _out_shape(x.shape)
    # Only the element size matters to a kernel: a dtype we do not name (float8, uint16, ...)
    # runs as the named dtype of its size.
    dtype = L._TORCH_DTYPES.get(str(x.dtype)) or _BY_SIZE.get(x.element_size())
    k = L.layout(tuple(x.shape), tuple(x.stride()))
    plan = None
    if k[0] == "kernel" and dtype is not None:
        ld_out = 0 if out is None else L.out_layout(tuple(out.shape), tuple(out.stride()),
                                                    k[1], k[2], k[3])
        if ld_out is not None:
            plan = L.kernel_plan(client, dev, dtype, k, ld_out, expect, policy, value_exact)
            align = L.load_library().transposed_prepared_alignment(plan.handle)
            if key[-1] % align:  # a slice whose start the variant's vectors cannot load
                plan = None
    if plan is None:
        plan = L.Plan("copy" if k[0] == "copy" else "framework", expect)
    plan.alias = x.transpose(-2, -1).is_contiguous()
    return L.remember(key, plan)


def _bad_out(x, out, plan):
    if tuple(out.shape) != plan.out_shape:
        raise ValueError(f"transpose: out has shape {tuple(out.shape)}, expected {plan.out_shape}")
    if out.dtype != x.dtype:
        raise TypeError(f"transpose: out has dtype {out.dtype}, x has {x.dtype}")
    raise ValueError(f"transpose: out is on {out.device}, x on {x.device}")


def eager(x, out=None, client=None, policy=None, value_exact=False, drop_in=False):
    """transpose() of a torch tensor, run now (the custom ops' implementation). drop_in:
    contiguous_t's semantics (a CPU tensor's by torch; a transposed view that is contiguous
    already returned as is)."""
    dev = x.get_device()
    if dev < 0:
        if drop_in:
            return x.transpose(-2, -1).contiguous()
        raise TypeError("transpose: the tensor is on the CPU; transposed runs CUDA tensors")
    client = client or L._default_client or L._get_client()
    xp = x.data_ptr()
    if out is None:
        key = (x.dtype, x.shape, x.stride(), dev, None, client, policy, value_exact, xp & 15)
    else:
        key = (x.dtype, x.shape, x.stride(), dev, out.stride(), client, policy, value_exact,
               (xp | out.data_ptr()) & 15)
    plan = L._plans.get(key)
    if plan is None or (not plan.final and plan.stale()):
        plan = _plan(x, out, dev, client, policy, value_exact, key)
    if drop_in and plan.alias:
        return x.transpose(-2, -1)
    if out is None:
        out = torch.empty(plan.out_shape, dtype=x.dtype, device=x.device)
    elif out.shape != plan.out_shape or out.dtype != x.dtype or out.get_device() != dev:
        _bad_out(x, out, plan)
    if plan.kind == "kernel":
        rc = L._launch_fn(plan.handle, xp, out.data_ptr(), _current_stream(dev))
        if rc:
            raise L.launch_error(rc)
        return out
    out.copy_(x.transpose(-2, -1))
    return out


def transpose_tensor(x, out, client, policy, value_exact):
    if _is_compiling():
        n = _client_number(client)
        if out is None:
            return torch.ops.transposed.transpose(x, policy, bool(value_exact), n)
        torch.ops.transposed.transpose_out(x, out, policy, bool(value_exact), n)
        return out
    return eager(x, out, client, policy, value_exact)


@torch.library.custom_op("transposed::transpose", mutates_args=())
def _transpose_op(x: torch.Tensor, policy: Optional[str] = None, value_exact: bool = False,
                  client: int = 0) -> torch.Tensor:
    return eager(x, None, _clients[client], policy, value_exact)


@_transpose_op.register_fake
def _(x, policy=None, value_exact=False, client=0):
    if x.dim() < 2:
        raise ValueError(f"transpose: needs a tensor of at least 2 dims, got {x.dim()}")
    return x.new_empty(_out_shape(x.shape))


@torch.library.custom_op("transposed::transpose_out", mutates_args=("out",))
def _transpose_out_op(x: torch.Tensor, out: torch.Tensor, policy: Optional[str] = None,
                      value_exact: bool = False, client: int = 0) -> None:
    eager(x, out, _clients[client], policy, value_exact)


@_transpose_out_op.register_fake
def _(x, out, policy=None, value_exact=False, client=0):
    return None


def contiguous_t(x, client=None, policy=None, value_exact=False):
    """A drop-in for x.transpose(-2, -1).contiguous(): that view itself when it is contiguous
    already (as torch returns it), a CPU tensor's by torch, else transposed.transpose(x)."""
    if _is_compiling():
        t = x.transpose(-2, -1)
        if t.is_contiguous() or not x.is_cuda:
            return t.contiguous()
        return transpose_tensor(x, None, client, policy, value_exact)
    return eager(x, None, client, policy, value_exact, drop_in=True)
