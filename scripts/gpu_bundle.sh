#!/usr/bin/env bash
# Builds the binaries that ./scripts/gpu_check.sh runs (Release, CUDA for sm_90: every test binary,
# the benchmarks and the CLI) and gathers them with the shared libraries they need beyond the C
# library into one folder, for a GPU machine that
# has the CUDA driver but not Ferry's build dependencies (Abseil, FlatBuffers, GoogleTest,
# Google Benchmark). There:
#
#   FERRY_GPU_BUNDLE=gpu-bundle ./scripts/gpu_check.sh
#
# Usage: scripts/gpu_bundle.sh [OUTPUT_DIR]   (default gpu-bundle; build dir: FERRY_BUILD_DIR,
# default build-gpu). The bundle holds no host BLAS (-DFERRY_BLAS=OFF): the GPU checks do not need
# one, and it would triple the bundle's size.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
out=${1:-gpu-bundle}
build=${FERRY_BUILD_DIR:-build-gpu}

command -v nvcc > /dev/null || { echo "gpu_bundle: nvcc not found (PATH, /usr/local/cuda)" >&2; exit 1; }
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DFERRY_BLAS=OFF > /dev/null
cmake --build "$build" -j "$(nproc)"

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for binary in $(find "$build/tests" -maxdepth 2 -type f -executable -name '*_test') \
              "$build/bench/ferry_bench" "$build/runtime/ferry"; do
  cp "$binary" "$out/bin/"
  strip --strip-unneeded "$out/bin/$(basename "$binary")"
done
cp "$build"/bench/decoder_block.ferry "$build"/bench/decoder_lm.ferry "$out/"
# Every library the binaries load except the C library's own parts and the driver's libcuda,
# which the GPU machine has and must match its kernel module.
system='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libcuda|linux-vdso)\.so'
for binary in "$out"/bin/*; do
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $system ]] && continue
  cp -L "$path" "$out/lib/$name"
done
du -sh "$out"
ls "$out/lib"
