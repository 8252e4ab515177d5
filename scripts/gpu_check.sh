#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: configure with CUDA, build, run the `cuda` tests and the copy
# and execution benchmarks, and print a summary. Meant to finish in under 10 minutes, so a lent
# GPU machine can be used in one call. Results are written to ${OUT:-gpu-check}/.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
out=${OUT:-gpu-check}
mkdir -p "$out"
build=${FERRY_BUILD_DIR:-build-gpu}
jobs=$(nproc)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 > "$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$jobs" --target cuda_test cuda_host_test conformance_test ferry_bench ferry \
  > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
ctest --test-dir "$build" -L cuda --output-on-failure > "$out/cuda_tests.log" 2>&1
cuda_rc=$?
"$build/tests/cuda/cuda_test" --gtest_brief=1 > "$out/cuda_test_detail.log" 2>&1
"$build/tests/cuda/cuda_host_test" --gtest_brief=1 > "$out/cuda_host_test.log" 2>&1
host_rc=$?
"$build/bench/ferry_bench" --benchmark_filter='CudaCopy|OverheadRatio' --benchmark_min_time=0.2 \
  --benchmark_format=console --benchmark_out="$out/bench.json" --benchmark_out_format=json \
  > "$out/bench.log" 2>&1
"$build/runtime/ferry" bench --calls 2000 > "$out/example_bench.txt" 2>&1
"$build/runtime/ferry" plan > "$out/example_plan.txt" 2>&1
echo "== GPU";            cat "$out/gpu.txt"
echo "== cuda tests";     tail -5 "$out/cuda_tests.log"
echo "== cuda host tests"; tail -2 "$out/cuda_host_test.log"
echo "== benchmarks";     grep -E "^BM_" "$out/bench.log"
# One line per copy benchmark: GB/s of Ferry staged (pageable), Ferry pinned, cudaMemcpy pageable
# and cudaMemcpy pinned, then the ratios (DESIGN target: staged_vs_peak >= 0.85).
echo "== CUDA copies: throughput and ratios (target staged_vs_peak >= 0.85)"
grep -E "^BM_CudaCopy" "$out/bench.log" | awk '{
  line = $1
  for (i = 2; i <= NF; i++) if ($i ~ /(_GBps|_vs_)/) line = line "  " $i
  print line
}'
echo "== example on the GPU (ferry bench)"; cat "$out/example_bench.txt"
[ "$cuda_rc" -ne 0 ] && exit "$cuda_rc"
exit $host_rc
