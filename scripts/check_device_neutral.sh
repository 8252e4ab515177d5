#!/usr/bin/env bash
# Checks that no code under runtime/ or loader/ names a specific device type: device types are
# plug-ins (memory/device_type.h, kernels/device_kernels.h), and the loader, the executor, the
# graph backend and the CLI ask them instead. Comments may name devices in examples.
#   ./scripts/check_device_neutral.sh      # exit 0: neutral; 1: prints the offending lines
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='DeviceType::k(Sim|Cuda)|Device::(Sim|Cuda)\(|"(sim|cuda)(:[0-9]*)?"|\b[Cc]uda[A-Z][A-Za-z]*\(|SimDevice|CudaDevice|include "ferry/(memory|kernels)/cuda/|sim_device\.h'
hits=$(grep -rnE "$pattern" runtime loader --include='*.h' --include='*.cc' --include='*.cu' |
       grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if [ -n "$hits" ]; then
  echo "code under runtime/ or loader/ names a device type; ask the device type's plug-in instead:"
  echo "$hits"
  exit 1
fi
echo "runtime/ and loader/ name no device type"
