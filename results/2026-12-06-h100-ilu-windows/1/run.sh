#!/usr/bin/env bash
# stop 67 call 1: ILU(0) windows (runs fixed at construction; FEGPU_BENCH_CHAINS was the name then, 11 clamped to 8): the sparse tests with launches checked, quick applies over run counts, the full ILU bench
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 $3 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t sparse 200
FEGPU_BENCH_QUICK=1 FEGPU_BENCH_CHAINS=2,4,6,8,11 timeout 150 .gpu/bin/fegpu bench ilu > $R/quick.txt 2>&1; echo "quick rc=$?" >> $L
cat $R/quick.txt >> $L
FEGPU_BENCH_CHAINS=4,8 timeout 240 .gpu/bin/fegpu bench ilu tests/data/matrices/sherman5.mtx > $R/full.txt 2>&1; echo "full rc=$?" >> $L
grep -v "^ *[0-9]" $R/full.txt | head -60 >> $L
t krylov_methods 150
tar czf $OUT/r.tgz -C $OUT r
cat $L
