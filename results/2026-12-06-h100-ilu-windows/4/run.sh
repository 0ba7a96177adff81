#!/usr/bin/env bash
# stop 67 call 4 (the runs' pick mended): the sparse tests with launches checked, memcheck and racecheck on a windowed CLI solve, the full ILU bench
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 $3 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t sparse 200
for s in pipe windows; do FEGPU_ILU_SWEEP=$s .gpu/bin/fegpu solve .gpu/box64.mtx --precond ilu0 > $R/solve-$s.txt 2>&1; echo "solve $s rc=$?" >> $L; grep "iterations\|residual\|times" $R/solve-$s.txt >> $L; done
for tool in memcheck racecheck; do
  timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 .gpu/bin/fegpu solve .gpu/box64.mtx --precond ilu0 > $R/$tool.txt 2>&1; echo "$tool rc=$?" >> $L; tail -2 $R/$tool.txt >> $L
done
timeout 240 .gpu/bin/fegpu bench ilu tests/data/matrices/sherman5.mtx > $R/bench-ilu.txt 2>&1; echo "bench rc=$?" >> $L
grep "pipeline\|windows\|no precond\|ceiling\|jacobi x1" $R/bench-ilu.txt >> $L
tar czf $OUT/r.tgz -C $OUT r
cat $L
