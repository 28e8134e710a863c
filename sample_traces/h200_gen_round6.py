"""Round-6 GPU data for kviewer (issue 24): workloads the earlier truth pairs do not cover, made on one
NVIDIA H100/H200, to check the critical path and the what-if projections on programs written differently.

  decode   greedy decoding with a KV cache (2 decoder layers, d 4096, 32 heads, vocab 128256, bf16, batch 8,
           16 new tokens a step): variant ``sync`` reads each new token on the host (``.item()``: an EOS check,
           as sampling loops do), ``nosync`` keeps the tokens on the GPU -> truth pair for ``--no-sync``. The
           large vocabulary makes the LM head (1 GB of weights a token) the GPU work the sync waits for.
  reduce   8 x (Linear(2048, 2048) + SiLU), batch 4, bf16, inference: ``eager`` and
           ``torch.compile(mode="reduce-overhead")`` (Inductor, replayed through CUDA-graph trees)
           -> truth pair for ``--cuda-graphs --fuse all``; ``graph``: the eager module captured in one
           ``torch.cuda.CUDAGraph`` and replayed -> truth pair for ``--cuda-graphs``
  streams  a small conv net trained with fp16 autocast and GradScaler (one host sync a step in its inf
           check), the next batch copied from pinned memory on a side stream and joined by an event:
           no pair, a trace shaped unlike the others (critical path across streams, event waits)

Every variant: warm-up, then unprofiled timing (CUDA events around each step, no sync between steps; the
variants of a pair are timed in alternating rounds of 10 steps, so that drift of the host's speed falls on
both alike), then
torch.profiler with schedule(wait=1, warmup=1, active=4), record_shapes, one prof.step() a step. Writes
NAME.pt.trace.json.gz and round6_truth.json (per variant: unprofiled median step, all step times, env).
Usage: python3 h200_gen_round6.py OUT_DIR

Run on an H200 (torch 2.11.0+cu130) on 2026-12-05: ``taskset -c 4 python3 h200_gen_round6.py OUT``.
"""
import json, os, statistics, sys, time

import torch, torch.nn as nn, torch.nn.functional as F
from gen_pairs import record_pair as record_pair_in, traced, unprofiled  # the script's own folder is sys.path[0]

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r6"
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)
DEV, BF = "cuda", torch.bfloat16
TRUTH = {"env": {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name()}}


def record(name, step):
    ms = unprofiled(step, n=40, warm=10)
    TRUTH[name] = {"unprofiled": {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "all_ms": ms}}
    traced(OUT, name, step)
    print(name, TRUTH[name]["unprofiled"]["median_ms"], flush=True)


def record_pair(steps):
    """Time the variants in alternating rounds (drift of the host's speed falls on all alike), then trace each."""
    record_pair_in(steps, OUT, TRUTH)


# ---- decode: KV-cache greedy decoding ------------------------------------------------------------------
class Layer(nn.Module):
    def __init__(self, d=4096, h=32):
        super().__init__()
        self.h, self.qkv, self.o = h, nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, cache, pos):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.h, d // self.h).unbind(2)
        cache[0][:, pos:pos + t], cache[1][:, pos:pos + t] = k, v
        keys, vals = cache[0][:, :pos + t].transpose(1, 2), cache[1][:, :pos + t].transpose(1, 2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), keys, vals)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.n2(x))))


class Decoder(nn.Module):
    def __init__(self, vocab=128256, d=4096, layers=2):
        super().__init__()
        self.emb, self.layers, self.head = nn.Embedding(vocab, d), nn.ModuleList(Layer(d) for _ in range(layers)), nn.Linear(d, vocab)


dec = Decoder().to(DEV, BF).eval()
B, PROMPT, NEW, MAXLEN = 8, 64, 16, 128
prompt = torch.randint(0, 128256, (B, PROMPT), device=DEV)
caches = [(torch.zeros(B, MAXLEN, 32, 128, device=DEV, dtype=BF), torch.zeros(B, MAXLEN, 32, 128, device=DEV, dtype=BF)) for _ in dec.layers]


def decode_step(sync):
    with torch.no_grad():
        x, pos, tok, out = dec.emb(prompt), 0, None, []
        for i in range(NEW):
            for layer, cache in zip(dec.layers, caches):
                x = layer(x, cache, pos)
            pos += x.shape[1]
            tok = dec.head(x[:, -1]).argmax(-1)
            out.append(tok)
            if sync and int(tok[0].item()) < 0:  # an EOS check on the host (never true here, so both variants
                break                                # decode 16 tokens): a D2H copy and a wait every token
            x = dec.emb(tok)[:, None]
        return torch.stack(out, 1)


record_pair({"r6_decode_sync": lambda: decode_step(True), "r6_decode_nosync": lambda: decode_step(False)})

# ---- reduce: eager vs torch.compile(mode="reduce-overhead") ---------------------------------------------
mlp = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(2048, 2048), nn.SiLU())]).to(DEV, BF).eval()
xin = torch.randn(4, 2048, device=DEV, dtype=BF)
compiled = torch.compile(mlp, mode="reduce-overhead")


def eager_step():
    with torch.no_grad():
        return mlp(xin)


def compiled_step():
    with torch.no_grad():
        return compiled(xin)


xg = xin.clone()
graph = torch.cuda.CUDAGraph()
with torch.no_grad():
    side_warm = torch.cuda.Stream()
    side_warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side_warm):
        for _ in range(3):
            mlp(xg)
    torch.cuda.current_stream().wait_stream(side_warm)
    with torch.cuda.graph(graph):
        yg = mlp(xg)


def graph_step():
    xg.copy_(xin)  # the caller's input copied into the captured buffer, as a replay loop does
    graph.replay()
    return yg


for _ in range(5):  # compile and record the graphs before anything is timed
    compiled_step()
record_pair({"r6_reduce_eager": eager_step, "r6_reduce_compiled": compiled_step, "r6_reduce_graph": graph_step})

# ---- streams: AMP + GradScaler, next batch copied on a side stream ---------------------------------------
net = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).to(DEV)
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler("cuda")
side = torch.cuda.Stream()
host = [(torch.randn(32, 3, 64, 64).pin_memory(), torch.randint(0, 10, (32,)).pin_memory()) for _ in range(4)]
state = {"i": 0, "next": None, "ready": None}


def prefetch():
    xb, yb = host[state["i"] % len(host)]
    state["i"] += 1
    with torch.cuda.stream(side):
        state["next"] = (xb.to(DEV, non_blocking=True), yb.to(DEV, non_blocking=True))
        state["ready"] = torch.cuda.Event()
        state["ready"].record(side)


def train_step():
    if state["next"] is None:
        prefetch()
    torch.cuda.current_stream().wait_event(state["ready"])
    xb, yb = state["next"]
    xb.record_stream(torch.cuda.current_stream()); yb.record_stream(torch.cuda.current_stream())
    prefetch()  # the next batch's copy overlaps this step's compute
    with torch.autocast("cuda", dtype=torch.float16):
        loss = F.cross_entropy(net(xb), yb)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)  # reads found_inf on the host
    scaler.update()


record("r6_streams", train_step)

with open(f"{OUT}/round6_truth.json", "w") as f:
    json.dump(TRUTH, f, indent=1)
print("done", time.strftime("%H:%M:%S"), flush=True)
