#!/usr/bin/env bash
# round 7 (final code): tests with launches checked, the whole AMG bench with its systems dumped, pyamg on them, the
# drivers and sanitizers
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t amg 200
t bad_input 60
t cli 90
t krylov_methods 60
t sparse 90
FEGPU_CHECK_LAUNCHES=1 timeout 60 .gpu/drivers/amg_porous > $R/amg_porous.txt 2>&1; echo "amg_porous rc=$?" >> $L; tail -1 $R/amg_porous.txt >> $L
timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/bin/fegpu solve .gpu/varied16.mtx --method cg --precond amg --aggregation parallel --cycle hybrid --coarsest 4 > $R/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $L; tail -1 $R/memcheck.txt >> $L
FEGPU_AMG_DUMP=/tmp/fegpu-amg timeout 300 .gpu/bin/fegpu bench amg > $R/bench-amg.txt 2>&1; echo "bench amg rc=$?" >> $L
grep -h "  [a-z].*: [0-9]* rows\|AMG-\|hierarchy reused\|vs Jacobi\|Jacobi-\|ILU(0)\|cycle .* ms = " $R/bench-amg.txt >> $L
pip install --no-deps --no-index --target /tmp/pyamg .wheels/pyamg-*.whl > /dev/null 2>&1 \
  && PYTHONPATH=/tmp/pyamg timeout 240 python3 peers/amg_pyamg.py /tmp/fegpu-amg > $R/peers-amg.txt 2>&1; echo "pyamg rc=$?" >> $L
cat $R/peers-amg.txt >> $L
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
cat $L
