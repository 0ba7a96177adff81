#!/usr/bin/env bash
# round 5 (final code): the CLI tests on the staged binary, then the whole AMG bench
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
FEGPU_CHECK_LAUNCHES=1 timeout 90 .gpu/tests/cli --test-threads=1 > $R/test-cli.txt 2>&1; echo "cli rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-cli.txt >> $L
timeout 480 .gpu/bin/fegpu bench amg > $R/bench-amg.txt 2>&1; echo "bench amg rc=$?" >> $L
grep -h "  [a-z].*: [0-9]* rows\|AMG-\|hierarchy reused\|vs Jacobi\|Jacobi-\|ILU(0)\|cycle .* ms = " $R/bench-amg.txt >> $L
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
cat $L
