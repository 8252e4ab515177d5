#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with Clang and runs each for a while, one after the other.
#   ./scripts/fuzz.sh                      # every target, 60 s each
#   ./scripts/fuzz.sh 600 ferry_fuzz_json  # one target (or `json`, `program`), 10 minutes
# Build directory: ${FERRY_FUZZ_BUILD_DIR:-build-fuzz}. Under it, per target:
#   fuzz/corpus/TARGET/      the corpus, kept between runs (the generated seeds are read as well)
#   fuzz/artifacts/TARGET/   inputs that crashed, leaked, timed out or ran out of memory
#   fuzz/logs/TARGET.log     libFuzzer's output
# Prints executions, coverage and corpus size per target; exits 1 when any target found a crash,
# printing the input's path. See fuzz/README.md for turning it into a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]   (targets: ferry_fuzz_program ferry_fuzz_json ferry_fuzz_pte ferry_fuzz_ptd ferry_fuzz_pte_run ferry_fuzz_bpte ferry_fuzz_xnnpack)" >&2
  exit 2
fi
shift $(( $# > 0 ? 1 : 0 ))
[ $# -eq 0 ] && set -- ferry_fuzz_program ferry_fuzz_json ferry_fuzz_pte ferry_fuzz_ptd ferry_fuzz_pte_run ferry_fuzz_bpte ferry_fuzz_xnnpack
targets=()
for name in "$@"; do
  case "$name" in
    program|json|pte|ptd|pte_run|bpte|xnnpack) targets+=("ferry_fuzz_$name") ;;
    ferry_fuzz_program|ferry_fuzz_json|ferry_fuzz_pte|ferry_fuzz_ptd|ferry_fuzz_pte_run|ferry_fuzz_bpte|ferry_fuzz_xnnpack)
      targets+=("$name") ;;
    *) echo "$0: unknown target '$name' (ferry_fuzz_program, ferry_fuzz_json, ferry_fuzz_pte, ferry_fuzz_ptd, ferry_fuzz_pte_run, ferry_fuzz_bpte, ferry_fuzz_xnnpack)" >&2
       exit 2 ;;
  esac
done

build=${FERRY_FUZZ_BUILD_DIR:-build-fuzz}
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_FUZZ=ON -DFERRY_CUDA=OFF \
  -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_BENCH=OFF > /dev/null
cmake --build "$build" -j "${FERRY_JOBS:-$(nproc)}" --target "${targets[@]}" ferry_fuzz_seed_corpora

# UBSan stops at the first report (-fno-sanitize-recover); let it say where.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

fuzz_dir="$build/fuzz"
summary=()
found=()
for target in "${targets[@]}"; do
  format=${target#ferry_fuzz_}
  corpus="$fuzz_dir/corpus/$target"
  artifacts="$fuzz_dir/artifacts/$target"
  log="$fuzz_dir/logs/$target.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  marker=$(mktemp)
  echo "== $target: ${seconds}s, log in $log"
  rc=0
  # The first folder receives new inputs; the seed folder is only read.
  dict=()
  [ -f "$fuzz_dir/seeds/$format.dict" ] && dict=(-dict="$fuzz_dir/seeds/$format.dict")
  "$fuzz_dir/$target" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -max_total_time="$seconds" \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" \
    "$corpus" "$fuzz_dir/seeds/$format" > "$log" 2>&1 || rc=$?

  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  status_line=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$status_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$status_line")
  # Without final stats (a crash), the last status line's "#N" is the execution count so far.
  [ -z "$execs" ] && execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<< "$status_line")
  corpus_files=$(find "$corpus" -type f | wc -l)
  new_artifacts=$(find "$artifacts" -type f -newer "$marker" \
                    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) |
                  sort)
  rm -f "$marker"
  crashes=$(grep -c . <<< "$new_artifacts" || true)
  summary+=("$(printf '%-20s %12s %8s %8s %8s %8s' "$target" "${execs:--}" "${cov:--}" \
                 "${ft:--}" "$corpus_files" "$crashes")")
  if [ "$crashes" -gt 0 ]; then
    while read -r file; do found+=("$fuzz_dir/$target $file"); done <<< "$new_artifacts"
    # libFuzzer's status lines read "#N<TAB>INITED cov: ..." once the corpus is loaded.
    if ! grep -qE '^#[0-9]+[[:space:]]+INITED ' "$log"; then
      echo "   crashed on a seed or corpus input, before any mutation"
    fi
    grep -E '^SUMMARY: |ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log" |
      head -3 | sed 's/^/   /'
  elif [ "$rc" -ne 0 ]; then
    found+=("$target (exit status $rc, no input saved; see $log)")
    tail -20 "$log" | sed 's/^/   /'
  fi
done

echo
echo "== fuzz summary (${seconds}s per target)"
printf '%-20s %12s %8s %8s %8s %8s\n' target executions cov ft corpus crashes
printf '%s\n' "${summary[@]}"
if [ ${#found[@]} -gt 0 ]; then
  echo
  echo "== crashes (each line reproduces one: the target, then the input)"
  for f in "${found[@]}"; do echo "$f"; done
  echo
  echo "Once fixed, copy the input into fuzz/regressions/ under a name that says what it does"
  echo "(ending in .json for ferry_fuzz_json) so the test suite replays it; see fuzz/README.md."
  exit 1
fi
