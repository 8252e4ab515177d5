// Builds without CUDA have no CUDA devices.
#include "ferry/memory/device_registry.h"

namespace ferry {

void AddCudaDevices(DeviceRegistry&) {}

}  // namespace ferry
