"""Where the time of round 6's ``reduce`` pair goes, without any profiler (issue 24; the pair's what-if
misses are explained from these figures in BENCHMARKS.md). The same module and input as
sample_traces/h200_gen_round6.py: 8 x (Linear(2048, 2048) + SiLU), batch 4, bf16, inference.

* host_us: the host time of one call with the GPU idle before it (synchronize, perf_counter around the call);
* gpu_us: the time per call on the GPU when calls are queued back to back (CUDA events around 50 calls, the host
  ahead of the GPU), for the graph replay alone and for the replay after the input copy as the round-6 step does.
Usage: python3 round6_reduce_parts.py
"""
import json, statistics, time

import torch, torch.nn as nn

torch.manual_seed(0)
DEV, BF = "cuda", torch.bfloat16
mlp = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(2048, 2048), nn.SiLU())]).to(DEV, BF).eval()
xin = torch.randn(4, 2048, device=DEV, dtype=BF)
compiled = torch.compile(mlp, mode="reduce-overhead")
xg = xin.clone()
graph = torch.cuda.CUDAGraph()
with torch.no_grad():
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            mlp(xg)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph):
        yg = mlp(xg)


def eager():
    with torch.no_grad():
        return mlp(xin)


def comp():
    with torch.no_grad():
        return compiled(xin)


def replay():
    graph.replay()


def copy_replay():
    xg.copy_(xin)
    graph.replay()


for _ in range(5):
    comp()


def host_us(f, n=300):
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        f()
        out.append((time.perf_counter() - t0) * 1e6)
    return round(statistics.median(out), 2)


def gpu_us(f, n=50, reps=20):
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n):
            f()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) * 1e3 / n)
    return round(statistics.median(out), 2)


res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
for name, f in [("eager", eager), ("compiled", comp), ("replay", replay), ("copy_replay", copy_replay)]:
    host_us(f, 30)
    res[name] = {"host_us": host_us(f), "gpu_us_back_to_back": gpu_us(f)}
    print(name, res[name], flush=True)
res["copy_alone"] = {"host_us": host_us(lambda: xg.copy_(xin))}
print(json.dumps(res))
