#!/bin/bash
# usage: nsys_cap.sh OUTBASE [nsys profile options...] -- command...
# profile, import .qdstrm if needed, export sqlite, and nsys stats csv oracles.
set +e
source ${W:-/tmp/w}/nsys_env.sh
[ -z "$NSYS_PROF" ] && { echo "no working nsys way found"; exit 3; }
base=$1; shift
opts=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done; shift
rm -f $base.nsys-rep $base.qdstrm $base.sqlite
echo "+ $NSYS_PROF profile ${opts[*]} -o $base $*"
LD_LIBRARY_PATH="$NSYS_PLD:$LD_LIBRARY_PATH" $NSYS_PROF profile "${opts[@]}" -o $base "$@"
echo "profile rc=$?"
if [ ! -f $base.nsys-rep ] && [ -f $base.qdstrm ] && [ -n "$NSYS_QDI" ]; then
  echo "+ $NSYS_QDI -i $base.qdstrm"
  LD_LIBRARY_PATH="$NSYS_QLD:$LD_LIBRARY_PATH" $NSYS_QDI -i $base.qdstrm; echo "import rc=$?"
fi
[ -f $base.nsys-rep ] || { echo "no nsys-rep"; ls -la $(dirname $base); exit 4; }
rm -f $base.qdstrm
echo "+ $NSYS_EXP export --type sqlite -f true -o $base.sqlite $base.nsys-rep"
LD_LIBRARY_PATH="$NSYS_ELD:$LD_LIBRARY_PATH" $NSYS_EXP export --type sqlite -f true -o $base.sqlite $base.nsys-rep; echo "export rc=$?"
R=""; for r in cuda_gpu_kern_sum cuda_api_sum nvtx_sum cuda_gpu_mem_time_sum cuda_gpu_mem_size_sum cuda_gpu_trace $EXTRA_REPORTS; do R="$R --report $r"; done
echo "+ $NSYS_EXP stats $R --format csv --force-overwrite true -o ${base}_stats $base.sqlite"
LD_LIBRARY_PATH="$NSYS_ELD:$LD_LIBRARY_PATH" $NSYS_EXP stats $R --format csv --force-overwrite true -o ${base}_stats $base.sqlite; echo "stats rc=$?"
ls -la $(dirname $base)
[ -s $base.sqlite ]
