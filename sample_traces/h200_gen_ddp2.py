"""2-rank DDP truth data for kviewer issue 24 (cross-rank collective waits): one process per GPU,
torch.distributed NCCL, started by ``torchrun --nproc_per_node 2``.

Variants (``--variant``):
  balanced   both ranks run the same step
  straggler  rank 1 runs extra work before backward every step: EXTRA fp32 matmuls (2048^3, full fp32
             precision, so their kernels are not the model's bf16 GEMMs and ``kviewer whatif --kernel``
             can name them), inside record_function("straggler_work")

Per variant, every rank: (1) unprofiled truth: 10 warm-up steps, then N steps timed with CUDA events around
each step (no sync between steps) and the wall time per step; (2) a Kineto trace (record_shapes,
schedule(wait=1, warmup=2, active=4), prof.step() per step) written to OUT/VARIANT/rank-R.pt.trace.json.gz.
Rank 0 writes OUT/VARIANT/truth.json with both ranks' numbers and the environment.

Model: 8 x (Linear(2048, 2048) + GELU), bf16 parameters, batch 4096 rows, SGD, DDP (default buckets).
NCCL_NVLS_ENABLE=0 (NVLink multicast stays off on these machines).
"""
import argparse, gzip, json, os, statistics, time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, record_function, schedule

p = argparse.ArgumentParser()
p.add_argument("--variant", choices=["balanced", "straggler"], required=True)
p.add_argument("--out", default="/tmp/ddp2")
p.add_argument("--extra", type=int, default=6, help="fp32 2048^3 matmuls rank 1 adds per step (straggler)")
p.add_argument("--steps", type=int, default=40, help="timed unprofiled steps")
p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl",
               help="gloo: every rank on GPU 0 (NCCL refuses two ranks on one GPU), fp32, gradients all-reduced on the host")
p.add_argument("--width", type=int, default=2048)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--batch", type=int, default=4096)
a = p.parse_args()
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

dist.init_process_group(a.backend)
rank, world = dist.get_rank(), dist.get_world_size()
local = int(os.environ.get("LOCAL_RANK", rank)) if a.backend == "nccl" else 0
torch.cuda.set_device(local)
torch.manual_seed(0)
dev = torch.device("cuda", local)
BF = torch.bfloat16 if a.backend == "nccl" else torch.float32  # gloo: fp32 gradients
torch.backends.cuda.matmul.allow_tf32 = False  # the straggler's fp32 matmuls stay fp32 kernels

model = nn.Sequential(*[m for _ in range(a.layers) for m in (nn.Linear(a.width, a.width), nn.GELU())]).to(dev, BF)
ddp = DDP(model, device_ids=[local])
opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
x = torch.randn(a.batch, a.width, device=dev, dtype=BF)
ea = torch.randn(2048, 2048, device=dev)
eb = torch.randn(2048, 2048, device=dev)
straggle = a.variant == "straggler" and rank == 1


def step():
    opt.zero_grad(set_to_none=True)
    loss = ddp(x).float().pow(2).mean()
    if straggle:
        with record_function("straggler_work"):
            acc = ea
            for _ in range(a.extra):
                acc = torch.mm(acc, eb) * 1e-3
    loss.backward()
    opt.step()


def timing(n, warm=10):
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    t0 = time.perf_counter()
    for s, e in ev:
        s.record(); step(); e.record()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / n * 1e3
    ms = [s.elapsed_time(e) for s, e in ev]
    return {"n": n, "warmup": warm, "median_ms": statistics.median(ms), "mean_ms": statistics.mean(ms), "min_ms": min(ms),
            "max_ms": max(ms), "wall_ms_per_step": wall, "all_ms": [round(v, 5) for v in ms]}


truth = {"unprofiled": timing(a.steps)}
outdir = os.path.join(a.out, a.variant)
os.makedirs(outdir, exist_ok=True)
path = os.path.join(outdir, f"rank-{rank}.pt.trace.json")
dist.barrier()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
             schedule=schedule(wait=1, warmup=2, active=4, repeat=1), on_trace_ready=lambda pr: pr.export_chrome_trace(path)) as prof:
    for _ in range(7):
        step()
        prof.step()
    torch.cuda.synchronize()
with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
    g.write(f.read())
os.remove(path)
truth["after_profiler"] = timing(a.steps // 2, warm=3)
got = [None] * world
dist.all_gather_object(got, truth)
if rank == 0:
    doc = {"variant": a.variant, "extra": a.extra if a.variant == "straggler" else 0, "ranks": {str(r): t for r, t in enumerate(got)},
           "env": {"torch": torch.__version__, "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                   "device": torch.cuda.get_device_name(), "world": world, "backend": a.backend, "width": a.width,
                   "layers": a.layers, "batch": a.batch}}
    with open(os.path.join(outdir, "truth.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(a.variant, {r: round(t["unprofiled"]["median_ms"], 4) for r, t in enumerate(got)}, flush=True)
dist.destroy_process_group()
