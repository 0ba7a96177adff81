#!/usr/bin/env bash
# stop 67 call 3 (the windows the default): the touched tests with launches checked, memcheck and racecheck on a windowed solve, the full ILU bench and CuPy's ILU(0) path beside
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 $3 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t sparse 200
t krylov_methods 150
t bad_input 150
t block 150
t cli 150
.gpu/bin/fegpu solve .gpu/box64.mtx --precond ilu0 > $R/solve.txt 2>&1; echo "solve rc=$?" >> $L; tail -3 $R/solve.txt >> $L
for tool in memcheck racecheck; do
  timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 .gpu/bin/fegpu solve .gpu/box64.mtx --precond ilu0 > $R/$tool.txt 2>&1; echo "$tool rc=$?" >> $L; tail -2 $R/$tool.txt >> $L
done
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/tests/sparse ilu0_windows --test-threads=1 > $R/memcheck-test.txt 2>&1; echo "memcheck test rc=$?" >> $L; tail -2 $R/memcheck-test.txt >> $L
timeout 200 .gpu/drivers/bicgstab_serial > $R/bicgstab_serial.txt 2>&1; echo "bicgstab_serial rc=$?" >> $L; tail -4 $R/bicgstab_serial.txt >> $L
timeout 240 .gpu/bin/fegpu bench ilu tests/data/matrices/sherman5.mtx > $R/bench-ilu.txt 2>&1; echo "bench rc=$?" >> $L
grep "pipeline\|windows\|no precond\|ceiling" $R/bench-ilu.txt >> $L
timeout 200 python3 peers/peers.py sparse tests/data/matrices/sherman5.mtx > $R/peers.txt 2>&1; echo "peers rc=$?" >> $L
grep -i "ilu\|gmres" $R/peers.txt >> $L
tar czf $OUT/r.tgz -C $OUT r
cat $L
