#!/usr/bin/env bash
# One check-and-benchmark round on the GPU machine ([--checks-only|--sparse|--ilu|--block|--amg|--dist|--lbm|--radfields|--pipeline|--issue20]). Builds nothing: run
# scripts/gpu-stage.sh here first, which copies the binaries into .gpu/,
# then call the device tool with carry [".gpu"] and this script.
# Logs go to $OUT (or ./gpu-out when run by hand).
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export FEGPU_BACKEND=cuda FEGPU_CHECK_LAUNCHES=1 FEGPU_MATRICES=$PWD/tests/data/matrices FEGPU_DATA=$PWD/tests/data FEGPU_EXE=$PWD/.gpu/bin/fegpu LD_LIBRARY_PATH=$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}
fail=0
run() { echo "== $*"; "$@" 2>&1 | tee -a "$OUT/checks.log"; local rc=${PIPESTATUS[0]}; [ $rc -eq 0 ] || { echo "FAILED ($rc): $*"; fail=1; }; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,pci.bus_id --format=csv | tee "$OUT/gpu.txt"
# The host side, to tell rounds on different machines apart: CPU, NUMA, the GPU's links.
{ lscpu | grep -E 'Model name|^CPU\(s\)|NUMA|Socket'; nvidia-smi topo -m; } 2>&1 | tee -a "$OUT/gpu.txt"
# The timing-sensitive runs stay on the CPUs next to the GPU (its PCI device's
# local_cpulist), where the host's event waits and launches are shortest.
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null | head -1 | sed 's/^0000//' | tr 'A-F' 'a-f')
near=$(cat "/sys/bus/pci/devices/$bus/local_cpulist" 2>/dev/null)
bind=(); [ -n "$near" ] && command -v taskset >/dev/null && bind=(taskset -c "$near")
echo "timing runs bound to CPUs: ${near:-(not found: unbound)}" | tee -a "$OUT/gpu.txt"
run .gpu/bin/fegpu info
if [ "${1:-}" = "--issue20" ]; then
  # issue #20's bars in one run, no checks: every kernel compiled first (none inside a timed solve),
  # the ILU(0) table, the serial drivers bound to the GPU's CPUs, CuPy's ILU(0) and GMRES beside;
  # no synchronisation after each launch (FEGPU_CHECK_LAUNCHES) in the timed runs
  unset FEGPU_CHECK_LAUNCHES
  .gpu/bin/fegpu warm > "$OUT/warm.txt" 2>&1
  FEGPU_BENCH_SWEEPS="windows,multicolour,jacobi x1" "${bind[@]}" .gpu/bin/fegpu bench ilu 2>&1 | tee "$OUT/bench-ilu.txt"
  "${bind[@]}" .gpu/drivers/bicgstab_serial 2>&1 | tee "$OUT/bicgstab_serial.txt"
  "${bind[@]}" .gpu/drivers/toughreact_newton 15 14 14 2 2>&1 | tail -4 | tee "$OUT/toughreact-5880.txt"
  timeout 300 "${bind[@]}" .gpu/drivers/toughreact_newton 100 100 100 1 1 2>&1 | tail -12 | tee "$OUT/toughreact-1e6.txt"
  python3 peers/peers.py sparse tests/data/matrices/sherman5.mtx 2>&1 | tee "$OUT/peers-sparse.txt"
  exit 0
fi
for t in .gpu/tests/*; do run "$t" --test-threads=1; done
for d in .gpu/drivers/*; do [ -x "$d" ] && [[ $(basename "$d") != dist_* ]] && run "$d"; done
# the distributed drivers (an MPI build), ranks sharing the one GPU
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
for d in .gpu/drivers/dist_*; do
  [ -x "$d" ] || continue
  for np in 1 2 4; do run mpiexec -n $np -x FEGPU_BACKEND -x LD_LIBRARY_PATH "$d"; done
done
unset FEGPU_CHECK_LAUNCHES
if [ -z "${1:-}" ]; then
  .gpu/bin/fegpu bench transpose --size 1024x1024 --size 4096x4096 --size 8192x8192 2>&1 | tee "$OUT/bench-transpose.txt"
  python3 peers/peers.py transpose 4096 8192 2>&1 | tee "$OUT/peers-transpose.txt"
fi
if [ "${1:-}" = "--lbm" ] || [ -z "${1:-}" ]; then
  .gpu/bin/fegpu bench lbm 2>&1 | tee "$OUT/bench-lbm.txt"
  python3 peers/peers.py lbm 128 256 2>&1 | tee "$OUT/peers-lbm.txt"
fi
if [ "${1:-}" = "--radfields" ] || [ -z "${1:-}" ]; then
  # registers and spills of the rad_fields kernels, as ptxas reports them
  /usr/local/cuda/bin/nvcc -arch=sm_90 --resource-usage -c kernels/radfields.cu -o /dev/null 2>&1 | tee "$OUT/radfields-resources.txt"
  .gpu/bin/fegpu bench radfields 2>&1 | tee "$OUT/bench-radfields.txt"
  python3 peers/peers.py radfields 2>&1 | tee "$OUT/peers-radfields.txt"
fi
if [ "${1:-}" = "--pipeline" ] || [ -z "${1:-}" ]; then
  "${bind[@]}" .gpu/bin/fegpu bench pipeline 2>&1 | tee "$OUT/bench-pipeline.txt"
  "${bind[@]}" python3 peers/peers.py pipeline 2>&1 | tee "$OUT/peers-pipeline.txt"
fi
if [ "${1:-}" = "--sparse" ] || [ -z "${1:-}" ]; then
  .gpu/bin/fegpu bench spmv tests/data/matrices/sherman5.mtx 2>&1 | tee "$OUT/bench-spmv.txt"
  .gpu/bin/fegpu bench solve tests/data/matrices/sherman5.mtx 2>&1 | tee "$OUT/bench-solve.txt"
  python3 peers/peers.py sparse tests/data/matrices/sherman5.mtx 2>&1 | tee "$OUT/peers-sparse.txt"
  # BiCG's transposed ILU(0) and the Newton loop's refreshed A^T under memcheck
  /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/tests/krylov_methods --test-threads=1 \
    breakdowns bicg_follows 2>&1 | tail -5 | tee "$OUT/sanitizer-krylov.txt"
fi
if [ "${1:-}" = "--ilu" ] || [ -z "${1:-}" ]; then
  .gpu/bin/fegpu bench ilu tests/data/matrices/sherman5.mtx 2>&1 | tee "$OUT/bench-ilu.txt"
fi
if [ "${1:-}" = "--block" ] || [ -z "${1:-}" ]; then
  .gpu/bin/fegpu bench block 2>&1 | tee "$OUT/bench-block.txt"
  # the TOUGHREACT-like Newton loop, serial block ILU(0)-BiCGSTAB beside fegpu: 5,880 rows, then 10^6 grid blocks
  "${bind[@]}" .gpu/drivers/toughreact_newton 15 14 14 2 2>&1 | tail -4 | tee "$OUT/toughreact-5880.txt"
  timeout 300 "${bind[@]}" .gpu/drivers/toughreact_newton 100 100 100 1 1 2>&1 | tail -12 | tee "$OUT/toughreact-1e6.txt"
  /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/tests/block --test-threads=1 \
    2>&1 | tail -5 | tee "$OUT/sanitizer-block.txt"
fi
if [ "${1:-}" = "--amg" ] || [ -z "${1:-}" ]; then
  # pyamg beside fegpu on the same systems: the wheel comes from .wheels/ (carried; gpu-stage.sh fetches it)
  FEGPU_AMG_DUMP=/tmp/fegpu-amg .gpu/bin/fegpu bench amg 2>&1 | tee "$OUT/bench-amg.txt"
  pip install --no-deps --no-index --target /tmp/pyamg .wheels/pyamg-*.whl > /dev/null 2>&1 \
    && PYTHONPATH=/tmp/pyamg python3 peers/amg_pyamg.py /tmp/fegpu-amg 2>&1 | tee "$OUT/peers-amg.txt"
fi
if [ "${1:-}" = "--dist" ] || [ -z "${1:-}" ]; then
  # a distributed CG iteration, 1 and 2 ranks on the one GPU, beside the one-process iteration
  for np in 1 2; do
    mpiexec -n $np -x FEGPU_BACKEND -x LD_LIBRARY_PATH .gpu/bin/fegpu bench dist 2>&1 | tee -a "$OUT/bench-dist.txt"
  done
fi
echo "gpu round: $([ $fail -eq 0 ] && echo all checks passed || echo SOME CHECKS FAILED)"
exit $fail
