#!/usr/bin/env bash
# this session's round: bench amg on the varied layers (V, W, f32), then the touched paths' tests, launches checked
set -uo pipefail
export FEGPU_MATRICES=$PWD/tests/data/matrices FEGPU_DATA=$PWD/tests/data LD_LIBRARY_PATH=$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $OUT/log
FEGPU_BACKEND=cuda FEGPU_BENCH_AMG=varied timeout 200 .gpu/bin/fegpu bench amg > $OUT/amg.txt 2>&1; echo "amg rc=$?" >> $OUT/amg.txt
export FEGPU_BACKEND=cuda FEGPU_CHECK_LAUNCHES=1
t=.gpu/tests
fail=0
go() { echo "== $*" | tee -a $OUT/log; timeout 200 "$@" 2>&1 | tee -a $OUT/log | grep -E "^test .*FAIL|test result|passed|failed" | tail -3; [ ${PIPESTATUS[0]} -eq 0 ] || { fail=1; echo "FAILED: $*" | tee -a $OUT/log; }; }
go $t/amg --test-threads=1
go $t/fem --test-threads=1
go $t/bad_input --test-threads=1
go $t/lbm --test-threads=1
go $t/radfields --test-threads=1
go $t/sparse --test-threads=1
go .gpu/drivers/amg_porous
for d in dam_lifts dam_stress fem_serial tl_serial lbm_serial hardening bad_input_fortran bad_input_c threads fortran_api; do go .gpu/drivers/$d; done
echo "cuda checks: $([ $fail -eq 0 ] && echo all passed || echo SOME FAILED)" | tee -a $OUT/log
