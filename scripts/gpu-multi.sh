#!/usr/bin/env bash
# Several GPUs of one host (issue #24), one rank a GPU. Build here first:
# build/ configured -DFEGPU_MPI=ON, then `scripts/gpu-stage.sh --dist`; run
# there with carry [".gpu"]: `bash scripts/gpu-multi.sh PART...`, PART one of
#   checks   the distributed drivers on 2, 4 (and 8) ranks (FEGPU_CHECK_LAUNCHES=1),
#            the solve drivers through NCCL on as many
# Every part runs on 1, 2, 4 and 8 GPUs, as many as the machine has.
#   cg       CG (Jacobi) on the 7-point 256^3 operator through
#            CUDA IPC, NCCL and the host; weak scaling at 128^3 a GPU
#   solvers  BiCGSTAB (Jacobi), block-Jacobi ILU(0) and AMG over the ranks;
#            the ~10M-dof hex8 elasticity system
#   amgel    per-rank AMG (rigid-body modes) on the 3M-dof elasticity block
#   lattice  the split lattice: 512^3 strong, 256^3 a GPU weak; EBE CG
#   radfields  N_S 200k, n_RHS 1, 10, 100 (one process, all the GPUs)
#   ab       with .gpu/old/fegpu (an earlier build) beside: the split lattice
#            and rad_fields over GPUs, old and new alternated twice
#   cold     first on a fresh machine: dist_lattice_c on 2 ranks twice, timed
#            (the driver's cold JIT of kernels/lbm.cu's PTX, then cached)
# Every command's output goes to $OUT/PART.txt (one file a part: the device
# tool returns few files), a line "rc N" after each.
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export FEGPU_BACKEND=cuda LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_DATA=$PWD/tests/data FEGPU_MATRICES=$PWD/tests/data/matrices
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on a shared host
gpus=$(nvidia-smi -L | wc -l)
M() { local np=$1; shift; mpiexec -n $np --bind-to none -x FEGPU_BACKEND -x LD_LIBRARY_PATH -x FEGPU_DATA -x FEGPU_MATRICES -x NCCL_NVLS_ENABLE "$@"; }
# run LOG LIMIT NP ARGS...: one mpiexec, its output and status appended to the part's log
run() {
  local log=$1 limit=$2; shift 2
  echo "== np $1: ${*:2}" >> $log
  local t0=$(date +%s%N)
  timeout $limit bash -c "$(declare -f M); M $*" >> $log 2>&1
  echo "rc $? ($(( ($(date +%s%N) - t0) / 1000000 )) ms)" >> $log
}
B=.gpu/bin/fegpu
ranks=(1); for n in 2 4 8; do [ $gpus -ge $n ] && ranks+=($n); done  # 1, 2, 4, 8 as the machine has them
for part in "$@"; do
  log=$OUT/$part.txt
  case $part in
  checks)
    { nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nvidia-smi topo -m; mpiexec --version | head -1; } > $log 2>&1
    for np in "${ranks[@]:1}"; do
      # 180 s: a fresh machine's first runs JIT-compile the kernels' PTX (cached after)
      for d in .gpu/drivers/dist_*; do run $log 180 $np -x FEGPU_CHECK_LAUNCHES=1 $d; done
      for d in .gpu/drivers/dist_solve_*; do run $log 180 $np -x FEGPU_CHECK_LAUNCHES=1 -x FEGPU_DIST_EXCHANGE=nccl $d; done
    done ;;
  cg)
    for np in "${ranks[@]}"; do run $log 120 $np $B bench dist --only solve --grid 256 --iterations 200 --tol 1e-8; done
    for path in nccl host; do
      for np in "${ranks[@]:1}"; do run $log 120 $np -x FEGPU_DIST_EXCHANGE=$path $B bench dist --only solve --grid 256 --iterations 200; done
    done
    for np in "${ranks[@]}"; do run $log 90 $np $B bench dist --only solve --weak --grid 128 --iterations 200 --tol 1e-8; done ;;
  solvers)
    for np in "${ranks[@]}"; do run $log 120 $np $B bench dist --only solve --grid 256 --method bicgstab --iterations 100 --tol 1e-8; done
    for np in "${ranks[@]}"; do run $log 120 $np $B bench dist --only solve --grid 256 --precond ilu0 --iterations 50 --tol 1e-8; done
    for np in "${ranks[@]}"; do run $log 120 $np $B bench dist --only solve --weak --grid 128 --precond amg --iterations 20 --tol 1e-8; done
    for np in "${ranks[@]}"; do run $log 150 $np $B bench dist --only solve --system elasticity --grid 149 --iterations 100; done ;;
  amgel)
    for np in "${ranks[@]:1}"; do run $log 200 $np $B bench dist --only solve --system elasticity --grid 100 --precond amg --iterations 20 --tol 1e-8; done ;;
  lattice)
    for np in "${ranks[@]}"; do run $log 90 $np $B bench dist --only lattice --lattice 512 --steps 20; done
    for np in "${ranks[@]}"; do run $log 90 $np $B bench dist --only lattice --lattice-weak --lattice 256 --steps 50; done
    for np in "${ranks[@]}"; do run $log 120 $np $B bench dist --only ebe --ebe 128 --iterations 100; done ;;
  radfields)
    echo "== fegpu bench radfields --devices" > $log
    timeout 240 $B bench radfields --devices >> $log 2>&1; echo "rc $?" >> $log ;;
  ab)
    : > $log
    for round in 1 2; do
      for b in .gpu/old/fegpu $B; do
        for np in "${ranks[@]:1}"; do run $log 60 $np $b bench dist --only lattice --lattice-weak --lattice 256 --steps 50; done
        run $log 60 ${ranks[-1]} $b bench dist --only lattice --lattice 512 --steps 20
      done
    done
    for b in .gpu/old/fegpu $B; do
      echo "== $b bench radfields --devices" >> $log; timeout 240 $b bench radfields --devices >> $log 2>&1; echo "rc $?" >> $log
    done ;;
  cold)
    : > $log
    du -sh ~/.nv/ComputeCache >> $log 2>&1
    for k in 1 2; do run $log 150 2 -x FEGPU_CHECK_LAUNCHES=1 .gpu/drivers/dist_lattice_c; done
    du -sh ~/.nv/ComputeCache >> $log 2>&1 ;;
  *) echo "unknown part $part" >&2 ;;
  esac
  grep -E "^(==|rc|.*device\(s\)|.*ms/iteration|.*ms/step|.*speed-up|.*efficiency|.*TFLOP|.*passed|.*FAIL|.*rror)" $log | cut -c1-260
done
