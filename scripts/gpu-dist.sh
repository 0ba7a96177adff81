#!/usr/bin/env bash
# The distributed checks and benchmark on the GPU machine (run there from the
# repository root, after scripts/gpu-stage.sh here with build/ configured
# -DFEGPU_MPI=ON, carrying .gpu): the distributed drivers with 1, 2 and 4
# ranks on the one GPU, first as the ranks' own CUDA contexts (the
# host-staged path), then under NVIDIA's Multi-Process Service (the
# device-direct path, CUDA IPC); `fegpu bench dist` both ways under MPS.
# Logs to stdout; `--quick` skips the 4-rank and non-MPS runs.
set -u
export FEGPU_BACKEND=cuda FEGPU_DATA=$PWD/tests/data LD_LIBRARY_PATH=$PWD/.gpu/lib
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
quick=${1:-}
fails=0
mpi() {
  local n=$1; shift
  echo "=== np $n: $*"
  timeout 240 mpiexec -x FEGPU_BACKEND -x LD_LIBRARY_PATH -x FEGPU_DATA -x FEGPU_CHECK_LAUNCHES -x FEGPU_DIST_EXCHANGE \
    -n "$n" "$@" > /tmp/dist.log 2>&1
  local rc=$?
  tail -n 4 /tmp/dist.log
  echo "rc $rc"
  [ $rc -eq 0 ] || { fails=$((fails + 1)); cat /tmp/dist.log | head -40; }
}
drivers() {
  for n in 1 2 $([ -z "$quick" ] && echo 4); do
    for d in dist_solve_c dist_solve_f08 dist_ebe_c dist_lattice_c; do
      FEGPU_CHECK_LAUNCHES=1 mpi "$n" .gpu/drivers/$d
    done
  done
}
if [ -z "$quick" ]; then
  echo "##### without MPS"
  drivers
  echo "##### memcheck, one rank (a team of one)"
  for d in dist_solve_c dist_lattice_c; do
    mpi 1 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/drivers/$d
  done
fi
echo "##### with MPS"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "MPS started"
drivers
for n in 1 2 4; do
  echo "##### bench dist, np $n, device-direct where the ranks allow"
  timeout 240 mpiexec -x FEGPU_BACKEND -x LD_LIBRARY_PATH -n $n .gpu/bin/fegpu bench dist --grid 128 --iterations 200 --lattice 256 --steps 20 --ebe 16 2>&1 | head -9
  echo "##### bench dist, np $n, FEGPU_DIST_EXCHANGE=host"
  FEGPU_DIST_EXCHANGE=host timeout 240 mpiexec -x FEGPU_BACKEND -x LD_LIBRARY_PATH -x FEGPU_DIST_EXCHANGE -n $n .gpu/bin/fegpu bench dist --grid 128 --iterations 200 --lattice 256 --steps 20 --ebe 16 2>&1 | head -9
done
echo quit | nvidia-cuda-mps-control
echo "failures: $fails"
