"""transposed: the Python client of the transposed daemon, and transposes of CUDA arrays with the
kernels it tuned.

    import transposed
    c = transposed.Client()                      # $TRANSPOSED_SERVER, else 127.0.0.1:50051
    a = c.get_config(4096, 4096, "f32")          # transposed.v1.Answer: a.variant.name, a.gbps
    for p in c.tune(4096, 4096, "f32"): ...      # progress of a re-tune, then the answer
    for m in c.tune_many([(4096, 4096, "f32"), (1024, 8192, "bf16")]): ...  # pre-tune a list
    c.devices(); c.list(dtype="f32"); c.delete(rows=4096, cols=4096)
    transposed.write_recorded_problems("shapes.txt")  # what this process asked for, for the
                                                       # next run's `transposectl tune --from`
    y = transposed.transpose(x)                  # x: a CUDA torch/CuPy/CAI/DLPack array
    y = transposed.contiguous_t(x)               # drop-in for x.transpose(-2, -1).contiguous()

With PyTorch installed, transposed.transpose is also the custom op torch.ops.transposed.transpose
(torch.compile traces it without a graph break); PyTorch is optional.
"""
import importlib.util as _importlib_util

from transposed.client import (DEFAULT_ADDRESS, MAX_RECORDED_PROBLEMS, MAX_TUNE_MANY_PROBLEMS,
                               POLICIES, Client, Error, device_selector, problem,
                               recorded_problems, write_recorded_problems)
from transposed import _launch
from transposed._launch import (REFRESH_SECONDS, check, clear_cache, config_for, load_library,
                                transpose)
from transposed.v1 import transposed_pb2 as pb

if _importlib_util.find_spec("torch") is not None:
    from transposed import _torch as _torch_support
    _launch._torch_mod = _torch_support


def contiguous_t(x, client=None, policy=None, value_exact=False):
    """A drop-in for x.transpose(-2, -1).contiguous() (PyTorch) or
    ascontiguousarray(swapaxes(x, -1, -2)) (CuPy): the transpose of the last two dims, contiguous,
    by the daemon's tuned kernel where the layout allows (transposed.transpose); a PyTorch view
    that is contiguous already comes back as is, as torch's .contiguous() returns it."""
    t = _launch._torch_module()
    if t is not None and t.is_tensor(x):
        return t.contiguous_t(x, client, policy, value_exact)
    return transpose(x, client=client, policy=policy, value_exact=value_exact)


__version__ = "0.1.0"

__all__ = ["Client", "Error", "transpose", "contiguous_t", "check", "load_library", "clear_cache",
           "config_for", "problem", "device_selector", "pb", "POLICIES", "DEFAULT_ADDRESS",
           "REFRESH_SECONDS", "MAX_TUNE_MANY_PROBLEMS", "MAX_RECORDED_PROBLEMS",
           "recorded_problems", "write_recorded_problems"]
