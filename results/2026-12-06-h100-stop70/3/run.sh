#!/usr/bin/env bash
# stop 70, call 2: multicolour ILU(0) applied split with the retargeted tolerance: checks, issue #20's bars in one run, a profile of the split kernels
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu FEGPU_MATRICES=$PWD/tests/data/matrices FEGPU_DATA=$PWD/tests/data
CS=/usr/local/cuda/bin/compute-sanitizer
L=$OUT/log.txt; S=$OUT/summary.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $S
t0=$(date +%s)
.gpu/bin/fegpu compile > $OUT/compile.txt 2>&1; echo "compile rc=$? at $(( $(date +%s) - t0 )) s" | tee -a $S
for t in sparse krylov_methods cli bad_input block; do
  echo "=== test $t" >> $L; FEGPU_CHECK_LAUNCHES=1 .gpu/tests/$t --test-threads=1 >> $L 2>&1; echo "$t rc=$?" | tee -a $S
done
echo "=== memcheck" >> $L; $CS --tool memcheck --error-exitcode 9 .gpu/tests/sparse --test-threads=1 multicolour >> $L 2>&1; echo "memcheck multicolour rc=$?" | tee -a $S
echo "checks took $(( $(date +%s) - t0 )) s" | tee -a $S
FEGPU_BENCH_SWEEPS="windows,multicolour,jacobi x1" timeout 200 .gpu/bin/fegpu bench ilu > $OUT/bench-ilu.txt 2>&1; echo "bench ilu rc=$?" | tee -a $S
echo "=== bicgstab_serial" >> $OUT/drivers.txt; .gpu/drivers/bicgstab_serial >> $OUT/drivers.txt 2>&1; echo "bicgstab_serial rc=$?" | tee -a $S
echo "=== toughreact 15 14 14 2" >> $OUT/drivers.txt; .gpu/drivers/toughreact_newton 15 14 14 2 2>&1 | tail -4 >> $OUT/drivers.txt
echo "at $(( $(date +%s) - t0 )) s" | tee -a $S
echo "=== toughreact 100^3" >> $OUT/drivers.txt; timeout 150 .gpu/drivers/toughreact_newton 100 100 100 1 1 2>&1 | tail -12 >> $OUT/drivers.txt; echo "toughreact 1e6 rc=$?" | tee -a $S
echo "at $(( $(date +%s) - t0 )) s" | tee -a $S
timeout 120 python3 peers/peers.py sparse tests/data/matrices/sherman5.mtx > $OUT/peers-sparse.txt 2>&1; echo "peers rc=$?" | tee -a $S
echo "at $(( $(date +%s) - t0 )) s" | tee -a $S
echo "total $(( $(date +%s) - t0 )) s" | tee -a $S
