#!/bin/bash
# Driver of h200_gen_round5.py on the lent H200 (carried in a folder beside debs/ with libdw1 and libelf1 .debs,
# see h200_round4/NSYS.md for why nsys needs them). Usage: bash DIR/h200_gen_round5.sh; writes under $OUT.
set +x
G=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PY="python3 $G/h200_gen_round5.py"
T=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64
H=/opt/nvidia/nsight-compute/2025.3.1/host/linux-desktop-glibc_2_11_3-x64
{ date; nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c 'import torch;print(torch.__version__, torch.version.cuda)'; } > $OUT/info.txt 2>&1
# 1. Kineto profiler-range mode
timeout 150 $PY range --out $OUT/range > $OUT/range.log 2>&1; echo "range rc=$?" >> $OUT/info.txt
CUDA_ONLY=1 timeout 150 $PY range --out $OUT/range_cuda_only > $OUT/range_cuda_only.log 2>&1; echo "range cuda-only rc=$?" >> $OUT/info.txt
[ -f $OUT/range_cuda_only/range_counters.pt.trace.json ] && gzip -9 $OUT/range_cuda_only/range_counters.pt.trace.json
$T/nsys profile --help > $OUT/nsys_profile_help.txt 2>&1
SAMPLING=${SAMPLING:-}
[ -f $OUT/range/range_counters.pt.trace.json ] && gzip -9 $OUT/range/range_counters.pt.trace.json
# 2. nsys CPU sampling with backtraces
for f in $G/debs/*.deb; do dpkg -x $f /tmp/libdw; done
for bt in fp dwarf; do
  rm -f /tmp/s.qdstrm /tmp/s.nsys-rep
  timeout 150 $T/nsys profile -t cuda,nvtx -s cpu --backtrace=$bt --cpuctxsw=none $SAMPLING -o /tmp/s -f true $PY plain --iters 3 > $OUT/nsys_$bt.log 2>&1
  echo "nsys $bt rc=$?" >> $OUT/info.txt
  [ -f /tmp/s.qdstrm ] && LD_LIBRARY_PATH=$H:/tmp/libdw/usr/lib/x86_64-linux-gnu timeout 120 $H/QdstrmImporter -i /tmp/s.qdstrm >> $OUT/nsys_$bt.log 2>&1
  if [ -f /tmp/s.nsys-rep ]; then
    timeout 100 $T/nsys export --type sqlite -f true -o $OUT/cpu_sampling_$bt.sqlite /tmp/s.nsys-rep >> $OUT/nsys_$bt.log 2>&1
    python3 - $OUT/cpu_sampling_$bt.sqlite >> $OUT/info.txt 2>&1 <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for (t,) in c.execute("select name from sqlite_master where type='table' and name like '%SAMPL%' or name like '%CALLCHAIN%' or name like '%COMPOSITE%'"):
    print(t, c.execute(f"select count(*) from {t}").fetchone())
PY
    gzip -9 -f $OUT/cpu_sampling_$bt.sqlite
  fi
done
ls -la $OUT $OUT/range >> $OUT/info.txt
