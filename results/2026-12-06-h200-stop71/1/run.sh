#!/usr/bin/env bash
# stop 71, call 1: the split solve's device test with every launch checked, then issue #20's bars in one run (scripts/gpu-round.sh --issue20)
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda FEGPU_EXE=$PWD/.gpu/bin/fegpu FEGPU_MATRICES=$PWD/tests/data/matrices FEGPU_DATA=$PWD/tests/data
t0=$(date +%s)
FEGPU_CHECK_LAUNCHES=1 .gpu/tests/sparse --test-threads=1 multicolour > $OUT/test-sparse.txt 2>&1; echo "sparse multicolour rc=$? at $(( $(date +%s) - t0 )) s" | tee $OUT/summary.txt
bash scripts/gpu-round.sh --issue20 > $OUT/round.txt 2>&1; echo "round rc=$? at $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
