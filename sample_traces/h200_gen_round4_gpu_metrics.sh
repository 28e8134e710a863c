#!/bin/bash
# nsys with GPU metrics on a few GPT training steps (capture range = cudaProfilerStart/Stop around the NVTX steps)
set +e
G=$(cd "$(dirname "$0")" && pwd); W=${W:-/tmp/w}; I=$W/gpu_metrics; mkdir -p $I
source $W/nsys_env.sh
[ -z "$NSYS_PROF" ] && { echo "no working nsys way found"; exit 3; }
export EXTRA_REPORTS=""
COMMON="-t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi --capture-range-end=stop"
CMD="python3 $G/h200_gen_round4.py gpt --mode plain --iters 4 --profstart --out $I"
$G/h200_gen_round4_nsys_cap.sh $I/gpt_train_gpu_metrics $COMMON --gpu-metrics-devices=all -- $CMD 2>&1 | tee $I/nsys_run.log
if [ ! -s $I/gpt_train_gpu_metrics.sqlite ]; then
  echo "=== retry with older spelling --gpu-metrics-device=all"
  $G/h200_gen_round4_nsys_cap.sh $I/gpt_train_gpu_metrics $COMMON --gpu-metrics-device=all -- $CMD 2>&1 | tee $I/nsys_run_retry.log
fi
LD_LIBRARY_PATH="$NSYS_ELD:$LD_LIBRARY_PATH" $NSYS_EXP stats --help-reports > $I/stats_help_reports.txt 2>&1
LD_LIBRARY_PATH="$NSYS_PLD:$LD_LIBRARY_PATH" $NSYS_PROF profile --gpu-metrics-set=help > $I/gpu_metrics_set_help.txt 2>&1
LD_LIBRARY_PATH="$NSYS_PLD:$LD_LIBRARY_PATH" $NSYS_PROF profile --gpu-metrics-devices=help > $I/gpu_metrics_devices_help.txt 2>&1
for r in $(grep -o -i -E '^ *[a-z0-9_]*(metric|gpu_util|gpu_time_util)[a-z0-9_]*' $I/stats_help_reports.txt | sort -u); do
  echo "=== stats report $r"
  LD_LIBRARY_PATH="$NSYS_ELD:$LD_LIBRARY_PATH" $NSYS_EXP stats --report $r --format csv --force-overwrite true -o $I/gpt_train_gpu_metrics_stats $I/gpt_train_gpu_metrics.sqlite 2>&1 | tail -5
done
python3 - $I/gpt_train_gpu_metrics.sqlite <<'P'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
t = [r[0] for r in c.execute("select name from sqlite_master where type='table'")]
print("tables:", t)
for n in t:
    if "METRIC" in n.upper() or "GPU_" in n.upper():
        print(n, c.execute(f"select count(*) from {n}").fetchone())
try:
    print(c.execute("select * from TARGET_INFO_GPU_METRICS limit 50").fetchall())
except Exception as e: print(e)
P
ls -la $I
[ -s $I/gpt_train_gpu_metrics.sqlite ]
