#!/usr/bin/env bash
# the capture keeps the side stream to its end, with its own fork and join events: AMG tests, the varied layers, lattice tests, amg_porous, racecheck
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result' $R/test-$1.txt >> $L; }
t amg 120
FEGPU_BENCH_AMG=varied timeout 120 .gpu/bin/fegpu bench amg > $R/varied.txt 2>&1; echo "varied rc=$?" >> $L
grep -h "AMG-CG\|hierarchy reused\|vs Jacobi\|Jacobi-CG\|last (re-)setup" $R/varied.txt >> $L
FEGPU_CHECK_LAUNCHES=1 timeout 60 .gpu/drivers/amg_porous > $R/amg_porous.txt 2>&1; echo "amg_porous rc=$?" >> $L
timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/bin/fegpu solve .gpu/varied16.mtx --method cg --precond amg --cycle hybrid --coarsest 4 > $R/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $L; tail -1 $R/racecheck.txt >> $L
t lbm 90
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
cat $L
