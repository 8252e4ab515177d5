// Builds without CUDA have no CUDA devices.
#include "ferry/memory/device_registry.h"
#include "ferry/memory/device_type.h"

namespace ferry {

void AddCudaDevices(DeviceRegistry&, const DeviceRegistryOptions&) {}

}  // namespace ferry
