#!/usr/bin/env bash
# round 4 (final code): tests with launches checked, the varied layers twice, bench fem, amg_porous, sanitizers
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 $3 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t amg 200
b() { FEGPU_BENCH_AMG="$1" timeout 200 .gpu/bin/fegpu bench amg > $R/$2.txt 2>&1; echo "$2 rc=$?" >> $L
  grep -h "  [a-z].*: [0-9]* rows\|AMG-CG\|hierarchy reused\|vs Jacobi\|Jacobi-CG\|cycle .* ms = " $R/$2.txt >> $L; }
b varied varied-1
b "bench fem" fem
b varied varied-2
FEGPU_CHECK_LAUNCHES=1 timeout 60 .gpu/drivers/amg_porous > $R/amg_porous.txt 2>&1; echo "amg_porous rc=$?" >> $L; grep -i "parallel\|FAIL" $R/amg_porous.txt >> $L
t bad_input 60
t cli 60
t krylov_methods 60
t sparse 90
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/tests/amg the_devices_structure --test-threads=1 > $R/memcheck-test.txt 2>&1; echo "memcheck test rc=$?" >> $L; tail -2 $R/memcheck-test.txt >> $L
for tool in memcheck racecheck; do
  timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 .gpu/bin/fegpu solve .gpu/varied16.mtx --method cg --precond amg --aggregation parallel --cycle hybrid --coarsest 4 > $R/$tool.txt 2>&1; echo "$tool rc=$?" >> $L; tail -2 $R/$tool.txt >> $L
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
cat $L
