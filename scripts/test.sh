#!/usr/bin/env bash
# Builds everything (the CUDA parts too when nvcc is found) and runs the whole test suite.
#   ./scripts/test.sh             # build in ./build, run ctest
# Tests labelled `cuda` skip with a message when no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
build=${FERRY_BUILD_DIR:-build}
jobs=${FERRY_JOBS:-$(nproc)}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${FERRY_CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs" ${FERRY_CTEST_ARGS:-}
