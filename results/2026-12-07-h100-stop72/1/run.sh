#!/usr/bin/env bash
# stop 72, call 1: BiCGSTAB over small BSR systems as one cluster (new), the split retarget and ilu_colour
# (changed), Gpu::load_module, each with every launch checked; memcheck of the new kernel; then issue #20's
# bars in one run (scripts/gpu-round.sh --issue20); then the 5,880-row Newton loop twice more
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu FEGPU_MATRICES=$PWD/tests/data/matrices FEGPU_DATA=$PWD/tests/data
t0=$(date +%s)
step() { local name=$1; shift; FEGPU_CHECK_LAUNCHES=1 timeout 240 "$@" > $OUT/$name.txt 2>&1; echo "$name rc=$? at $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
step test-block .gpu/tests/block --test-threads=1
step test-krylov-small .gpu/tests/krylov_methods --test-threads=1 small_systems
step test-sparse .gpu/tests/sparse --test-threads=1 multicolour split
step test-cli-warm .gpu/tests/cli --test-threads=1 warm
step test-kernel-cache .gpu/tests/kernel_cache --test-threads=1
step memcheck-block /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/tests/block --test-threads=1 small_block
tail -3 $OUT/memcheck-block.txt
OUT=/tmp/r timeout 300 bash scripts/gpu-round.sh --issue20 > $OUT/round.txt 2>&1; echo "round rc=$? at $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
cp /tmp/r/warm.txt /tmp/r/gpu.txt $OUT/ 2>/dev/null
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | sed 's/^0000//' | tr 'A-F' 'a-f'); near=$(cat /sys/bus/pci/devices/$bus/local_cpulist)
for i in 2 3; do taskset -c "$near" .gpu/drivers/toughreact_newton 15 14 14 2 2>&1 | tail -3 > $OUT/toughreact-5880-run$i.txt; done
grep -h 'linear solves\|Jacobi-swept' $OUT/toughreact-5880-run*.txt
echo "done at $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
