#!/usr/bin/env bash
# The whole test suite: cargo tests, then the CMake build and CTest (Fortran
# and C drivers, the installed package's consumers). Runs on the backend
# FEGPU_BACKEND selects (AUTO: CUDA if present, else the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
# NVRTC from the nvidia-cuda-nvrtc wheel, if installed, lets the kernel
# compile test run without a GPU.
nvrtc=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null || true)
if [ -n "$nvrtc" ] && [ -d "$nvrtc" ]; then export LD_LIBRARY_PATH="$nvrtc:${LD_LIBRARY_PATH:-}"; fi
# Every suite runs even when an earlier one fails (--no-fail-fast, and
# CTest after a failed cargo test); the exit status says whether all passed.
status=0
# With an MPI (mpicc and mpiexec on the PATH) the distributed API is built
# too (cargo feature mpi, CMake FEGPU_MPI) and its drivers run under mpiexec.
mpi=OFF
if command -v mpicc >/dev/null && command -v mpiexec >/dev/null; then mpi=ON; fi
# One formatting style and no lint warnings, where the toolchain has the components.
if cargo fmt --version >/dev/null 2>&1; then cargo fmt --check || status=1; fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --release --all-targets -- -D warnings || status=1
  if [ $mpi = ON ]; then cargo clippy --release --all-targets --features mpi -- -D warnings || status=1; fi
fi
cargo test --release --no-fail-fast || status=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFEGPU_MPI=$mpi
cmake --build build -j2
ctest --test-dir build --output-on-failure || status=1
exit $status
