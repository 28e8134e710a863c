"""Round-8 GPU data for kviewer (issue 24): truth pairs for three program shapes no earlier pair has, traced by
torch.profiler and (the eager sides) by Nsight Systems too, so every projection is checked on programs it was not
tuned on and on both formats that carry launches.

  enc    4 layers of ``nn.TransformerEncoder`` (d 768, 12 heads, FF 3072, GELU, post-norm, batch_first), batch 32 x 256
         tokens, fp16, inference: ``eager`` (PyTorch's fused encoder fast path: one ``aten::_transformer_encoder_layer_fwd``
         op launching every kernel of a layer) and ``torch.compile`` -> ``--fuse all`` pair where one op launches many
         kernels
  dec    one decoding step of a 12-layer GPT-2-small-like model (d 768, 12 heads) over a static KV cache of 256
         positions, batch 4, fp16: ``eager`` (launch-bound) and the same step captured once and replayed as a CUDA graph
         (``torch.cuda.graph``; the step's token copied into the graph's input buffer first) -> ``--cuda-graphs`` pair
         with ~200 kernels a step
  mask   a training step of an MLP language-model head (batch 16 x 256 tokens, d 1024, vocabulary 8192, bf16 autocast,
         AdamW) whose loss is taken over the valid tokens: ``sync`` selects them with a boolean mask (``x[mask]``:
         ``nonzero`` copies the count to the host and waits) and ``nosync`` weights every token by the mask instead
         (``torch.where``-style, no wait) -> ``--no-sync`` pair where the removed sync is a framework op's, not the user's
  res    the matmul followed by its residual add, 4 layers ``x = x + gelu(x) @ W.t()`` over 8192 tokens, bf16, no bias,
         at d 4096 (``res4k``, the GEMM bound by compute) and d 1024 (``res1k``): ``eager`` (a GEMM, then an add kernel
         that reads both and writes the sum) and ``fused``, ``x.addmm_(gelu(x), W.t())`` (cuBLAS reads the residual
         as C with beta = 1 and writes the sum over it: one kernel) -> the fusion estimate of a GEMM + residual chain
         against the GEMM that really does it. Both start the step by copying the input into a work buffer. (The
         out-of-place ``torch.addmm(x, ...)`` is no fusion: PyTorch first copies C into the new output, a 64 MB
         device-to-device copy, then runs the same GEMM with beta = 1 over it.)

Every variant: warm-up (compilation / capture first), then unprofiled timing in alternating rounds of 10 CUDA-event-timed
steps, then torch.profiler with schedule(wait=1, warmup=1, active=4), record_shapes, one prof.step() a step
(``gen_pairs.py``).
Writes NAME.pt.trace.json.gz and round8_truth_PARTS.json (per variant: unprofiled median step, all step times, env).

``--nsys NAME``: run only that variant, 2 warm-up then 6 steps, each in an NVTX range ``step_N`` (for ``nsys profile
--trace cuda,nvtx``), no torch.profiler.
Usage: python3 h100_gen_round8.py OUT_DIR [PART ...]   (parts: enc dec mask res; default enc dec mask)
       python3 h100_gen_round8.py OUT_DIR --nsys r8_dec_eager
"""
import json, math, os, sys, time

import torch, torch.nn as nn, torch.nn.functional as F

from gen_pairs import record_pair as record_pair_of  # the script's own folder is sys.path[0]

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r8"
NSYS = sys.argv[sys.argv.index("--nsys") + 1] if "--nsys" in sys.argv else None
PARTS = [p for p in sys.argv[2:] if not p.startswith("--") and p != NSYS] or ["enc", "dec", "mask"]
os.makedirs(OUT, exist_ok=True)
DEV = "cuda"
TRUTH = {"env": {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name()}}


def record_pair(steps):
    record_pair_of(steps, OUT, TRUTH, NSYS)


# ---- enc: nn.TransformerEncoder inference, eager (fast path) vs torch.compile ------------------------------
def enc_pair():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True)
    enc = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).to(DEV).half().eval()
    x = torch.randn(32, 256, 768, device=DEV, dtype=torch.half)
    enc_c = torch.compile(enc)

    def eager():
        with torch.no_grad():
            return enc(x)

    def compiled():
        with torch.no_grad():
            return enc_c(x)

    for _ in range(3):
        compiled()
    record_pair({"r8_enc_eager": eager, "r8_enc_compiled": compiled})


# ---- dec: a decoding step over a static KV cache, eager vs one CUDA graph replay ---------------------------
class DecLayer(nn.Module):
    def __init__(self, d=768, h=12, cache=256, batch=4):
        super().__init__()
        self.h, self.dh = h, d // h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("k", torch.zeros(batch, h, cache, self.dh))
        self.register_buffer("v", torch.zeros(batch, h, cache, self.dh))

    def forward(self, x, pos, mask):
        b = x.shape[0]
        q, k, v = self.qkv(self.ln1(x)).view(b, 1, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        self.k.index_copy_(2, pos, k)  # the new position written on the GPU: no host value, so it captures
        self.v.index_copy_(2, pos, v)
        a = F.scaled_dot_product_attention(q, self.k, self.v, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(b, 1, -1))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


def dec_pair():
    torch.manual_seed(1)
    layers = nn.ModuleList([DecLayer() for _ in range(12)]).to(DEV).half().eval()
    emb = nn.Embedding(8192, 768).to(DEV).half()
    head_norm = nn.LayerNorm(768).to(DEV).half()
    cache = 256
    ar = torch.arange(cache, device=DEV)

    def forward(tok, pos):
        mask = (ar <= pos).view(1, 1, 1, cache)  # positions written so far
        x = emb(tok)
        for layer in layers:
            x = layer(x, pos, mask)
        return (head_norm(x) @ emb.weight.t()).argmax(-1)  # greedy: the next token stays on the GPU

    tok0 = torch.randint(0, 8192, (4, 1), device=DEV)
    pos0 = torch.tensor([100], device=DEV)
    state = {"tok": tok0.clone(), "pos": pos0.clone()}

    def eager():
        with torch.no_grad():
            nxt = forward(state["tok"], state["pos"])
        state["tok"] = nxt
        state["pos"] = (state["pos"] + 1) % cache
        return nxt

    static_tok, static_pos = tok0.clone(), pos0.clone()
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                forward(static_tok, static_pos)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = forward(static_tok, static_pos)
    gstate = {"tok": tok0.clone(), "pos": pos0.clone()}

    def graphed():
        static_tok.copy_(gstate["tok"])  # the step's inputs into the graph's buffers, as a real server does
        static_pos.copy_(gstate["pos"])
        graph.replay()
        gstate["tok"] = static_out.clone()
        gstate["pos"] = (gstate["pos"] + 1) % cache
        return gstate["tok"]

    record_pair({"r8_dec_eager": eager, "r8_dec_graph": graphed})


# ---- mask: a training step whose loss selects the valid tokens, with and without a sync --------------------
class Head(nn.Module):
    def __init__(self, d=1024, vocab=8192):
        super().__init__()
        self.fc, self.n, self.out = nn.Linear(d, 4 * d), nn.LayerNorm(4 * d), nn.Linear(4 * d, vocab)

    def forward(self, x):
        return self.out(self.n(F.gelu(self.fc(x))))


def mask_pair():
    torch.manual_seed(2)
    models = [Head().to(DEV).train() for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    x = torch.randn(16 * 256, 1024, device=DEV)
    target = torch.randint(0, 8192, (16 * 256,), device=DEV)
    valid = torch.rand(16 * 256, device=DEV) < 0.8  # padding: about a fifth of the tokens do not count

    def make(model, sync):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x).float()
            if sync:
                loss = F.cross_entropy(logits[valid], target[valid])  # boolean indexing: nonzero, a D2H wait
            else:
                w = valid.float()
                loss = (F.cross_entropy(logits, target, reduction="none") * w).sum() / w.sum()
            loss.backward()
            opt.step()
            return loss

        return step

    record_pair({"r8_mask_sync": make(models[0], True), "r8_mask_nosync": make(models[1], False)})


# ---- res: a GEMM and its residual add, as two kernels and as one (C = the residual, beta = 1) --------------
def res_pair(d, prefix):
    torch.manual_seed(3)
    ws = [torch.randn(d, d, device=DEV, dtype=torch.bfloat16) / math.sqrt(d) for _ in range(4)]
    x0 = torch.randn(8192, d, device=DEV, dtype=torch.bfloat16)
    buf = torch.empty_like(x0)

    def eager():
        with torch.no_grad():
            x = buf.copy_(x0)
            for w in ws:
                x = x + F.gelu(x) @ w.t()
            return x

    def fused():
        with torch.no_grad():
            x = buf.copy_(x0)
            for w in ws:
                x.addmm_(F.gelu(x), w.t())  # C = D = the residual: no copy of it
            return x

    torch.testing.assert_close(eager().clone(), fused(), rtol=0.05, atol=0.05)
    record_pair({f"{prefix}_eager": eager, f"{prefix}_fused": fused})


if "res" in PARTS:
    res_pair(4096, "r8_res4k")
    res_pair(1024, "r8_res1k")
if "enc" in PARTS:
    enc_pair()
if "dec" in PARTS:
    dec_pair()
if "mask" in PARTS:
    mask_pair()

if NSYS is None:
    with open(f"{OUT}/round8_truth_{'_'.join(PARTS)}.json", "w") as f:
        json.dump(TRUTH, f, indent=1)
print("done", time.strftime("%H:%M:%S"), flush=True)
