"""Round-11 GPU data for kviewer (issue 24): the fusion of an *unfused attention*, never checked before against the
kernel that replaces it. ``kviewer fusion`` finds ``bmm -> (scale, mask)* -> softmax -> bmm`` chains and names
FlashAttention / SDPA as the remedy; ``kviewer whatif --fuse ID`` projects the step with each such chain replaced by
one kernel at its estimated fused time. Truth: the same blocks (same weights, outputs equal) with
``F.scaled_dot_product_attention`` in place of the hand-written attention, and the hand-written one under
``torch.compile`` (whatever Inductor makes of it).

  attc   4 self-attention blocks (qkv projection, causal attention, output projection, residual add), bf16,
         batch 8, 1,024 tokens, 16 heads of 64: hand-written (``attc_manual``), SDPA with ``is_causal``
         (``attc_sdpa``), the hand-written one compiled (``attc_compiled``)
  attn   the same blocks without a mask at 2,048 tokens, batch 4 (``attn_manual``, ``attn_sdpa``)
  att32  the unmasked blocks in fp32 at 512 tokens, batch 16 (SDPA picks another kernel for fp32:
         ``att32_manual``, ``att32_sdpa``)

Part ``hf`` (held out: written after the rules were fitted on the three above), attention as Hugging Face's eager
implementations write it:

  gpt2   GPT-2's: ``torch.where`` with a lower-triangular buffer and the dtype's minimum, the scores divided by a
         0-d tensor; fp16, batch 8 x 1,024 tokens, 12 heads of 64 (``gpt2_manual``, ``gpt2_sdpa``)
  llama  Llama's: grouped-query attention (32 query heads, 8 key/value heads of 128, ``repeat_kv`` by expand +
         reshape), an additive causal mask, softmax in fp32 cast back to bf16; batch 2 x 2,048 tokens
         (``llama_manual``, ``llama_sdpa``)

Inference (no_grad). Writes NAME.pt.trace.json.gz and round11_truth.json (round11_hf_truth.json for ``hf``).
Usage: python3 h100_gen_round11.py OUT_DIR [hf]
"""
import json, math, os, sys, time

import torch, torch.nn as nn
import torch.nn.functional as F

from gen_pairs import record_pair  # the script's own folder is sys.path[0]

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r11"
os.makedirs(OUT, exist_ok=True)
DEV = "cuda"
TRUTH = {"env": {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name()}}


class Attn(nn.Module):
    def __init__(self, d=1024, heads=16, sdpa=False, causal=False):
        super().__init__()
        self.h, self.sdpa, self.causal = heads, sdpa, causal
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.h)
            if self.causal:
                mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
                scores = scores.masked_fill(mask, float("-inf"))
            y = scores.softmax(dim=-1) @ v
        return x + self.o(y.transpose(1, 2).reshape(b, s, d))


class GPT2Attn(nn.Module):
    def __init__(self, d=768, heads=12, sdpa=False, n=1024):
        super().__init__()
        self.h, self.sdpa = heads, sdpa
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.register_buffer("bias", torch.tril(torch.ones(n, n, dtype=torch.bool)).view(1, 1, n, n), persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in self.c_attn(x).split(d, dim=2))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            w = torch.matmul(q, k.transpose(-1, -2))
            w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
            w = torch.where(self.bias[:, :, :s, :s], w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device))
            y = torch.matmul(F.softmax(w, dim=-1).type(v.dtype), v)
        return x + self.c_proj(y.transpose(1, 2).contiguous().view(b, s, d))


class LlamaAttn(nn.Module):
    def __init__(self, d=4096, heads=32, kv=8, sdpa=False):
        super().__init__()
        self.h, self.kv, self.hd, self.sdpa = heads, kv, d // heads, sdpa
        self.q, self.k = nn.Linear(d, d, bias=False), nn.Linear(d, kv * self.hd, bias=False)
        self.v, self.o = nn.Linear(d, kv * self.hd, bias=False), nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q = self.q(x).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv, self.hd).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv, self.hd).transpose(1, 2)
        rep = self.h // self.kv  # repeat_kv: expand, then reshape (a copy)
        k = k[:, :, None].expand(b, self.kv, rep, s, self.hd).reshape(b, self.h, s, self.hd)
        v = v[:, :, None].expand(b, self.kv, rep, s, self.hd).reshape(b, self.h, s, self.hd)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            mask = torch.full((s, s), torch.finfo(x.dtype).min, device=x.device, dtype=x.dtype).triu(1)
            w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd) + mask
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            y = torch.matmul(w, v)
        return x + self.o(y.transpose(1, 2).reshape(b, s, d))


def pair(prefix, block, x, dtype, n_blocks=4, compiled=False):
    """``n_blocks`` of ``block(sdpa)`` written by hand and with SDPA, the same weights (and the hand-written ones under
    torch.compile with ``compiled``), through record_pair."""
    manual = nn.Sequential(*[block(False) for _ in range(n_blocks)]).to(DEV, dtype).eval()
    sdpa = nn.Sequential(*[block(True) for _ in range(n_blocks)]).to(DEV, dtype).eval()
    sdpa.load_state_dict(manual.state_dict())
    with torch.no_grad():
        diff = (manual(x).float() - sdpa(x).float()).abs().max().item()
    TRUTH[f"{prefix}_max_abs_diff"] = diff  # the same blocks: the outputs agree to the dtype's rounding
    print(prefix, "max |manual - sdpa|", diff, flush=True)

    def run(model):
        def step():
            with torch.no_grad():
                return model(x)
        return step

    steps = {f"{prefix}_manual": run(manual), f"{prefix}_sdpa": run(sdpa)}
    if compiled:
        comp = torch.compile(manual)
        with torch.no_grad():
            for _ in range(3):
                comp(x)
        steps[f"{prefix}_compiled"] = run(comp)
    record_pair(steps, OUT, TRUTH)


if sys.argv[2:] == ["hf"]:
    torch.manual_seed(111)
    pair("r11_gpt2", lambda sdpa: GPT2Attn(sdpa=sdpa), torch.randn(8, 1024, 768, device=DEV, dtype=torch.float16), torch.float16)
    pair("r11_llama", lambda sdpa: LlamaAttn(sdpa=sdpa), torch.randn(2, 2048, 4096, device=DEV, dtype=torch.bfloat16) * 0.1,
         torch.bfloat16, n_blocks=2)
    with open(f"{OUT}/round11_hf_truth.json", "w") as f:
        json.dump(TRUTH, f, indent=1)
    print("done", time.strftime("%H:%M:%S"), flush=True)
    sys.exit(0)

torch.manual_seed(11)
pair("r11_attc", lambda sdpa: Attn(sdpa=sdpa, causal=True), torch.randn(8, 1024, 1024, device=DEV, dtype=torch.bfloat16),
     torch.bfloat16, compiled=True)
pair("r11_attn", lambda sdpa: Attn(sdpa=sdpa), torch.randn(4, 2048, 1024, device=DEV, dtype=torch.bfloat16), torch.bfloat16)
pair("r11_att32", lambda sdpa: Attn(sdpa=sdpa), torch.randn(16, 512, 1024, device=DEV, dtype=torch.float32), torch.float32)
with open(f"{OUT}/round11_truth.json", "w") as f:
    json.dump(TRUTH, f, indent=1)
print("done", time.strftime("%H:%M:%S"), flush=True)
