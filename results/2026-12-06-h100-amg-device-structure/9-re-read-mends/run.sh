#!/usr/bin/env bash
# round 9 (re-read mends): the AMG tests with launches checked, the driver, the varied layers' bench
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t amg 200
FEGPU_CHECK_LAUNCHES=1 timeout 60 .gpu/drivers/amg_porous > $R/amg_porous.txt 2>&1; echo "amg_porous rc=$?" >> $L; tail -1 $R/amg_porous.txt >> $L
FEGPU_BENCH_AMG=varied timeout 150 .gpu/bin/fegpu bench amg > $R/varied.txt 2>&1; echo "varied rc=$?" >> $L
grep -h "AMG-CG\|hierarchy reused\|vs Jacobi\|Jacobi-CG\|first setup" $R/varied.txt | grep -A3 "parallel\|hybrid cycle, f32 \|Jacobi-CG " >> $L
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
cat $L
