#!/usr/bin/env bash
# stop 68 call 1: the plane pipeline's per-block trace (scratch build .gpu/exp: %globaltimer at each block's entry, gate,
# mid-walk and end; window forced 0 under FEGPU_X_W0); touched tests on the GPU (launches checked); AMG on a 256^3 Laplacian; bicgstab_serial
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
L=$OUT/log.txt; R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=2 $3 > $R/test-$1.txt 2>&1; echo "$1 $3 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
env FEGPU_BENCH_SMALL=1 FEGPU_BENCH_QUICK=1 FEGPU_BENCH_BOXES=128x128x128,128x128x3 timeout 60 .gpu/exp/fegpu bench ilu > $OUT/trace-picked.txt 2>&1; echo "picked rc=$?" >> $L
grep -v TRACE $OUT/trace-picked.txt >> $L
env FEGPU_X_W0=1 FEGPU_BENCH_RUNS=43,8 FEGPU_BENCH_SMALL=1 FEGPU_BENCH_QUICK=1 FEGPU_BENCH_BOXES=128x128x128 timeout 50 .gpu/exp/fegpu bench ilu > $OUT/trace-w0.txt 2>&1; echo "w0 rc=$?" >> $L
grep -v TRACE $OUT/trace-w0.txt >> $L
t bad_input 40
t lbm 90
env FEGPU_BENCH_AMG_LAPLACIAN=256 FEGPU_BENCH_AMG="laplacian7 256" timeout 140 .gpu/bin/fegpu bench amg > $OUT/amg256.txt 2>&1; echo "amg256 rc=$?" >> $L
cat $OUT/amg256.txt >> $L
t cli 60
t sparse 30 describes
t fem 30 bad
for d in bad_input_fortran lbm_serial; do timeout 30 .gpu/drivers/$d > $R/$d.txt 2>&1; echo "$d rc=$?" >> $L; tail -2 $R/$d.txt >> $L; done
timeout 40 .gpu/drivers/bicgstab_serial > $OUT/bicgstab_serial.txt 2>&1; echo "bicgstab_serial rc=$?" >> $L; grep "ms serial" $OUT/bicgstab_serial.txt >> $L
t pipeline 40
t transpose 40
tar czf $OUT/r.tgz -C $OUT r
cat $L
