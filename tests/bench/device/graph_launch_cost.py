"""Host cost of one CUDA graph launch against the number of kernel nodes, on the GPU machine (issue 24).

Each graph is N small elementwise kernels captured with torch.cuda.graph. Each replay is timed on the
host (perf_counter around ``graph.replay()``) with the GPU idle before it (a synchronize between
replays), so the figure is the launch call alone: once without any profiler and once inside
torch.profiler (CPU + CUDA activities), where CUPTI also traces every node the graph releases.
Prints one JSON object: {N: {"plain_us": median, "profiled_us": median}}.
Usage: python3 graph_launch_cost.py
"""
import json, statistics, time

import torch
from torch.profiler import ProfilerActivity, profile

x = torch.zeros(1024, device="cuda")


def graph_of(n):
    g = torch.cuda.Graph() if hasattr(torch.cuda, "Graph") else torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        x.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for _ in range(n):
            x.add_(1)
    return g


def launch_us(g, reps=200):
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        g.replay()
        out.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(out)


res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
for n in (1, 4, 8, 16, 32, 64, 128, 256, 512):
    g = graph_of(n)
    launch_us(g, 20)
    plain = launch_us(g)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        prof = launch_us(g)
    res[n] = {"plain_us": round(plain, 2), "profiled_us": round(prof, 2)}
    print(n, res[n], flush=True)
print(json.dumps(res))
