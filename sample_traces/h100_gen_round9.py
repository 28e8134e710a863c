"""Round-9 GPU data for kviewer (issue 24): ``--channels-last`` against programs converted in eager whose normalisation
or upsampling op is one eager PyTorch runs only in NCHW, and whose kernels are launched by an op *inside* it.

  clin   5 residual blocks of a fast-style-transfer network, ``x + IN(conv(relu(IN(conv(x)))))`` with
         ``nn.InstanceNorm2d(affine=True)`` (eager: ``aten::instance_norm`` -> ``aten::batch_norm`` -> the kernels), 128
         channels, batch 16 x 128 x 128, fp16, inference
  clps   an ESPCN/EDSR-style x4 upsampler, ``conv(64->256) -> PixelShuffle(2) -> ReLU`` twice, then ``conv(64->3)``,
         batch 16 x 64 x 64 x 64, fp16, inference (eager: ``aten::pixel_shuffle`` -> ``aten::clone`` -> a copy kernel)

Each program traced NCHW (``_nchw``) and again with model and input converted to ``channels_last`` (``_cl``), eager
both ways, the same weights; unprofiled step times first, in alternating rounds (``gen_pairs.py``).
Writes NAME.pt.trace.json.gz and round9_truth.json.
Usage: python3 h100_gen_round9.py OUT_DIR
"""
import json, os, sys, time

import torch, torch.nn as nn

from gen_pairs import INBlock, layout_pair  # the script's own folder is sys.path[0]

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r9"
os.makedirs(OUT, exist_ok=True)
DEV = "cuda"
TRUTH = {"env": {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name()}}


def upsampler():
    return nn.Sequential(nn.Conv2d(64, 256, 3, padding=1), nn.PixelShuffle(2), nn.ReLU(),
                         nn.Conv2d(64, 256, 3, padding=1), nn.PixelShuffle(2), nn.ReLU(),
                         nn.Conv2d(64, 3, 3, padding=1))


torch.manual_seed(9)
layout_pair(lambda: nn.Sequential(*[INBlock() for _ in range(5)]).to(DEV).half().eval(),
            torch.randn(16, 128, 128, 128, device=DEV, dtype=torch.half), "r9_clin", OUT, TRUTH)
layout_pair(lambda: upsampler().to(DEV).half().eval(),
            torch.randn(16, 64, 64, 64, device=DEV, dtype=torch.half), "r9_clps", OUT, TRUTH)
with open(f"{OUT}/round9_truth.json", "w") as f:
    json.dump(TRUTH, f, indent=1)
print("done", time.strftime("%H:%M:%S"), flush=True)
