"""The same prepared kernel on buffers from different allocators, with different input contents
(issue 21 item 4: on the H200, 16384x16384 f64 reached 0.95 of the stored figure through Python
while C++ on cudaMalloc buffers got 1.00; docs/design/kernel-family.md "Buffers").

    bench_buffers.py --out FILE [--calls N] [--problems P ...] [--sources S ...]

No daemon: each problem's variant is prepared directly (libtransposed_launch.so's prepared
handle, the launch the Python package makes). Per problem (ROWSxCOLS:DTYPE:VARIANT) and buffer
source:
  torch        torch.empty: PyTorch's caching allocator as this process configures it
               (PYTORCH_CUDA_ALLOC_CONF; its settings are printed)
  torch_churn  the same after allocating and freeing what the user-path benchmark did before it
               (112 MiB - 1 GiB tensors, then torch.cuda.empty_cache)
  cumemalloc   cuMemAlloc through the driver API (what cudaMalloc does)
  vmm_chunks   cuMemCreate chunks of the allocation granularity (2 MiB) mapped side by side into
               one reserved range (what PyTorch's expandable segments do)
  vmm_whole    one cuMemCreate of the whole size mapped into a reserved range
and input content (random bytes, as the harness and bench_user_path.py fill it; the constant byte
0x37, as transposer_bench fills inputs over 256 MiB): per-call median and back-to-back GB/s over
N launches timed with events, the device-to-device copy of the same bytes on the same buffers,
and the buffers' addresses modulo 2 MiB. One JSON line per measurement on stdout and in FILE.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys

import torch

import transposed  # noqa: F401  (the package's library loader)
from transposed import _launch

MiB = 1 << 20
SIZES = {"f32": 4, "f64": 8, "bf16": 2, "u8": 1}
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "u8": torch.uint8}
INTS = {"f32": torch.int32, "f64": torch.int64, "bf16": torch.int16, "u8": torch.uint8}  # NaNs

# ---- Driver API (libcuda), for buffers that torch's allocator does not make.
_cu = ctypes.CDLL("libcuda.so.1")
CUdeviceptr = ctypes.c_uint64


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


def _ck(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: CUresult {rc}")


class DriverBuffer:
    """`nbytes` of device memory from the driver API, exposed to torch through
    __cuda_array_interface__ (as CuPy's would be)."""

    def __init__(self, nbytes, kind, device):
        self.nbytes, self.kind, self.handles, self.reserved = nbytes, kind, [], 0
        if kind == "cumemalloc":
            p = CUdeviceptr()
            _ck(_cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(nbytes)), "cuMemAlloc")
            self.ptr = p.value
            return
        prop = _Prop()
        prop.type = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type, prop.location.id = 1, device  # CU_MEM_LOCATION_TYPE_DEVICE
        gran = ctypes.c_size_t()
        _ck(_cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0),
            "cuMemGetAllocationGranularity")
        self.granularity = gran.value
        size = -(-nbytes // gran.value) * gran.value
        p = CUdeviceptr()
        _ck(_cu.cuMemAddressReserve(ctypes.byref(p), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                    CUdeviceptr(0), ctypes.c_uint64(0)), "cuMemAddressReserve")
        self.ptr, self.reserved = p.value, size
        chunk = gran.value if kind == "vmm_chunks" else size
        for off in range(0, size, chunk):
            h = ctypes.c_uint64()
            _ck(_cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(chunk), ctypes.byref(prop),
                                ctypes.c_uint64(0)), "cuMemCreate")
            self.handles.append(h.value)
            _ck(_cu.cuMemMap(CUdeviceptr(self.ptr + off), ctypes.c_size_t(chunk),
                             ctypes.c_size_t(0), ctypes.c_uint64(h.value), ctypes.c_uint64(0)),
                "cuMemMap")
        acc = _Access()
        acc.location.type, acc.location.id, acc.flags = 1, device, 3  # read-write
        _ck(_cu.cuMemSetAccess(CUdeviceptr(self.ptr), ctypes.c_size_t(size), ctypes.byref(acc),
                               ctypes.c_size_t(1)), "cuMemSetAccess")

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                "version": 3, "strides": None}

    def free(self):
        torch.cuda.synchronize()
        if self.kind == "cumemalloc":
            _cu.cuMemFree_v2(CUdeviceptr(self.ptr))
            return
        _cu.cuMemUnmap(CUdeviceptr(self.ptr), ctypes.c_size_t(self.reserved))
        for h in self.handles:
            _cu.cuMemRelease(ctypes.c_uint64(h))
        _cu.cuMemAddressFree(CUdeviceptr(self.ptr), ctypes.c_size_t(self.reserved))


def buffers(source, nbytes, device):
    """(input bytes, output bytes, keep-alive) as uint8 torch tensors on `device`."""
    if source.startswith("torch"):
        if source == "torch_churn":  # what bench_user_path.py allocated before its 2 GiB problem
            for mib in (112, 112, 112, 128, 128, 128, 1024, 1024):
                t = torch.empty(mib * MiB, dtype=torch.uint8, device=device)
                t.fill_(1)
                del t
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        a = torch.empty(nbytes, dtype=torch.uint8, device=device)
        b = torch.empty(nbytes, dtype=torch.uint8, device=device)
        return a, b, None
    da, db = DriverBuffer(nbytes, source, device), DriverBuffer(nbytes, source, device)
    return (torch.as_tensor(da, device=f"cuda:{device}"),
            torch.as_tensor(db, device=f"cuda:{device}"), (da, db))


def segment_of(ptr):
    """PyTorch's record of the segment holding `ptr` (type, size, expandable?), if any."""
    for s in torch.cuda.memory_snapshot():
        if s["address"] <= ptr < s["address"] + s["total_size"]:
            return {k: v for k, v in s.items() if k not in ("blocks", "frames")}
    return None


def timed(fn, n, stream):
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    fn()
    torch.cuda.synchronize()
    ev[0].record(stream)
    for i in range(n):
        fn()
        ev[i + 1].record(stream)
    ev[n].synchronize()
    per = [ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(n)]
    return statistics.median(per), ev[0].elapsed_time(ev[n]) / 1e3 / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--problems", nargs="+", default=[
        "16384x16384:f64:tile64x32.rows8.vec16.pad1",
        "3200x13696:f64:tile64x32.rows8.vec16.pad1",
        "16384x16384:f64:tile32x32.rows8.pad1"])
    ap.add_argument("--sources", nargs="+", default=[
        "torch", "cumemalloc", "vmm_chunks", "vmm_whole", "torch_churn"])
    ap.add_argument("--contents", nargs="+", default=["random", "constant"])
    a = ap.parse_args()
    device = torch.cuda.current_device()
    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    stream = torch.cuda.current_stream()
    raw = stream.cuda_stream
    _launch.load_library()
    launch = _launch._launch_fn  # transposed_launch_prepared, as transposed.transpose calls it
    head = {"torch": torch.__version__, "device": torch.cuda.get_device_name(device),
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "allocator_backend": torch.cuda.get_allocator_backend()}
    print(json.dumps(head), flush=True)
    rows_out = [head]
    for spec in a.problems:
        shape, dtype, variant = spec.split(":")
        rows, cols = map(int, shape.split("x"))
        nbytes = rows * cols * SIZES[dtype]
        h = _launch.prepared_handle(device, variant, dtype, rows, cols)
        for source in a.sources:
            try:
                ib, ob, keep = buffers(source, nbytes, device)
                seg = segment_of(ib.data_ptr()) if source.startswith("torch") else None
                for content in a.contents:
                    if content == "random":
                        tmp = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device)
                        ib.copy_(tmp)
                        del tmp
                    else:
                        ib.fill_(0x37)
                    x = ib.view(DTYPES[dtype]).view(rows, cols)
                    o = ob.view(DTYPES[dtype]).view(cols, rows)
                    rc = launch(h, x.data_ptr(), o.data_ptr(), raw)
                    torch.cuda.synchronize()
                    if rc != 0:
                        raise RuntimeError(f"launch {variant}: {rc}")
                    bits = ib.view(INTS[dtype]).view(rows, cols)
                    exact = bool(torch.equal(ob.view(INTS[dtype]).view(cols, rows), bits.t()))
                    per, b2b = timed(lambda: launch(h, x.data_ptr(), o.data_ptr(), raw), a.calls,
                                     stream)
                    _, copy = timed(lambda: ob.copy_(ib), max(10, a.calls // 3), stream)
                    r = {"problem": f"{shape} {dtype}", "variant": variant, "source": source,
                         "content": content, "mib": nbytes / MiB, "exact": exact,
                         "per_call_gbps": 2 * nbytes / per / 1e9,
                         "b2b_gbps": 2 * nbytes / b2b / 1e9,
                         "copy_gbps": 2 * nbytes / copy / 1e9,
                         "in_mod_2mib": ib.data_ptr() % (2 * MiB),
                         "out_mod_2mib": ob.data_ptr() % (2 * MiB),
                         "out_minus_in_mib": (ob.data_ptr() - ib.data_ptr()) / MiB,
                         "segment": seg}
                    print(json.dumps(r), flush=True)
                    rows_out.append(r)
                del x, o, bits, ib, ob
                if keep:
                    for k in keep:
                        k.free()
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001  (record it, go on with the next source)
                r = {"problem": f"{shape} {dtype}", "variant": variant, "source": source,
                     "error": repr(e)}
                print(json.dumps(r), flush=True)
                rows_out.append(r)
                torch.cuda.synchronize()
                torch.cuda.empty_cache()

    with open(a.out, "w") as f:
        for r in rows_out:
            f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
