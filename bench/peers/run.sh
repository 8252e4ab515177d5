#!/usr/bin/env bash
# Times Ferry beside ONNX Runtime (bench/peers/peers_main.cc) and writes the markdown table to
# FILE (default: standard output).
#
#   bench/peers/run.sh [FILE]
#
# ONNX Runtime is the CPU library inside the npm package onnxruntime-node: $FERRY_ORT_LIB when
# set, else the package fetched once with `npm pack` (no install scripts run) into
# $FERRY_PEERS_CACHE (default ~/.cache/ferry/peers). Without npm or the network the harness
# reports the peer absent and exits 0. The harness is built in Release in $FERRY_PEERS_BUILD
# (default build-peers), host only; the run takes a few minutes.
set -euo pipefail

readonly ORT_VERSION=1.30.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out_arg="${1:-}"
out="${out_arg:+$(realpath -m "$out_arg")}"
build="${FERRY_PEERS_BUILD:-build-peers}"
cache="${FERRY_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry/peers}"

case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) arch="$(uname -m)" ;;
esac

lib="${FERRY_ORT_LIB:-}"
if [[ -z "$lib" ]]; then
  pkg="$cache/onnxruntime-node-$ORT_VERSION"
  lib="$pkg/package/bin/napi-v6/linux/$arch/libonnxruntime.so.1"
  if [[ ! -f "$lib" ]]; then
    if command -v npm >/dev/null; then
      mkdir -p "$pkg"
      echo "fetching onnxruntime-node@$ORT_VERSION into $pkg" >&2
      if tarball="$(cd "$pkg" && npm pack --silent "onnxruntime-node@$ORT_VERSION")"; then
        tar -xzf "$pkg/$tarball" -C "$pkg"
        rm -f "$pkg/$tarball"
      else
        echo "npm pack failed: ONNX Runtime will be reported absent" >&2
      fi
    else
      echo "npm not found: ONNX Runtime will be reported absent" >&2
    fi
  fi
fi

cd "$root"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PEERS=ON \
  -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_BENCH=OFF -DFERRY_CUDA=OFF >/dev/null
cmake --build "$build" --target ferry_peers -j "${FERRY_BUILD_JOBS:-2}" >/dev/null

command="bench/peers/run.sh${out_arg:+ $out_arg}"
args=(--ort-lib="$lib" --command="$command")
if [[ -n "$out" ]]; then
  args+=(--out="$out")
fi
exec "$build/bench/peers/ferry_peers" "${args[@]}"
