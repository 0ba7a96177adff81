#!/usr/bin/env bash
# round 2: scan bounds fixed; amg tests with launches checked, varied layers bench, porous driver, sanitizers
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 $3 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t amg 200
b() { FEGPU_BENCH_AMG="$1" timeout 200 .gpu/bin/fegpu bench amg > $R/$2.txt 2>&1; echo "$2 rc=$?" >> $L
  grep -h "  [a-z].*: [0-9]* rows\|AMG-CG\|hierarchy reused\|vs Jacobi\|Jacobi-CG\|first setup\|cycle .* ms = \|level [0-9]" $R/$2.txt >> $L; }
b varied varied-1
FEGPU_CHECK_LAUNCHES=1 timeout 60 .gpu/drivers/amg_porous > $R/amg_porous.txt 2>&1; echo "amg_porous rc=$?" >> $L
for tool in memcheck racecheck; do
  timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 .gpu/bin/fegpu solve .gpu/varied16.mtx --method cg --precond amg --aggregation parallel --cycle hybrid --coarsest 4 > $R/$tool.txt 2>&1; echo "$tool rc=$?" >> $L; tail -3 $R/$tool.txt >> $L
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
cat $L
