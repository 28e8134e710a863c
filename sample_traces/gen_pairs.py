"""Helpers of the truth-pair generators run on the GPU machine (imported by the round 6 to 9 scripts).

A pair is a dict of named step functions: each is timed without a profiler in alternating rounds of CUDA-event-timed
steps (drift of the host's speed falls on all alike), then traced by torch.profiler; or, under Nsight Systems, only
the one named variant runs, each step in an NVTX range ``step_N``.
"""
import gzip, os, statistics

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule


class GNBlock(nn.Module):
    """A diffusion-UNet block with GroupNorm (eager PyTorch runs GroupNorm only in NCHW): rounds 7 and 10."""

    def __init__(self, c=128):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(32, c), nn.Conv2d(c, c, 3, padding=1)
        self.n2, self.c2 = nn.GroupNorm(32, c), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return x + self.c2(F.silu(self.n2(self.c1(F.silu(self.n1(x))))))


class INBlock(nn.Module):
    """A fast-style-transfer residual block with InstanceNorm (NCHW-only in eager, through batch_norm): rounds 9 and 10."""

    def __init__(self, c=128):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(c, c, 3, padding=1), nn.InstanceNorm2d(c, affine=True)
        self.c2, self.n2 = nn.Conv2d(c, c, 3, padding=1), nn.InstanceNorm2d(c, affine=True)

    def forward(self, x):
        return x + self.n2(self.c2(torch.relu(self.n1(self.c1(x)))))


def unprofiled(step, n=10, warm=3):
    """Milliseconds of ``n`` steps after ``warm`` unmeasured ones, from CUDA events (no sync between steps)."""
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for s, e in marks:
        s.record(); step(); e.record()
    torch.cuda.synchronize()
    return [round(s.elapsed_time(e), 5) for s, e in marks]


def traced(out, name, step, active=4):
    """OUT/NAME.pt.trace.json.gz: schedule(wait=1, warmup=1, active), record_shapes, one prof.step() a step."""
    path = f"{out}/{name}.pt.trace.json"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=active, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(2 + active):
            step(); prof.step()
        torch.cuda.synchronize()
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        g.write(f.read())
    os.remove(path)


def nsys_run(step, warm=2, steps=6):
    """For ``nsys profile --trace cuda,nvtx``: ``warm`` steps, then ``steps`` each in an NVTX range ``step_N``."""
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    for i in range(steps):
        torch.cuda.nvtx.range_push(f"step_{i}")
        step()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


def record_pair(steps, out, truth, nsys=None, rounds=5):
    """Time the variants in alternating rounds, then trace each; their unprofiled times go into ``truth``. With
    ``nsys`` (a variant's name) only that variant runs, under ``nsys_run``, if it is in this pair."""
    if nsys is not None:
        if nsys in steps:
            nsys_run(steps[nsys])
        return
    ms = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            ms[name] += unprofiled(step)
    for name, step in steps.items():
        v = ms[name]
        truth[name] = {"unprofiled": {"median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v), "all_ms": v}}
        traced(out, name, step)
        print(name, truth[name]["unprofiled"]["median_ms"], flush=True)


def layout_pair(make, x, prefix, out, truth, tol=0.05):
    """Eager NCHW against eager channels_last (model and input converted), the same weights and values (outputs equal
    within ``tol``): ``PREFIX_nchw`` and ``PREFIX_cl`` through :func:`record_pair`."""
    cl = torch.channels_last
    nchw, conv = make(), make()
    conv.load_state_dict(nchw.state_dict())
    conv = conv.to(memory_format=cl)
    x_cl = x.to(memory_format=cl)
    with torch.no_grad():
        torch.testing.assert_close(nchw(x), conv(x_cl), rtol=tol, atol=tol)

    def run(model, inp):
        def step():
            with torch.no_grad():
                return model(inp)
        return step

    record_pair({f"{prefix}_nchw": run(nchw, x), f"{prefix}_cl": run(conv, x_cl)}, out, truth)

