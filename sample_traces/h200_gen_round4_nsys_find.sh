#!/bin/bash
# Find a working Nsight Systems pipeline on the device: profile -> (.qdstrm -> QdstrmImporter) -> export sqlite.
# Writes $W/nsys_env.sh (NSYS_PROF, NSYS_PLD, NSYS_QDI, NSYS_QLD, NSYS_EXP, NSYS_ELD).
set +e
G=$(cd "$(dirname "$0")" && pwd)
W=${W:-/tmp/w}; P=$W/probe; mkdir -p $P
mkdir -p /tmp/libdw; for f in $G/debs/*.deb; do dpkg -x $f /tmp/libdw; done
LIBDW=/tmp/libdw/usr/lib/x86_64-linux-gnu
echo "== which nsys: $(which nsys)"
ls -la /opt/nvidia/ /opt/nvidia/*/ 2>&1 | head -30
ls /opt/nvidia/nsight-compute/*/host/ /opt/nvidia/nsight-compute/*/host/*/ 2>&1 | head -80
ls -d /usr/local/cuda*/nsight* /opt/nvidia/nsight-systems* /usr/lib/nsight-systems* 2>&1
FOUND=$(timeout 60 find / \( -path /proc -o -path /sys -o -path /dev -o -path /tmp \) -prune -o -type f \( -name nsys -o -name 'QdstrmImporter*' -o -name 'libdw.so*' \) -print 2>/dev/null | sort -u)
echo "== found:"; echo "$FOUND"
CANDS=$( { which -a nsys 2>/dev/null; echo "$FOUND" | grep '/nsys$'; } | sort -u)
QDIS=$(echo "$FOUND" | grep 'QdstrmImporter')
for c in $CANDS; do echo "-- $c: $($c --version 2>&1 | head -2)"; ldd $c 2>&1 | grep 'not found'; done
for q in $QDIS; do echo "-- $q"; ldd $q 2>&1 | grep 'not found'; done
PROF=; PLD=; QDI=; QLD=; REP=; EXP=; ELD=; i=0
for c in $CANDS; do
  for ld in "" "$LIBDW"; do
    i=$((i+1)); echo "== [$i] profile with $c (extra LD: '$ld')"
    LD_LIBRARY_PATH="$ld:$LD_LIBRARY_PATH" timeout 60 $c profile -t cuda,nvtx -s none --cpuctxsw=none -o $P/p$i python3 $G/h200_gen_round4_tiny.py 2>&1 | tail -25
    ls -la $P/ | grep "p$i\."
    if [ -f $P/p$i.nsys-rep ]; then PROF=$c; PLD=$ld; REP=$P/p$i.nsys-rep; break 2; fi
    if [ -f $P/p$i.qdstrm ]; then
      for q in $QDIS; do for qld in "" "$LIBDW"; do
        echo "== import with $q (extra LD: '$qld')"
        LD_LIBRARY_PATH="$(dirname $q):$qld:$LD_LIBRARY_PATH" timeout 60 $q -i $P/p$i.qdstrm 2>&1 | tail -15
        if [ -f $P/p$i.nsys-rep ]; then PROF=$c; PLD=$ld; QDI=$q; QLD="$(dirname $q):$qld"; REP=$P/p$i.nsys-rep; break 4; fi
        LD_LIBRARY_PATH="$(dirname $q):$qld:$LD_LIBRARY_PATH" timeout 60 $q --input-file $P/p$i.qdstrm 2>&1 | tail -5
        if [ -f $P/p$i.nsys-rep ]; then PROF=$c; PLD=$ld; QDI="$q"; QLD="$(dirname $q):$qld"; REP=$P/p$i.nsys-rep; break 4; fi
      done; done
      break
    fi
  done
done
echo "== REP=$REP"
if [ -n "$REP" ]; then
  E2=$(echo "$QDIS" | xargs -n1 dirname 2>/dev/null | sed 's|$|/nsys|')
  for e in $CANDS $E2; do [ -x $e ] || continue; for ld in "" "$LIBDW"; do
    echo "== export with $e (extra LD: '$ld')"
    LD_LIBRARY_PATH="$ld:$LD_LIBRARY_PATH" timeout 60 $e export --type sqlite -f true -o $P/probe.sqlite $REP 2>&1 | tail -10
    if [ -s $P/probe.sqlite ]; then EXP=$e; ELD=$ld; break 2; fi
  done; done
fi
cat > $W/nsys_env.sh <<EOF
export NSYS_PROF="$PROF" NSYS_PLD="$PLD" NSYS_QDI="$QDI" NSYS_QLD="$QLD" NSYS_EXP="$EXP" NSYS_ELD="$ELD"
EOF
cat $W/nsys_env.sh
if [ -n "$EXP" ]; then
  LD_LIBRARY_PATH="$ELD:$LD_LIBRARY_PATH" $EXP stats --report nvtx_sum --format csv $P/probe.sqlite 2>&1 | tail -8
  LD_LIBRARY_PATH="$ELD:$LD_LIBRARY_PATH" $EXP stats --help-reports > $P/stats_help_reports.txt 2>&1
  LD_LIBRARY_PATH="$PLD:$LD_LIBRARY_PATH" $PROF profile --help > $P/profile_help.txt 2>&1
  LD_LIBRARY_PATH="$PLD:$LD_LIBRARY_PATH" $PROF profile --gpu-metrics-devices=help > $P/gpu_metrics_devices_help.txt 2>&1
  LD_LIBRARY_PATH="$PLD:$LD_LIBRARY_PATH" $PROF profile --gpu-metrics-set=help > $P/gpu_metrics_set_help.txt 2>&1
  $PROF --version; $EXP --version
  exit 0
fi
exit 1
