#!/bin/bash
# Driver for h200_gen_round4.py on the device: bash .gpu_gen/h200_gen_round4.sh ITEM...
# items: info nsys gemm_grid graph_pair sync_pair gpt compile_pair memory_stack gpu_metrics
# Each step is guarded by `timeout`; a global budget (BUDGET s) skips steps that no longer fit.
# Layout expected next to this script (it was run from an excluded folder .gpu_gen/ carried to the H200):
#   h200_gen_round4.py, h200_gen_round4_{nsys_find,nsys_cap,gpu_metrics}.sh, h200_gen_round4_tiny.py,
#   h200_workload.py (copy of shared/samples/h200_workload.py),
#   debs/libdw1_*.deb debs/libelf1_*.deb  (`apt-get download libdw1 libelf1`: QdstrmImporter needs libdw.so.1),
#   carry_in/gpt_train_gpu_metrics.nsys-rep (only for the gm_recipe* items).
# Runs made: (1) info nsys gemm_grid graph_pair sync_pair gpt compile_pair memory_stack gpu_metrics
#            (2) info nsys graph_pair graph_eager_nsys sync_pair gpt compile_pair gm_recipe   (3) nsys gm_recipe_csv ncu_lite
set +e
export PYTHONUNBUFFERED=1
G=$(cd "$(dirname "$0")" && pwd)
export W=/tmp/w; mkdir -p $W/logs
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PY="python3 $G/h200_gen_round4.py"
LOG=$OUT/log.txt
T0=$(date +%s); BUDGET=${BUDGET:-520}
say(){ echo "[$(( $(date +%s)-T0 ))s] $*" | tee -a $LOG; }
step(){ # step NAME TIMEOUT cmd...
  local name=$1 to=$2; shift 2
  local rem=$(( BUDGET - ($(date +%s)-T0) ))
  if [ $rem -lt 25 ]; then say "SKIP $name (rem=${rem}s)"; echo "$name SKIPPED" >> $W/steps.txt; return 99; fi
  [ $to -gt $((rem-5)) ] && to=$((rem-5))
  local t=$(date +%s)
  say "RUN $name (timeout $to): $*"
  timeout -k 5 $to "$@" > $W/logs/$name.log 2>&1; local rc=$?
  say "END $name rc=$rc $(( $(date +%s)-t ))s"
  tail -n 12 $W/logs/$name.log | cut -c1-400 | sed 's/^/    /' >> $LOG
  echo "$name rc=$rc secs=$(( $(date +%s)-t ))" >> $W/steps.txt
  return $rc
}
ncu_rows(){ ncu -i $1 --csv --page raw 2>/dev/null | tail -n +3 | wc -l; }
NCU="ncu --clock-control none"
for item in "$@"; do case $item in
info)
  { date; uname -a; nvidia-smi; ncu --version; python3 -c 'import torch,sys;print(sys.version);print(torch.__version__,torch.version.cuda,torch.cuda.get_device_name(),torch.backends.cudnn.version())'; } > $W/logs/info.log 2>&1
  cat $W/logs/info.log | head -40 >> $LOG ;;
nsys)
  step nsys_find 170 bash $G/h200_gen_round4_nsys_find.sh ;;
gemm_grid)
  I=$W/gemm_grid; mkdir -p $I
  step gemm_kineto 120 $PY gemm --mode kineto --out $I
  step gemm_ncu_full_step1 220 $NCU --set full --import-source no --nvtx --nvtx-include 'step_1/' -f -o $I/gemm_grid_step1_full $PY gemm --mode plain --iters 3 --out $I
  n=$(ncu_rows $I/gemm_grid_step1_full.ncu-rep); say "ncu full step_1 results: $n"
  if [ "$n" -lt 5 ]; then
    step gemm_ncu_full_step1_fallback 200 $NCU --set full --import-source no --profile-from-start off -f -o $I/gemm_grid_step1_full $PY gemm --mode plain --iters 3 --profstep 1 --out $I
    n=$(ncu_rows $I/gemm_grid_step1_full.ncu-rep); say "ncu full (profiler start/stop) results: $n"
  fi
  step gemm_ncu_window 120 $NCU --nvtx --nvtx-include 'step_1/' --kernel-name 'regex:nvjet|gemm|xmma|cutlass' -f -o $I/gemm_grid_step1_gemms_only $PY gemm --mode plain --iters 3 --out $I
  say "ncu window results: $(ncu_rows $I/gemm_grid_step1_gemms_only.ncu-rep)"
  for r in $I/*.ncu-rep; do ncu -i $r --csv --page raw | gzip -9 > ${r%.ncu-rep}.raw.csv.gz; done
  ncu -i $I/gemm_grid_step1_gemms_only.ncu-rep --csv --page details | gzip -9 > $I/gemm_grid_step1_gemms_only.details.csv.gz
  step gemm_nsys 150 $G/h200_gen_round4_nsys_cap.sh $I/gemm_grid_block2_nsys -t cuda,nvtx,cublas,cudnn -s none --cpuctxsw=none -- $PY gemm --mode plain --iters 3 --out $I
  ;;
graph_pair)
  I=$W/graph_pair; mkdir -p $I
  step graph_kineto 150 $PY mlp --variant eager,graph --out $I
  step graph_nsys_node 100 $G/h200_gen_round4_nsys_cap.sh $I/mlp_graph_nsys_node -t cuda,nvtx -s none --cpuctxsw=none --cuda-graph-trace=node -- $PY mlp --mode plain --variant graph --iters 5 --out $I
  step graph_nsys_graph 100 $G/h200_gen_round4_nsys_cap.sh $I/mlp_graph_nsys_graph -t cuda,nvtx -s none --cpuctxsw=none --cuda-graph-trace=graph -- $PY mlp --mode plain --variant graph --iters 5 --out $I
  ;;
graph_eager_nsys)
  I=$W/graph_pair; mkdir -p $I
  step graph_nsys_eager 100 $G/h200_gen_round4_nsys_cap.sh $I/mlp_eager_nsys -t cuda,nvtx -s none --cpuctxsw=none -- $PY mlp --mode plain --variant eager --iters 5 --out $I ;;
sync_pair)
  I=$W/sync_pair; mkdir -p $I
  step sync_kineto 120 $PY mlp --variant sync,nosync --out $I ;;
gpt)
  I=$W/gpt; mkdir -p $I
  step gpt_kineto 150 $PY gpt --out $I ;;
compile_pair)
  I=$W/compile_pair; mkdir -p $I
  step compile_kineto 240 $PY compile --variant eager,compiled --out $I ;;
memory_stack)
  I=$W/memory_stack; mkdir -p $I
  step memory_kineto 120 $PY gpt --mode memory --out $I
  step memory_nsys 120 $G/h200_gen_round4_nsys_cap.sh $I/gpt_train_nsys_memory -t cuda,nvtx -s none --cpuctxsw=none --cuda-memory-usage=true -- $PY gpt --mode plain --iters 3 --out $I
  ;;
gpu_metrics)
  step gpu_metrics 150 bash $G/h200_gen_round4_gpu_metrics.sh ;;
gm_recipe)
  I=$W/gpu_metrics; mkdir -p $I; cp $G/carry_in/gpt_train_gpu_metrics.nsys-rep /tmp/gm.nsys-rep
  step gm_recipe 100 bash -c "source $W/nsys_env.sh; \$NSYS_EXP recipe --help; \$NSYS_EXP recipe gpu_metric_util_sum --help; \$NSYS_EXP recipe gpu_metric_util_sum --input /tmp/gm.nsys-rep --output $I/recipe_gpu_metric_util_sum; ls -laR $I" ;;
gm_recipe_csv)
  I=$W/gpu_metrics; mkdir -p $I; cp $G/carry_in/gpt_train_gpu_metrics.nsys-rep /tmp/gm.nsys-rep
  for v in "" "--per-projected-nvtx" "--per-kernel"; do
    step gm_recipe_csv$v 60 bash -c "source $W/nsys_env.sh; \$NSYS_EXP recipe gpu_metric_util_sum --input /tmp/gm.nsys-rep --csv $v --output $I/recipe_gpu_metric_util_sum$v"
  done
  python3 -c "
import glob, pandas as pd
for f in glob.glob('$I/*/*.parquet'):
    d = pd.read_parquet(f); d.to_csv(f[:-8] + '.from_parquet.csv', index=False); print(f, d.shape)
" > $W/logs/parquet2csv.log 2>&1 ;;
ncu_lite)
  I=$W/gemm_grid; mkdir -p $I
  ncu --list-sections > $I/ncu_list_sections.txt 2>&1; ncu --list-sets > $I/ncu_list_sets.txt 2>&1
  step gemm_ncu_nopm 200 $NCU --section 'regex:^(?!PmSampling|SourceCounters).*$' --import-source no --nvtx --nvtx-include 'step_1/' -f -o $I/gemm_grid_step1_full_nopm $PY gemm --mode plain --iters 3 --out $I
  n=$(ncu_rows $I/gemm_grid_step1_full_nopm.ncu-rep); say "ncu nopm results: $n"
  if [ "$n" -lt 5 ]; then
    step gemm_ncu_nopm_list 200 $NCU --section SpeedOfLight --section SpeedOfLight_RooflineChart --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Chart --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section Occupancy --section InstructionStats --section SchedulerStats --section WarpStateStats --import-source no --nvtx --nvtx-include 'step_1/' -f -o $I/gemm_grid_step1_full_nopm $PY gemm --mode plain --iters 3 --out $I
    say "ncu nopm (list) results: $(ncu_rows $I/gemm_grid_step1_full_nopm.ncu-rep)"
  fi
  ncu -i $I/gemm_grid_step1_full_nopm.ncu-rep --csv --page raw | gzip -9 > $I/gemm_grid_step1_full_nopm.raw.csv.gz
  ncu -i $I/gemm_grid_step1_full_nopm.ncu-rep --print-sections-list > $I/nopm_sections.txt 2>&1
  gzip -9 -f $I/gemm_grid_step1_full_nopm.ncu-rep ;;
esac; done
say "packing"
cd $W
find $W -name '*.qdstrm' -delete
ls -laR $W > $W/logs/ls.txt 2>&1
[ -f gemm_grid/gemm_grid_step1_full.ncu-rep ] && gzip -9 -f gemm_grid/gemm_grid_step1_full.ncu-rep
[ -f gemm_grid/gemm_grid_step1_gemms_only.ncu-rep ] && gzip -9 -f gemm_grid/gemm_grid_step1_gemms_only.ncu-rep
pk(){ local name=$1; shift; local ds=""; for d in "$@"; do [ -e $d ] && ds="$ds $d"; done; [ -n "$ds" ] && tar czf $OUT/$name.tgz $ds; }
[ -f gemm_grid/gemm_grid_step1_full.ncu-rep.gz ] && mv gemm_grid/gemm_grid_step1_full.ncu-rep.gz $OUT/
pk gemm_grid gemm_grid
pk mlp graph_pair sync_pair
pk gpt gpt compile_pair
pk mem_metrics memory_stack gpu_metrics
cp steps.txt logs/ 2>/dev/null; cp nsys_env.sh logs/ 2>/dev/null
pk logs logs probe
for f in $OUT/*; do s=$(stat -c %s $f); if [ $s -gt 16200000 ]; then say "splitting $f ($s bytes)"; split -b 15M $f $f.part-; rm $f; fi; done
ls -la $OUT | tee -a $LOG
say "all done"
