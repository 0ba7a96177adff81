#!/usr/bin/env bash
# stop 67 call 6 (call 5's two test slips mended): the sparse and CLI tests with launches checked
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
t() { FEGPU_CHECK_LAUNCHES=1 timeout $2 .gpu/tests/$1 --test-threads=1 $3 > $R/test-$1.txt 2>&1; echo "$1 rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-$1.txt >> $L; }
t sparse 200
t cli 150
grep -A3 "ILU(0) sweeps" $R/test-cli.txt | head -3 >> $L
tar czf $OUT/r.tgz -C $OUT r
cat $L
