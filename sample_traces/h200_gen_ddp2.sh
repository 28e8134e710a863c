#!/bin/bash
# Driver for h200_gen_ddp2.py on nvidia-h200-x2 (two H200 GPUs of one host):
#   run(kind="nvidia-h200-x2", command="bash sample_traces/h200_gen_ddp2.sh")
# Writes $OUT/ddp2.tgz (balanced/ and straggler/: rank-0/1 Kineto traces + truth.json) and $OUT/log.txt.
set +e
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
G=$(cd "$(dirname "$0")" && pwd); W=/tmp/ddp2; OUT=${OUT:-/tmp/out}; mkdir -p $W $OUT
{ date; nvidia-smi -L; python3 -c 'import torch;print(torch.__version__, torch.version.cuda, torch.cuda.device_count())'; } > $OUT/log.txt 2>&1
for v in balanced straggler; do
  timeout -k 5 200 torchrun --standalone --nproc_per_node 2 $G/h200_gen_ddp2.py --variant $v --out $W >> $OUT/log.txt 2>&1
  echo "$v rc=$?" >> $OUT/log.txt
done
ls -laR $W >> $OUT/log.txt
(cd $W && tar czf $OUT/ddp2.tgz balanced straggler)
