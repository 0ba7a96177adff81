#!/usr/bin/env bash
# Copies what scripts/gpu-round.sh runs into .gpu/ (ignored by git, carried
# to the GPU machine): the fegpu command, the library, the Rust test
# binaries and the CTest drivers of build/ when it exists; the pyamg wheel
# into .wheels/ (carry both: [".gpu", ".wheels"]). With --dist: the command,
# the library and the drivers alone (scripts/gpu-multi.sh needs no more).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu/bin .gpu/lib .gpu/tests .gpu/drivers
# the library and command as build/ links its drivers against (MPI or not)
features=()
grep -q '^FEGPU_MPI:BOOL=ON' build/CMakeCache.txt 2>/dev/null && features=(--features mpi)
cargo build --release "${features[@]}"
# copied at once: the test build below rebuilds them without the features
cp target/release/fegpu .gpu/bin/
cp target/release/libfegpu.so .gpu/lib/
[ "${1:-}" = --dist ] || cargo test --release --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import sys,json
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["kind"]!=["bin"]: print(m["executable"])' \
  | while read -r exe; do cp "$exe" ".gpu/tests/$(basename "$exe" | sed 's/-[0-9a-f]*$//')"; done
rm -f .gpu/tests/header .gpu/tests/kernels_compile   # need the source tree / NVRTC only
# the fixed-form legacy program as the package test built it (shared, static, -fdefault-integer-8)
for v in legacy legacy_r8 legacy_i8; do
  [ -x build/consumer-test/legacy/$v ] && cp build/consumer-test/legacy/$v .gpu/drivers/
done
if [ -d build/ctest ]; then
  find build/ctest -maxdepth 1 -type f -executable ! -name error_stop -exec cp {} .gpu/drivers/ \;  # error_stop fails by design
fi
[ "${1:-}" = --dist ] && { du -sh .gpu; exit 0; }
# pyamg for the AMG peer (the GPU machine cannot download): carry .wheels too
ls .wheels/pyamg-*.whl > /dev/null 2>&1 || pip download pyamg --python-version 3.12 --only-binary=:all: \
  --platform manylinux_2_17_x86_64 --no-deps -d .wheels > /dev/null 2>&1 || echo "pyamg wheel not fetched: the AMG peer will not run"
du -sh .gpu
