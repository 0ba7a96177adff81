set -u
export FEGPU_BACKEND=cuda FEGPU_DATA=$PWD/tests/data LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_CHECK_LAUNCHES=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
for t in sparse krylov_methods block amg bad_input; do
  echo "=== tests/$t"; timeout 300 .gpu/tests/$t --test-threads=1 2>&1 | grep -E "test result|FAILED|panicked" | head -5
done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "MPS started"
for d in dist_solve_c dist_solve_f08 dist_ebe_c dist_lattice_c dist_lattice_f08; do
  echo "=== np 3 $d"; timeout 200 mpiexec -x FEGPU_BACKEND -x LD_LIBRARY_PATH -x FEGPU_DATA -x FEGPU_CHECK_LAUNCHES -n 3 .gpu/drivers/$d > /tmp/d.log 2>&1; echo "rc $?"; tail -n 2 /tmp/d.log | cut -c1-250
done
m=tests/data/matrices/gr_30_30.mtx; echo "matrix $m"
for meth in cg bicgstab; do
  echo "=== fegpu solve np 2 $meth"; timeout 200 mpiexec -x FEGPU_BACKEND -x LD_LIBRARY_PATH -n 2 .gpu/bin/fegpu solve $m --method $meth --precond jacobi 2>&1 | tail -n 6 | cut -c1-250; echo "rc ${PIPESTATUS[0]}"
done
echo quit | nvidia-cuda-mps-control
