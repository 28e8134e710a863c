"""Round-10 GPU data for kviewer (issue 24): ``--channels-last`` on programs of another dtype than the fp16 ones the
permuted copies' rate was fitted on (rounds 7 and 9). Eager NCHW against eager ``channels_last``, the same weights:

  clgn32  round 7's diffusion-UNet GroupNorm blocks (4 x ``x + conv(silu(GN(conv(silu(GN(x))))))``, 128 channels) in
          fp32, batch 32 x 128 x 64 x 64: the same 64 MiB a tensor as round 7's fp16 batch of 64, half the elements
  clin32  round 9's style-transfer InstanceNorm blocks (5 x ``x + IN(conv(relu(IN(conv(x)))))``) in fp32, batch
          8 x 128 x 128 x 128 (64 MiB a tensor)
  clgnbf  the GroupNorm blocks in bf16 at round 7's shape (64 x 128 x 64 x 64)

fp32 convolutions run as cuDNN chooses by default (TF32 allowed). A model of the copies by bytes projects the fp32
programs' copies at the time of the fp16 ones; a model by elements at half of it.
Writes NAME.pt.trace.json.gz and round10_truth.json. Usage: python3 h100_gen_round10.py OUT_DIR
"""
import json, os, sys, time

import torch, torch.nn as nn

from gen_pairs import GNBlock, INBlock, layout_pair  # the script's own folder is sys.path[0]

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r10"
os.makedirs(OUT, exist_ok=True)
DEV = "cuda"
TRUTH = {"env": {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(),
                 "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}}


torch.manual_seed(10)
layout_pair(lambda: nn.Sequential(*[GNBlock() for _ in range(4)]).to(DEV).float().eval(),
            torch.randn(32, 128, 64, 64, device=DEV, dtype=torch.float32), "r10_clgn32", OUT, TRUTH)
layout_pair(lambda: nn.Sequential(*[INBlock() for _ in range(5)]).to(DEV).float().eval(),
            torch.randn(8, 128, 128, 128, device=DEV, dtype=torch.float32), "r10_clin32", OUT, TRUTH)
layout_pair(lambda: nn.Sequential(*[GNBlock() for _ in range(4)]).to(DEV).bfloat16().eval(),
            torch.randn(64, 128, 64, 64, device=DEV, dtype=torch.bfloat16), "r10_clgnbf", OUT, TRUTH, tol=0.25)
with open(f"{OUT}/round10_truth.json", "w") as f:
    json.dump(TRUTH, f, indent=1)
print("done", time.strftime("%H:%M:%S"), flush=True)
