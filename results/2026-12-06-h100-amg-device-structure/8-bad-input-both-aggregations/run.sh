#!/usr/bin/env bash
# round 8 (final code): the AMG tests (bad input on both aggregations) and the Fortran driver, launches checked
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t amg 200
FEGPU_CHECK_LAUNCHES=1 timeout 60 .gpu/drivers/amg_porous > $R/amg_porous.txt 2>&1; echo "amg_porous rc=$?" >> $L; tail -1 $R/amg_porous.txt >> $L
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/tests/amg bad_input --test-threads=1 > $R/memcheck-bad-input.txt 2>&1; echo "memcheck bad_input rc=$?" >> $L; tail -1 $R/memcheck-bad-input.txt >> $L
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
cat $L
