#!/usr/bin/env bash
# stop 68 call 2: the plane pipeline's back loads PIPE_BACK = 1 (as committed), 2, 3 steps ahead (the block's gate at that step):
# quick applies alternated, the exact schedules' z compared bit for bit; then tests/sparse's ILU tests on the PIPE_BACK = 2 build, launches checked
export FEGPU_BACKEND=cuda
L=$OUT/log.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
for round in 1 2; do for d in 1 2 3; do
  env FEGPU_BENCH_SMALL=1 FEGPU_BENCH_QUICK=1 FEGPU_BENCH_BOXES=128x128x128 timeout 45 .gpu/bin/fegpu$d bench ilu > $OUT/q$round-$d.txt 2>&1
  echo "round $round PIPE_BACK=$d rc=$?" >> $L; grep "pipeline\|windows\|bitwise\|DIFFER" $OUT/q$round-$d.txt >> $L
done; done
FEGPU_CHECK_LAUNCHES=1 timeout 100 .gpu/tests/sparse2 ilu --test-threads=2 > $OUT/sparse2.txt 2>&1; echo "sparse2 ilu rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $OUT/sparse2.txt >> $L
cat $L
