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
import json, os, sys

import torch, torch.nn as nn, torch.nn.functional as F
from gen_pairs import record_pair  # the script's own folder is sys.path[0]

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r6t"
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)
TRUTH = {"env": {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name()}}


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


record_pair({"r6_train_eager": eager_step, "r6_train_graph": graph_step}, OUT, TRUTH)
with open(f"{OUT}/round6_train_truth.json", "w") as f:
    json.dump(TRUTH, f, indent=1)
