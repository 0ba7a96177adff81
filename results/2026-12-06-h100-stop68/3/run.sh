#!/usr/bin/env bash
# stop 68 call 3: back loads PIPE_BACK steps ahead with the block's gate at step PIPE_GATE: 1 = as committed (1, 0), A = (3, 5), B = (5, 7):
# quick applies alternated twice, the exact schedules' z compared bit for bit; tests/sparse's ILU tests on A and B, launches checked
export FEGPU_BACKEND=cuda
L=$OUT/log.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
for round in 1 2; do for d in 1 A B; do
  env FEGPU_BENCH_SMALL=1 FEGPU_BENCH_QUICK=1 FEGPU_BENCH_BOXES=128x128x128 timeout 45 .gpu/bin/fegpu$d bench ilu > $OUT/q$round-$d.txt 2>&1
  echo "round $round build $d rc=$?" >> $L; grep "pipeline\|windows\|bitwise\|DIFFER" $OUT/q$round-$d.txt >> $L
done; done
for d in A B; do FEGPU_CHECK_LAUNCHES=1 timeout 60 .gpu/tests/sparse$d ilu --test-threads=2 > $OUT/sparse$d.txt 2>&1; echo "sparse$d ilu rc=$?" >> $L; grep 'test result\|FAILED\|panicked' $OUT/sparse$d.txt >> $L; done
cat $L
