// The CUDA plug-in, compiled with and without CUDA: programs that declare "cuda:N" parse and
// load everywhere. Without a CUDA device present (no GPU, no driver, or a build without CUDA),
// cuda:N runs on sim:N.
#include <utility>
#include <vector>

#include "ferry/memory/device_registry.h"
#include "ferry/memory/device_type.h"

namespace ferry {

DeviceTypeInfo CudaDeviceType() {
  DeviceTypeInfo info;
  info.name = "cuda";
  // CUDA memory is not the host's: sub-graphs on it run the CUDA kernels (kernels/cuda/).
  info.host_kernels_run_on_memory = false;
  info.discover = [](DeviceRegistry& registry, const DeviceRegistryOptions& options) {
    if (options.cuda.enabled) AddCudaDevices(registry, options);
  };
  info.stand_ins = [](const DeviceRegistry& present) {
    std::vector<std::pair<Device, Device>> map;
    if (present.Has(DeviceType::kCuda)) return map;
    for (const Device& d : present.devices()) {
      if (d.type == DeviceType::kSim) map.emplace_back(Device::Cuda(d.index), d);
    }
    return map;
  };
  return info;
}

}  // namespace ferry
