#!/usr/bin/env bash
# round 6: queue_precondition; the whole AMG bench with each cycle also timed as a replayed CUDA graph
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
FEGPU_CHECK_LAUNCHES=1 timeout 200 .gpu/tests/amg --test-threads=1 > $R/test-amg.txt 2>&1; echo "amg rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $R/test-amg.txt >> $L
timeout 480 .gpu/bin/fegpu bench amg > $R/bench-amg.txt 2>&1; echo "bench amg rc=$?" >> $L
grep -h "  [a-z].*: [0-9]* rows\|AMG-\|cycle .* ms = " $R/bench-amg.txt >> $L
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
cat $L
