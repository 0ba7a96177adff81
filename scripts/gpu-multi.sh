#!/usr/bin/env bash
# Two or more GPUs of one host (issue #24): the distributed drivers on 2 ranks (one GPU each), then
# fegpu bench dist on 2 and 1 ranks, the device-direct (CUDA IPC), NCCL and host paths, and the solve driver
# through NCCL. Build here first: build/ configured
# -DFEGPU_MPI=ON, then scripts/gpu-stage.sh; run there with carry [".gpu"]. Logs under $OUT.
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export FEGPU_BACKEND=cuda LD_LIBRARY_PATH=$PWD/.gpu/lib FEGPU_DATA=$PWD/tests/data FEGPU_MATRICES=$PWD/tests/data/matrices
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
{ nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id --format=csv; nvidia-smi topo -m; lscpu | grep -E 'Model name|^CPU\(s\)|NUMA'; } > $OUT/machine.txt 2>&1
M() { local np=$1; shift; mpiexec -n $np --bind-to none -x FEGPU_BACKEND -x LD_LIBRARY_PATH -x FEGPU_DATA -x FEGPU_MATRICES "$@"; }
hung=""
for d in .gpu/drivers/dist_*; do
  [ -n "$hung" ] && break
  ( timeout 45 bash -c "$(declare -f M); M 2 -x FEGPU_CHECK_LAUNCHES=1 $d" ) > $OUT/$(basename $d)-np2.txt 2>&1; rc=$?; echo "rc $rc" >> $OUT/$(basename $d)-np2.txt
  [ $rc -eq 124 ] && hung="-x FEGPU_DIST_EXCHANGE=host"
done
B=".gpu/bin/fegpu bench dist --grid 256 --iterations 50 --lattice 512 --steps 20 --ebe 64"
( timeout 150 bash -c "$(declare -f M); M 2 $hung $B" ) > $OUT/bench-dist-np2.txt 2>&1; echo "rc $?" >> $OUT/bench-dist-np2.txt
( timeout 120 bash -c "$(declare -f M); M 1 $B" ) > $OUT/bench-dist-np1.txt 2>&1; echo "rc $?" >> $OUT/bench-dist-np1.txt
( timeout 120 bash -c "$(declare -f M); M 2 -x FEGPU_DIST_EXCHANGE=host $B" ) > $OUT/bench-dist-np2-host.txt 2>&1; echo "rc $?" >> $OUT/bench-dist-np2-host.txt
( timeout 120 bash -c "$(declare -f M); M 2 -x FEGPU_DIST_EXCHANGE=nccl $B" ) > $OUT/bench-dist-np2-nccl.txt 2>&1; echo "rc $?" >> $OUT/bench-dist-np2-nccl.txt
( timeout 45 bash -c "$(declare -f M); M 2 -x FEGPU_DIST_EXCHANGE=nccl -x FEGPU_CHECK_LAUNCHES=1 .gpu/drivers/dist_solve_c" ) > $OUT/dist_solve_c-np2-nccl.txt 2>&1; echo "rc $?" >> $OUT/dist_solve_c-np2-nccl.txt
( timeout 100 bash -c "$(declare -f M); M 2 $hung .gpu/bin/fegpu bench dist --grid 128 --iterations 100 --lattice 256 --steps 40 --ebe 48" ) > $OUT/bench-dist-np2-small.txt 2>&1; echo "rc $?" >> $OUT/bench-dist-np2-small.txt
cat $OUT/machine.txt | head -8
for f in $OUT/dist_*; do echo "$(basename $f): $(tail -1 $f) $(grep -ci 'error\|fail' $f)"; done
cat $OUT/bench-dist-*.txt
