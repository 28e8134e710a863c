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

Inference (no_grad). Writes NAME.pt.trace.json.gz and round11_truth.json. Usage: python3 h100_gen_round11.py OUT_DIR
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


def pair(prefix, x, causal, dtype, compiled=False):
    manual = nn.Sequential(*[Attn(causal=causal) for _ in range(4)]).to(DEV, dtype).eval()
    sdpa = nn.Sequential(*[Attn(sdpa=True, causal=causal) for _ in range(4)]).to(DEV, dtype).eval()
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


torch.manual_seed(11)
pair("r11_attc", torch.randn(8, 1024, 1024, device=DEV, dtype=torch.bfloat16), True, torch.bfloat16, compiled=True)
pair("r11_attn", torch.randn(4, 2048, 1024, device=DEV, dtype=torch.bfloat16), False, torch.bfloat16)
pair("r11_att32", torch.randn(16, 512, 1024, device=DEV, dtype=torch.float32), False, torch.float32)
with open(f"{OUT}/round11_truth.json", "w") as f:
    json.dump(TRUTH, f, indent=1)
print("done", time.strftime("%H:%M:%S"), flush=True)
