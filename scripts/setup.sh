#!/usr/bin/env bash
# Installs what is missing (Debian packages), builds Ferry and runs the example program.
#   ./scripts/setup.sh            # build in ./build, then `ferry run` on the example
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ libflatbuffers-dev flatbuffers-compiler libabsl-dev libopenblas-dev
          libgtest-dev libgmock-dev libbenchmark-dev pkgconf)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

build=${FERRY_BUILD_DIR:-build}
jobs=${FERRY_JOBS:-$(nproc)}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs" --target ferry
"$build/runtime/ferry" run
