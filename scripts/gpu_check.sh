#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: configure with CUDA, build, and run the `cuda` tests, the
# conformance suite (on the real GPU where the cases name cuda:0), every other test binary (on sim
# devices), the copy and execution benchmarks, the example programs and, where compute-sanitizer is
# installed, the `cuda` tests under its memory checker; then print a summary. Meant to finish in
# under 10 minutes, so a lent GPU machine can be used in one call; each step has a time limit
# (status 124: it ran out). Results are written to ${OUT:-gpu-check}/.
#
# A GPU machine without Ferry's build dependencies runs a bundle built elsewhere instead
# (./scripts/gpu_bundle.sh makes one): FERRY_GPU_BUNDLE=gpu-bundle ./scripts/gpu_check.sh
# FERRY_GPU_MEMCHECK_S bounds the memory checker's run (default 120 seconds; 0 skips it).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
out=${OUT:-gpu-check}
mkdir -p "$out"
bundle=${FERRY_GPU_BUNDLE:-}
memcheck_s=${FERRY_GPU_MEMCHECK_S:-120}
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv > "$out/gpu.txt" 2>&1
if [ -n "$bundle" ]; then
  bundle=$(cd "$bundle" && pwd) || exit 1
  cuda_test=$bundle/bin/cuda_test
  cuda_host_test=$bundle/bin/cuda_host_test
  conformance_test=$bundle/bin/conformance_test
  tests_dir=$bundle/bin
  ferry_bench=$bundle/bin/ferry_bench
  ferry=$bundle/bin/ferry
  programs=$bundle
  # cuBLAS is opened at run time: the toolkit's copy, or the one a Python wheel installed.
  cublas_dirs=$(find /usr/local/cuda*/ /opt /usr/lib -name 'libcublas.so.*' -printf '%h:' 2>/dev/null)
  export LD_LIBRARY_PATH="$bundle/lib:${cublas_dirs}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  if ldd "$cuda_test" | grep -q 'not found'; then
    echo "bundle: libraries missing on this machine:"; ldd "$cuda_test" | grep 'not found'; exit 1
  fi
else
  build=${FERRY_BUILD_DIR:-build-gpu}
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
  cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
  tests_dir=$(mktemp -d)
  find "$build/tests" -maxdepth 2 -type f -executable -name '*_test' -exec ln -s {} "$tests_dir/" \;
  cuda_test=$build/tests/cuda/cuda_test
  cuda_host_test=$build/tests/cuda/cuda_host_test
  conformance_test=$build/tests/conformance/conformance_test
  ferry_bench=$build/bench/ferry_bench
  ferry=$build/runtime/ferry
  programs=$build/bench
fi
timeout 150 "$cuda_test" > "$out/cuda_test.log" 2>&1
cuda_rc=$?
timeout 60 "$cuda_host_test" --gtest_brief=1 > "$out/cuda_host_test.log" 2>&1
host_rc=$?
timeout 60 "$conformance_test" --gtest_brief=1 > "$out/conformance_test.log" 2>&1
conformance_rc=$?
timeout 120 "$ferry_bench" --benchmark_filter='CudaCopy|CudaDelegate|OverheadRatio' --benchmark_min_time=0.2 \
  --benchmark_format=console --benchmark_out="$out/bench.json" --benchmark_out_format=json \
  > "$out/bench.log" 2>&1
timeout 30 "$ferry" bench "$programs/decoder_block.ferry" --calls 2000 > "$out/example_bench.txt" 2>&1
timeout 30 "$ferry" plan "$programs/decoder_block.ferry" > "$out/example_plan.txt" 2>&1
timeout 30 "$ferry" run "$programs/decoder_lm.ferry" --tokens 16 > "$out/example_tokens.txt" 2>&1
# The rest of the suite, each binary on its own, side by side, with the GPUs hidden as ctest hides
# them from these binaries (ferry_test's SEES_GPUS): their programs' cuda:N run on sim:N.
others=()
for t in "$tests_dir"/*_test; do
  case $(basename "$t") in cuda_test|cuda_host_test|conformance_test) continue ;; esac
  others+=("$(basename "$t")")
  (CUDA_VISIBLE_DEVICES= timeout 300 "$t" --gtest_brief=1 > "$out/suite_$(basename "$t").log" 2>&1
   echo $? > "$out/suite_$(basename "$t").rc") &
done
wait
suite_rc=0
for name in "${others[@]}"; do
  [ "$(cat "$out/suite_$name.rc")" = 0 ] || suite_rc=1
done
memcheck_rc=0
if [ "$memcheck_s" -gt 0 ] && command -v compute-sanitizer > /dev/null; then
  timeout "$memcheck_s" compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$cuda_test" --gtest_brief=1 > "$out/memcheck.log" 2>&1
  memcheck_rc=$?
fi
echo "== GPU";               cat "$out/gpu.txt"
echo "== cuda tests (status $cuda_rc)";        grep -E "^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED" "$out/cuda_test.log"
echo "== cuda host tests (status $host_rc)";   tail -2 "$out/cuda_host_test.log"
echo "== conformance tests (status $conformance_rc)"; tail -2 "$out/conformance_test.log"
echo "== the other test binaries (status $suite_rc)"
for name in "${others[@]}"; do
  echo "$name: status $(cat "$out/suite_$name.rc"), $(grep -E '^\[  PASSED' "$out/suite_$name.log")"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$out/suite_$name.log" | sort -u
done
echo "== memcheck (status $memcheck_rc)"; tail -4 "$out/memcheck.log" 2>/dev/null
echo "== benchmarks";        grep -E "^BM_|ERROR|error" "$out/bench.log"
# One line per copy benchmark: GB/s of Ferry staged (pageable), Ferry pinned, cudaMemcpy pageable
# and cudaMemcpy pinned, then the ratios (DESIGN target: staged_vs_peak >= 0.85).
echo "== CUDA copies: throughput and ratios (target staged_vs_peak >= 0.85)"
grep -E "^BM_CudaCopy" "$out/bench.log" | awk '{
  line = $1
  for (i = 2; i <= NF; i++) if ($i ~ /(_GBps|_vs_)/) line = line "  " $i
  print line
}'
echo "== example on the GPU (ferry bench)"; cat "$out/example_bench.txt"
echo "== example language model on the GPU (ferry run --tokens 16)"; cat "$out/example_tokens.txt"
for rc in "$cuda_rc" "$host_rc" "$conformance_rc" "$suite_rc"; do [ "$rc" -ne 0 ] && exit "$rc"; done
[ "$memcheck_rc" -ne 0 ] && [ "$memcheck_rc" -ne 124 ] && exit "$memcheck_rc"
exit 0
