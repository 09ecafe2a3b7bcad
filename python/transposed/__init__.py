"""transposed: the Python client of the transposed daemon, and transposes of CUDA arrays with the
kernels it tuned.

    import transposed
    c = transposed.Client()                      # $TRANSPOSED_SERVER, else 127.0.0.1:50051
    a = c.get_config(4096, 4096, "f32")          # transposed.v1.Answer: a.variant.name, a.gbps
    for p in c.tune(4096, 4096, "f32"): ...      # progress of a re-tune, then the answer
    for m in c.tune_many([(4096, 4096, "f32"), (1024, 8192, "bf16")]): ...  # pre-tune a list
    c.devices(); c.list(dtype="f32"); c.delete(rows=4096, cols=4096)
    y = transposed.transpose(x)                  # x: a CUDA torch/CuPy/CAI/DLPack array
"""
from transposed.client import (DEFAULT_ADDRESS, MAX_TUNE_MANY_PROBLEMS, POLICIES, Client, Error,
                               device_selector, problem)
from transposed._launch import (REFRESH_SECONDS, check, clear_cache, config_for, load_library,
                                transpose)
from transposed.v1 import transposed_pb2 as pb

__version__ = "0.1.0"

__all__ = ["Client", "Error", "transpose", "check", "load_library", "clear_cache", "config_for",
           "problem", "device_selector", "pb", "POLICIES", "DEFAULT_ADDRESS", "REFRESH_SECONDS",
           "MAX_TUNE_MANY_PROBLEMS"]
