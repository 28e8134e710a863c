"""The rate of PyTorch's layout copies between NCHW and channels_last (NHWC), by shape and dtype.

Run on a GPU machine: ``python tests/bench/device/permuted_copy_rates.py OUT.json``. For each
tensor it times, with CUDA events, no profiler, median of 30 after 5 warm-ups, each sample the mean of 10
copies queued back to back (``ns``: the copy's own time, as in a program whose stream is kept busy; on the H100
the host issues a copy every 20-25 us in this loop, so smaller copies time the host) and one
copy alone (``ns_alone``: with the launch and event latency, ~40 us on an H100, which hides small copies):

* ``to_cl``   ``x.contiguous(memory_format=torch.channels_last)`` from NCHW;
* ``to_nchw`` ``y.contiguous()`` from channels_last;
* ``clone``   ``x.clone()`` (a contiguous copy: the achievable copy bandwidth);

and, once under torch.profiler for two of the shapes, the kernel names each launches (the copy kernel PyTorch picks).
The figures check kviewer's model of a permuted copy (``kviewer.analysis.whatif``) on shapes and
dtypes the round-9 traces do not have.
"""

from __future__ import annotations

import json
import sys

import torch

SHAPES = [
    (8, 64, 256, 256), (4, 128, 128, 128), (16, 256, 64, 64), (32, 512, 32, 32), (64, 1024, 16, 16),
    (8, 3, 512, 512), (8, 16, 256, 256), (8, 32, 256, 256), (1, 64, 1024, 1024), (128, 64, 56, 56),
    (32, 96, 14, 14), (4, 64, 64, 64), (2, 320, 64, 64), (1, 4, 128, 128),
]
PROFILED = (SHAPES[0], SHAPES[5])  # the kernel names, for two shapes (a profiler session per case costs time)
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def timed(fn, inner: int = 1, reps: int = 30) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e6 / inner)  # ns per copy
    times.sort()
    return times[len(times) // 2]


def kernels(fn) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


def main() -> None:
    out = sys.argv[1]
    rows = []
    for dtype in DTYPES:
        for shape in SHAPES:
            x = torch.randn(shape, device="cuda").to(dtype)
            y = x.contiguous(memory_format=torch.channels_last)
            cases = {"to_cl": lambda: x.contiguous(memory_format=torch.channels_last), "to_nchw": lambda: y.contiguous(),
                     "clone": lambda: x.clone()}
            for what, fn in cases.items():
                rows.append({"shape": list(shape), "dtype": str(dtype).removeprefix("torch."), "elem": x.element_size(),
                             "bytes": x.numel() * x.element_size(), "what": what, "ns": timed(fn, inner=10), "ns_alone": timed(fn),
                             "kernels": kernels(fn) if shape in PROFILED else []})
            del x, y
            torch.cuda.empty_cache()
    p = torch.cuda.get_device_properties(0)
    json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "l2_bytes": getattr(p, "L2_cache_size", None),
               "sms": p.multi_processor_count, "rows": rows}, open(out, "w"), indent=1)
    for r in rows:
        print(r["dtype"], r["shape"], r["what"], f"{r['ns'] / 1e3:.1f} us", f"alone {r['ns_alone'] / 1e3:.1f} us",
              f"{2 * r['bytes'] / r['ns']:.0f} GB/s")


if __name__ == "__main__":
    main()
