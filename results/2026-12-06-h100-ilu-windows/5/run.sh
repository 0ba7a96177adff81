#!/usr/bin/env bash
# stop 67 call 5 (the windows reported): the sparse and CLI tests with launches checked, a CLI solve's report, quick applies
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 $3 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t sparse 200
t cli 150
t krylov_methods 150
.gpu/bin/fegpu solve .gpu/box64.mtx --precond ilu0 > $R/solve.txt 2>&1; echo "solve rc=$?" >> $L; grep "ILU\|iterations\|times" $R/solve.txt >> $L
FEGPU_BENCH_QUICK=1 timeout 120 .gpu/bin/fegpu bench ilu > $R/quick.txt 2>&1; echo "quick rc=$?" >> $L; grep "ceiling\|pipeline\|windows" $R/quick.txt >> $L
tar czf $OUT/r.tgz -C $OUT r
cat $L
