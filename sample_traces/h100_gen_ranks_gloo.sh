#!/bin/bash
# Two ranks on ONE GPU (the single-GPU kinds; NCCL refuses two ranks on one device): h200_gen_ddp2.py
# with torch.distributed's gloo backend, both processes on GPU 0, fp32 DDP (4 x Linear(1024) + GELU,
# batch 2048), gradients all-reduced by gloo on the host. Real per-rank Kineto traces with their own
# clocks and step boundaries (kviewer's per-rank joins), not a straggler truth pair: the ranks share the GPU.
#   run(command="bash sample_traces/h100_gen_ranks_gloo.sh")
# Writes $OUT/ranks_gloo.tgz (balanced/ and straggler/: rank-0/1 Kineto traces + truth.json) and $OUT/log.txt.
set +e
export PYTHONUNBUFFERED=1
G=$(cd "$(dirname "$0")" && pwd); W=/tmp/ranks_gloo; OUT=${OUT:-/tmp/out}; mkdir -p $W $OUT
{ date; nvidia-smi -L; python3 -c 'import torch;print(torch.__version__, torch.version.cuda, torch.cuda.device_count())'; } > $OUT/log.txt 2>&1
for v in balanced straggler; do
  timeout -k 5 200 torchrun --standalone --nproc_per_node 2 $G/h200_gen_ddp2.py --variant $v --out $W --backend gloo \
    --width 1024 --layers 4 --batch 2048 --extra 4 --steps 20 >> $OUT/log.txt 2>&1
  echo "$v rc=$?" >> $OUT/log.txt
done
ls -laR $W >> $OUT/log.txt
(cd $W && tar czf $OUT/ranks_gloo.tgz balanced straggler)
