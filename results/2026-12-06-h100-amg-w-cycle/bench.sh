#!/usr/bin/env bash
# AMG cycles on the device: the W-cycle's second visits from level 1 (XW_ONLY=0: every
# coarse level; the experiment's env knob), only level 1, only level 2; then the whole bench
export LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_BACKEND=cuda
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > $OUT/gpu.txt
for w in 2 1; do XW_ONLY=$w FEGPU_BENCH_AMG=varied timeout 110 .gpu/bin/fegpu bench amg > $OUT/varied-xw$w.txt 2>&1; done
timeout 330 .gpu/bin/fegpu bench amg > $OUT/amg-all.txt 2>&1; echo "rc=$?" >> $OUT/amg-all.txt
