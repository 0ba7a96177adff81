#!/usr/bin/env bash
# stop 69, call 2: multicolour ILU(0) with a launch a colour (ilu_colour): tests, sanitizer, bench
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
L=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
( FEGPU_CHECK_LAUNCHES=1 .gpu/tests/sparse --test-threads=1 2>&1 | tail -30 ) > $OUT/sparse.txt 2>&1
grep "test result" $OUT/sparse.txt >> $L
( FEGPU_CHECK_LAUNCHES=1 .gpu/tests/krylov_methods --test-threads=1 2>&1 | tail -5; FEGPU_CHECK_LAUNCHES=1 .gpu/tests/bad_input 2>&1 | tail -3; FEGPU_CHECK_LAUNCHES=1 .gpu/tests/cli 2>&1 | tail -3 ) > $OUT/others.txt 2>&1
grep "test result" $OUT/others.txt >> $L
timeout 150 compute-sanitizer --tool memcheck .gpu/tests/sparse multicolour --test-threads=1 > $OUT/memcheck.txt 2>&1; echo "memcheck rc $?" >> $L
tail -3 $OUT/memcheck.txt >> $L
FEGPU_BENCH_SWEEPS=windows,multicolour,jacobi\ x1 timeout 200 .gpu/bin/fegpu bench ilu tests/data/matrices/sherman5.mtx > $OUT/bench-ilu.txt 2>&1; echo "bench rc $?" >> $L
FEGPU_CHECK_LAUNCHES=1 timeout 60 .gpu/drivers/bicgstab_serial tests/data/matrices > $OUT/bicgstab_serial.txt 2>&1; echo "bicgstab_serial rc=$?" >> $L; grep -E "ms serial|multicolour|FAIL|passed" $OUT/bicgstab_serial.txt >> $L
cat $OUT/log.txt
grep -v "^  convdiff [0-9]* " $OUT/bench-ilu.txt | head -40
