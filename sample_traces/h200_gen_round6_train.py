"""Round 6, second part (issue 24): a *training* step eager and replayed from one CUDA graph, the truth pair
for ``--cuda-graphs`` on a step whose backward runs on autograd's own thread (the main thread waits for it:
the dependency graph's thread handoffs).

  train  5 x Linear(1024, 1024) (ReLU between) + Linear(1024, 10), batch 64, fp32, cross-entropy, SGD with
         momentum (capturable by default): ``eager`` runs zero_grad / forward / backward / step; ``graph``
         captured the same four in one torch.cuda.CUDAGraph (PyTorch's whole-network capture recipe: warm-up
         on a side stream, static input and target), each step copies a batch into them and replays.

Timing as h200_gen_round6.py (alternating rounds of 10 CUDA-event-timed steps, no sync between steps), then
torch.profiler, 4 active steps. Writes NAME.pt.trace.json.gz and round6_train_truth.json.
Usage: python3 h200_gen_round6_train.py OUT_DIR
"""
import json, os, statistics, sys

import torch, torch.nn as nn, torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r6t"
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)
TRUTH = {"env": {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name()}}


def unprofiled(step, n=10, warm=3):
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for s, e in marks:
        s.record(); step(); e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in marks]


def traced(name, step, active=4):
    import gzip
    path = f"{OUT}/{name}.pt.trace.json"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=active, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(2 + active):
            step(); prof.step()
        torch.cuda.synchronize()
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        g.write(f.read())
    os.remove(path)


layers = []
for _ in range(5):
    layers += [nn.Linear(1024, 1024), nn.ReLU()]
model = nn.Sequential(*layers, nn.Linear(1024, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
batches = [(torch.randn(64, 1024, device="cuda"), torch.randint(0, 10, (64,), device="cuda")) for _ in range(4)]
state = {"i": 0}


def next_batch():
    state["i"] += 1
    return batches[state["i"] % len(batches)]


def eager_step():
    x, y = next_batch()
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    opt.step()


static_x, static_y = batches[0][0].clone(), batches[0][1].clone()
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(static_x), static_y).backward()
        opt.step()
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(graph):
    static_loss = F.cross_entropy(model(static_x), static_y)
    static_loss.backward()
    opt.step()


def graph_step():
    x, y = next_batch()
    static_x.copy_(x)
    static_y.copy_(y)
    graph.replay()


steps = {"r6_train_eager": eager_step, "r6_train_graph": graph_step}
ms = {k: [] for k in steps}
for _ in range(5):
    for k, f in steps.items():
        ms[k] += unprofiled(f)
for k, f in steps.items():
    v = ms[k]
    TRUTH[k] = {"unprofiled": {"median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v), "all_ms": [round(x, 5) for x in v]}}
    traced(k, f)
    print(k, TRUTH[k]["unprofiled"]["median_ms"], flush=True)
with open(f"{OUT}/round6_train_truth.json", "w") as f:
    json.dump(TRUTH, f, indent=1)
