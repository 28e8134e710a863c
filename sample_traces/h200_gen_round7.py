"""Round-7 GPU data for kviewer (issue 24): truth pairs for model classes the earlier pairs do not cover, so the
what-if projections are checked on programs they were not tuned on (conv nets, a compiled *training* step, a
GPU-bound training loop with a logging sync).

  cnn    4 residual blocks (conv3x3 - BatchNorm - ReLU - conv3x3 - BatchNorm - add - ReLU), 64 channels, batch 32,
         56x56, fp16, channels_last, inference: ``eager`` and ``torch.compile`` (default mode: Inductor fuses the
         BatchNorm with the ReLU and with the residual add, the convolutions stay cuDNN's) -> ``--fuse all`` pair
  mlpt   training step of 4 pre-norm MLP blocks (LayerNorm - Linear(1024, 4096) - GELU - Dropout(0.1) -
         Linear(4096, 1024) - add), batch 8 x 512 tokens, bf16 autocast over fp32 weights, AdamW (foreach):
         ``eager`` and the module under ``torch.compile`` (forward and backward compiled, the optimizer eager)
         -> ``--fuse all`` pair on a training step (a GEMM's pre-activation is kept for the backward)
  log    the eager ``mlpt`` step with ``loss.item()`` read every step for logging (``sync``) and without
         (``nosync``) -> ``--no-sync`` pair on a GPU-bound loop (the projection must not promise much)
  cnnbig the ``cnn`` pair at batch 256, where both programs are bound by the GPU (at batch 32 both are
         bound by the host: the step-time pair then judges the host, not the fused kernels)
  gn     4 diffusion-UNet residual blocks (GroupNorm(32) - SiLU - conv3x3 - GroupNorm(32) - SiLU - conv3x3 -
         add), 128 channels, batch 64, 64x64, fp16, inference, eager and ``torch.compile``: GroupNorm is an op
         of several kernels (statistics, then the normalisation), which Inductor fuses with the SiLU
  cl     ``--channels-last`` pairs, eager both ways: the ``gn`` blocks (batch 64) and the ``cnn`` blocks (batch 128,
         GPU-bound), each NCHW and converted to channels_last (model and input, ``memory_format=torch.channels_last``)
  cnnt   the ``cnn`` blocks as a *training* step (batch 64, bf16 autocast over fp32 weights, channels_last, SGD
         with momentum), eager and the module under ``torch.compile``: BatchNorm in training is an op of several
         kernels (statistics, then the transform) whose transform Inductor fuses with the ReLU and the add

Every variant: warm-up (compilation first), then unprofiled timing in alternating rounds of 10 CUDA-event-timed
steps (no sync between steps), then torch.profiler with schedule(wait=1, warmup=1, active=4), record_shapes, one
prof.step() a step. Writes NAME.pt.trace.json.gz and round7_truth.json (per variant: unprofiled median step, all
step times, env).
Usage: python3 h200_gen_round7.py OUT_DIR [PART ...]   (parts: cnn mlpt log cnnbig gn cnnt cl; default cnn mlpt log)
"""
import json, os, sys, time

import torch, torch.nn as nn, torch.nn.functional as F
from gen_pairs import GNBlock, layout_pair, record_pair as record_pair_in  # the script's own folder is sys.path[0]

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r7"
PARTS = sys.argv[2:] or ["cnn", "mlpt", "log"]
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)
DEV = "cuda"
TRUTH = {"env": {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name()}}


def record_pair(steps):
    """Time the variants in alternating rounds (drift of the host's speed falls on all alike), then trace each."""
    record_pair_in(steps, OUT, TRUTH)


# ---- cnn: residual conv blocks, inference, eager vs torch.compile ------------------------------------------
class Block(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + x)


def cnn_pair(batch, prefix):
    cnn = nn.Sequential(*[Block() for _ in range(4)]).to(DEV).half().eval().to(memory_format=torch.channels_last)
    for m in cnn.modules():  # non-trivial statistics, so the BatchNorm is not an identity
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1); m.running_var.uniform_(0.5, 1.5)
    ximg = torch.randn(batch, 64, 56, 56, device=DEV, dtype=torch.half).to(memory_format=torch.channels_last)
    cnn_c = torch.compile(cnn)

    def cnn_eager():
        with torch.no_grad():
            return cnn(ximg)

    def cnn_compiled():
        with torch.no_grad():
            return cnn_c(ximg)

    for _ in range(3):
        cnn_compiled()
    record_pair({f"{prefix}_eager": cnn_eager, f"{prefix}_compiled": cnn_compiled})


if "gn" in PARTS:
    unet = nn.Sequential(*[GNBlock() for _ in range(4)]).to(DEV).half().eval()
    xg = torch.randn(64, 128, 64, 64, device=DEV, dtype=torch.half)
    unet_c = torch.compile(unet)

    def gn_eager():
        with torch.no_grad():
            return unet(xg)

    def gn_compiled():
        with torch.no_grad():
            return unet_c(xg)

    for _ in range(3):
        gn_compiled()
    record_pair({"r7_gn_eager": gn_eager, "r7_gn_compiled": gn_compiled})

def cnn_train_pair(batch=64):
    torch.manual_seed(2)
    nets = [nn.Sequential(*[Block() for _ in range(4)]).to(DEV).train().to(memory_format=torch.channels_last)
            for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    x = torch.randn(batch, 64, 56, 56, device=DEV).to(memory_format=torch.channels_last)

    def make(model):
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=True)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().square().mean()
            loss.backward()
            opt.step()
            return loss
        return step

    s_eager, s_comp = make(nets[0]), make(torch.compile(nets[1]))
    for _ in range(3):
        s_comp()
    record_pair({"r7_cnnt_eager": s_eager, "r7_cnnt_compiled": s_comp})


def cnn_stats(model):
    for m in model.modules():  # non-trivial statistics, so the BatchNorm is not an identity
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1); m.running_var.uniform_(0.5, 1.5)
    return model


def cl_pairs():
    torch.manual_seed(3)
    layout_pair(lambda: nn.Sequential(*[GNBlock() for _ in range(4)]).to(DEV).half().eval(),
                torch.randn(64, 128, 64, 64, device=DEV, dtype=torch.half), "r7_clgn", OUT, TRUTH)
    layout_pair(lambda: cnn_stats(nn.Sequential(*[Block() for _ in range(4)]).to(DEV).half().eval()),
                torch.randn(128, 64, 56, 56, device=DEV, dtype=torch.half), "r7_clcnn", OUT, TRUTH)


if "cl" in PARTS:
    cl_pairs()
if "cnnt" in PARTS:
    cnn_train_pair()
if "cnn" in PARTS:
    cnn_pair(32, "r7_cnn")
if "cnnbig" in PARTS:
    cnn_pair(256, "r7_cnnbig")


# ---- mlpt: a training step, eager vs the module compiled ---------------------------------------------------
class MLPBlock(nn.Module):
    def __init__(self, d=1024):
        super().__init__()
        self.n, self.fc1, self.fc2, self.drop = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d), nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.n(x)))))


def trainer(model, sync):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(8, 512, 1024, device=DEV)
    target = torch.randn(8, 512, 1024, device=DEV)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(model(x).float(), target)
        loss.backward()
        opt.step()
        if sync:
            return float(loss.item())  # logging the loss: a D2H copy and a wait every step
        return loss

    return step


torch.manual_seed(1)
m_eager = nn.Sequential(*[MLPBlock() for _ in range(4)]).to(DEV).train()
if "mlpt" in PARTS:
    m_comp = nn.Sequential(*[MLPBlock() for _ in range(4)]).to(DEV).train()
    m_comp.load_state_dict(m_eager.state_dict())
    step_eager, step_comp = trainer(m_eager, False), trainer(torch.compile(m_comp), False)
    for _ in range(3):
        step_comp()
    record_pair({"r7_mlpt_eager": step_eager, "r7_mlpt_compiled": step_comp})

# ---- log: the eager step with and without loss.item() ------------------------------------------------------
if "log" in PARTS:
    m_log = nn.Sequential(*[MLPBlock() for _ in range(4)]).to(DEV).train()
    m_log.load_state_dict(m_eager.state_dict())
    record_pair({"r7_log_sync": trainer(m_log, True), "r7_log_nosync": trainer(m_log, False)})

with open(f"{OUT}/round7_truth{'' if PARTS == ['cnn', 'mlpt', 'log'] else '_' + '_'.join(PARTS)}.json", "w") as f:
    json.dump(TRUTH, f, indent=1)
print("done", time.strftime("%H:%M:%S"), flush=True)
