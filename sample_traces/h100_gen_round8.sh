#!/bin/bash
# Round 8 on the device (issue 24): the torch.profiler pairs and truth of h100_gen_round8.py, then the same
# programs under Nsight Systems (NVTX step_N; graphs traced per node) with their `nsys stats` oracles.
# usage: [SKIP_NSYS=1 | ONLY_NSYS=1] h100_gen_round8.sh OUT_DIR   (writes OUT_DIR/r8_kineto.tar and, where nsys works, OUT_DIR/r8_nsys.tar)
set +e
G=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-/tmp/r8out}; W=${W:-/tmp/w}; K=$W/kineto; N=$W/nsys
mkdir -p $OUT $K $N
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())'
if [ -z "$ONLY_NSYS" ]; then
  echo "== kineto $(date +%T)"
  timeout 420 python3 $G/h100_gen_round8.py $K enc dec mask 2>&1 | grep -v Warning | tail -20
  (cd $K && tar cf $OUT/r8_kineto.tar .)
  ls -la $K
  [ -n "$SKIP_NSYS" ] && exit 0
fi
echo "== nsys $(date +%T)"
W=$W timeout 150 bash $G/h200_gen_round4_nsys_find.sh > $W/find.log 2>&1
tail -5 $W/find.log
source $W/nsys_env.sh 2>/dev/null
[ -z "$NSYS_PROF" ] && { echo "no nsys"; cp $W/find.log $OUT/; exit 0; }
cap() {  # NAME [extra profile options]
  local name=$1; shift
  W=$W timeout 120 bash $G/h200_gen_round4_nsys_cap.sh $N/$name -t cuda,nvtx -s none --cpuctxsw=none "$@" -- \
    python3 $G/h100_gen_round8.py $N/py dec mask --nsys $name > $N/$name.log 2>&1
  tail -3 $N/$name.log
}
cap r8_dec_eager
cap r8_dec_graph --cuda-graph-trace=node
cap r8_mask_sync
cap r8_mask_nosync
rm -f $N/*.nsys-rep; rm -rf $N/py
gzip -9 $N/*.sqlite
$NSYS_EXP --version > $N/nsys_version.txt 2>&1
ls -la $N
(cd $N && tar cf $OUT/r8_nsys.tar .)
echo "== done $(date +%T)"
