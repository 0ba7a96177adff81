#!/usr/bin/env bash
# stop 67 call 7: an experiment: the sweeps' polls with a 64 ns sleep between reads (b) against the committed build (a), quick applies alternated
export FEGPU_BACKEND=cuda
R=$OUT/r; mkdir -p $R; L=$OUT/log.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
for round in 1 2; do
  for v in a b; do
    if [ $v = a ]; then lib=$PWD/.gpu/lib; exe=.gpu/bin/fegpu; else lib=$PWD/.gpu/b/lib; exe=.gpu/b/bin/fegpu; fi
    echo "== $v round $round" >> $L
    LD_LIBRARY_PATH=$lib FEGPU_BENCH_QUICK=1 timeout 100 $exe bench ilu > $R/quick-$v-$round.txt 2>&1; grep "pipeline\|windows\|walk\|chunks" $R/quick-$v-$round.txt | grep -v 27 >> $L
  done
done
tar czf $OUT/r.tgz -C $OUT r
cat $L
