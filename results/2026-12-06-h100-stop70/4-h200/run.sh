#!/usr/bin/env bash
# stop 70, call 4: the committed split solve, then issue #20's bars in one run, the timing runs bound to the GPU's CPUs (as scripts/gpu-round.sh binds them)
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu FEGPU_MATRICES=$PWD/tests/data/matrices FEGPU_DATA=$PWD/tests/data
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $S
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null | head -1 | sed 's/^0000//' | tr 'A-F' 'a-f')
near=$(cat "/sys/bus/pci/devices/$bus/local_cpulist" 2>/dev/null)
bind=(); [ -n "$near" ] && command -v taskset >/dev/null && bind=(taskset -c "$near")
echo "timing runs bound to CPUs: ${near:-(not found: unbound)}" | tee -a $S
t0=$(date +%s)
.gpu/bin/fegpu warm block > $OUT/warm.txt 2>&1; echo "warm rc=$? at $(( $(date +%s) - t0 )) s" | tee -a $S
FEGPU_CHECK_LAUNCHES=1 .gpu/tests/sparse --test-threads=1 multicolour > $OUT/log.txt 2>&1; echo "sparse multicolour rc=$?" | tee -a $S
FEGPU_BENCH_SWEEPS="multicolour,jacobi x1" timeout 150 "${bind[@]}" .gpu/bin/fegpu bench ilu > $OUT/bench-ilu.txt 2>&1; echo "bench ilu rc=$? at $(( $(date +%s) - t0 )) s" | tee -a $S
echo "=== bicgstab_serial" >> $OUT/drivers.txt; "${bind[@]}" .gpu/drivers/bicgstab_serial >> $OUT/drivers.txt 2>&1; echo "bicgstab_serial rc=$?" | tee -a $S
echo "=== toughreact 15 14 14 2" >> $OUT/drivers.txt; "${bind[@]}" .gpu/drivers/toughreact_newton 15 14 14 2 2>&1 | tail -4 >> $OUT/drivers.txt
echo "=== toughreact 100^3" >> $OUT/drivers.txt; timeout 150 "${bind[@]}" .gpu/drivers/toughreact_newton 100 100 100 1 1 2>&1 | tail -12 >> $OUT/drivers.txt; echo "toughreact rc=$? at $(( $(date +%s) - t0 )) s" | tee -a $S
echo "total $(( $(date +%s) - t0 )) s" | tee -a $S
