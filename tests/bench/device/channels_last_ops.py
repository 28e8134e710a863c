"""Which eager PyTorch ops copy a channels_last input to NCHW (issue 24, ``kinds.EAGER_NCHW_OPS``).

Each op runs once on a channels_last fp16 CUDA tensor (64 x 128 x 64 x 64) under torch.profiler;
an op that converts its input shows an ``aten::contiguous`` / ``aten::clone`` / ``aten::copy_``
inside it, and its output's memory format says what the next op receives. Prints one JSON line
per op. Run on the GPU machine: ``python3 tests/bench/device/channels_last_ops.py``.
"""
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

torch.manual_seed(0)
x = torch.randn(64, 128, 64, 64, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
OPS = {
    "group_norm": nn.GroupNorm(32, 128).cuda().half(),
    "batch_norm (eval)": nn.BatchNorm2d(128).cuda().half().eval(),
    "batch_norm (train)": nn.BatchNorm2d(128).cuda().half().train(),
    "instance_norm": nn.InstanceNorm2d(128, affine=True).cuda().half(),
    "layer_norm over C,H,W": nn.LayerNorm([128, 64, 64]).cuda().half(),
    "conv2d 3x3": nn.Conv2d(128, 128, 3, padding=1).cuda().half().to(memory_format=torch.channels_last),
    "max_pool2d": nn.MaxPool2d(2),
    "avg_pool2d": nn.AvgPool2d(2),
    "adaptive_avg_pool2d": nn.AdaptiveAvgPool2d(1),
    "upsample nearest x2": nn.Upsample(scale_factor=2, mode="nearest"),
    "upsample bilinear x2": nn.Upsample(scale_factor=2, mode="bilinear"),
    "silu": nn.SiLU(),
    "gelu": nn.GELU(),
    "pixel_shuffle 2": nn.PixelShuffle(2),
    "dropout2d (train)": nn.Dropout2d(0.1).train(),
    "softmax over C": nn.Softmax(dim=1),
    "add": lambda t: t + t,
    "cat on C": lambda t: torch.cat([t, t], dim=1),
}
CONVERT = ("aten::contiguous", "aten::clone", "aten::copy_")
for name, op in OPS.items():
    with torch.no_grad():
        for _ in range(2):
            y = op(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            y = op(x)
            torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    top = [e.name for e in prof.events() if e.cpu_parent is None and e.name.startswith("aten::")]
    print(json.dumps({"op": name, "aten": top[:1], "converts": sorted({n for n in names if n in CONVERT}),
                      "out_channels_last": bool(y.dim() == 4 and y.is_contiguous(memory_format=torch.channels_last)),
                      "out_contiguous": bool(y.is_contiguous())}), flush=True)
print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name()}))
