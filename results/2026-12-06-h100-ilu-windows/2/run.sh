#!/usr/bin/env bash
# stop 67 call 2: ILU(0) windows with runs picked on the device: the sparse tests, quick applies (runs; planes a block through
# a FEGPU_PIPE_PLANES knob that this build had and the final one drops), boxes of 3-64 planes, the full ILU bench
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 $3 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t sparse 200
q() { echo "== planes $1 runs $2" >> $L; FEGPU_PIPE_PLANES=$1 FEGPU_BENCH_QUICK=1 FEGPU_BENCH_RUNS=$2 timeout 100 .gpu/bin/fegpu bench ilu > $R/quick-$1-$2.txt 2>&1; grep "pipeline\|windows" $R/quick-$1-$2.txt >> $L; }
q 3 ""
q 3 4,6
q 2 ""
q 2 4,6,8
q 1 4,6,8
q 4 ""
FEGPU_BENCH_QUICK=1 FEGPU_BENCH_BOXES=128x128x3,128x128x12,128x128x32,128x128x64 timeout 100 .gpu/bin/fegpu bench ilu > $R/boxes.txt 2>&1; grep "laplacian7 128x\|pipeline" $R/boxes.txt >> $L
timeout 240 .gpu/bin/fegpu bench ilu > $R/full.txt 2>&1; echo "full rc=$?" >> $L
grep "pipeline\|windows\|no precond" $R/full.txt >> $L
tar czf $OUT/r.tgz -C $OUT r
cat $L
