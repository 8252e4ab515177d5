#!/usr/bin/env bash
# Times the host BLAS Ferry links (OpenBLAS) beside BLIS on the products Ferry hands a BLAS
# (bench/blas/blas_compare.cc) and writes the markdown table to FILE (default: standard output).
#
#   bench/blas/run.sh [FILE]
#
# OpenBLAS: $FERRY_OPENBLAS_LIB, else the library the build in $FERRY_BLAS_BUILD (default build)
# found. BLIS: $FERRY_BLIS_LIB, else an installed libblis.so.4, else Debian's libblis4-pthread
# fetched once with `apt-get download` (nothing is installed) into $FERRY_BLAS_CACHE (default
# ~/.cache/ferry/blas). The comparer is built in $FERRY_BLAS_BUILD; the run takes under a minute.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out_arg="${1:-}"
out="${out_arg:+$(realpath -m "$out_arg")}"
build="${FERRY_BLAS_BUILD:-build}"
cache="${FERRY_BLAS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry/blas}"

cd "$root"
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target ferry_blas_compare -j "${FERRY_BUILD_JOBS:-2}" >/dev/null

openblas="${FERRY_OPENBLAS_LIB:-}"
if [[ -z "$openblas" ]]; then
  openblas="$(sed -n 's/^FERRY_OPENBLAS_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")"
  if [[ -z "$openblas" || "$openblas" == *NOTFOUND ]]; then
    echo "this build found no OpenBLAS; set FERRY_OPENBLAS_LIB" >&2
    exit 1
  fi
fi
openblas="$(readlink -f "$openblas")"

blis="${FERRY_BLIS_LIB:-}"
if [[ -z "$blis" ]]; then
  blis="$( (ldconfig -p 2>/dev/null || true) | sed -n 's/.*libblis\.so\.4 .*=> //p' | head -n 1)"
fi
if [[ -z "$blis" ]]; then
  blis="$( (find "$cache" -name libblis.so.4 2>/dev/null || true) | head -n 1)"
fi
if [[ -z "$blis" ]]; then
  if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    echo "BLIS not found and no apt-get to fetch it; set FERRY_BLIS_LIB" >&2
    exit 1
  fi
  mkdir -p "$cache"
  echo "fetching Debian's libblis4-pthread into $cache" >&2
  (cd "$cache" && apt-get download libblis4-pthread >/dev/null)
  dpkg-deb -x "$(ls "$cache"/libblis4-pthread_*.deb | head -n 1)" "$cache/root"
  blis="$(find "$cache/root" -name libblis.so.4 | head -n 1)"
  if [[ -z "$blis" ]]; then
    echo "the fetched package holds no libblis.so.4" >&2
    exit 1
  fi
fi

args=(--lib="OpenBLAS=$openblas" --lib="BLIS=$blis")
if [[ -n "$out" ]]; then
  args+=(--out="$out")
fi
exec "$build/bench/ferry_blas_compare" "${args[@]}"
