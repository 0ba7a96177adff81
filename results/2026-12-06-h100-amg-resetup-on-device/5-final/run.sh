#!/usr/bin/env bash
# AMG re-setup (final): tests with launches checked, the varied layers and bench fem's elasticity, the Fortran driver, racecheck
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > $OUT/gpu.txt
FEGPU_CHECK_LAUNCHES=1 timeout 200 .gpu/tests/amg --test-threads=1 > $OUT/amg-tests.txt 2>&1; echo "rc=$?" >> $OUT/amg-tests.txt
tail -3 $OUT/amg-tests.txt
FEGPU_BENCH_AMG=varied timeout 120 .gpu/bin/fegpu bench amg > $OUT/varied.txt 2>&1; echo "rc=$?" >> $OUT/varied.txt
FEGPU_BENCH_AMG="bench fem" timeout 120 .gpu/bin/fegpu bench amg > $OUT/fem.txt 2>&1; echo "rc=$?" >> $OUT/fem.txt
FEGPU_AMG_PHASES=1 FEGPU_BENCH_AMG="bench fem" timeout 120 .gpu/bin/fegpu bench amg > $OUT/fem-phases.txt 2>&1; echo "rc=$?" >> $OUT/fem-phases.txt
grep -h "hierarchy reused\|vs Jacobi\|rc=" $OUT/varied.txt $OUT/fem.txt | head -40
FEGPU_CHECK_LAUNCHES=1 timeout 60 .gpu/drivers/amg_porous > $OUT/amg_porous.txt 2>&1; echo "amg_porous rc=$?"
timeout 240 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/tests/amg --test-threads=1 values_only > $OUT/racecheck.txt 2>&1; echo "racecheck rc=$?" | tee -a $OUT/racecheck.txt
