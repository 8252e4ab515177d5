// Device types as plug-ins: everything Ferry knows about a kind of device, given in one place.
//
// A device type is registered once, with its name, its capabilities, how its present devices are
// found (discover), and which present device runs a declared device of its type when that one is
// absent (stand_ins). Nothing else in Ferry names a device type: parsing ("sim:1"), printing,
// device discovery (DeviceRegistry::CreateDefault), the runtime's default device map and the
// graph backend all ask this table.
//
// The built-in types are host, sim and cuda (their plug-ins are defined beside their runtimes:
// memory/devices/host/host_device.cc, memory/devices/sim/sim_device.cc, memory/devices/cuda/cuda_device_type.cc; the list is in
// memory/device_type.cc). An application adds its own before it creates a Runtime:
//
//   DeviceTypeInfo npu;
//   npu.name = "npu";
//   npu.discover = [](DeviceRegistry& r, const DeviceRegistryOptions&) {
//     r.Add(std::make_unique<MyNpuRuntime>(0)).IgnoreError();   // device() is {npu_type, 0}
//   };
//   FERRY_ASSIGN_OR_RETURN(DeviceType npu_type, RegisterDeviceType(std::move(npu)));
//   // ParseDevice("npu:0") now works, and new Runtimes discover npu:0.
//
// DeviceType values beyond the built-in enumerators are handed out by RegisterDeviceType.
//
// Thread safety: lookups (FindDeviceType, FindDeviceTypeByName, DeviceTypes) are lock-free and may
// run on any thread at any time, also while a type is being registered; registered types are
// never removed or changed.
#ifndef FERRY_MEMORY_DEVICE_TYPE_H_
#define FERRY_MEMORY_DEVICE_TYPE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ferry/memory/device.h"

namespace ferry {

class DeviceRegistry;
struct DeviceRegistryOptions;

struct DeviceTypeInfo {
  // Set by RegisterDeviceType.
  DeviceType type = DeviceType::kHost;
  // Lower case letters, digits and '_', starting with a letter: the `type` of "type:index".
  std::string name;
  // Other names ParseDevice accepts for the type ("cpu" for the host).
  std::vector<std::string> aliases;

  // Host code may run over this device's memory (inside a device scope): the host's kernels
  // work on it, and a delegate that receives the device's memory can check it with Owns().
  // False for devices with memory of their own (CUDA), whose delegates need kernels of the
  // type's own (kernels/device_kernels.h).
  bool host_kernels_run_on_memory = false;

  // Adds a runtime for every present device of the type to `registry`
  // (DeviceRegistry::CreateDefault calls it, in registration order). Optional.
  std::function<void(DeviceRegistry& registry, const DeviceRegistryOptions& options)> discover;

  // The default device map's entries for this type: (declared device, present device that runs
  // it), given the devices present. Optional; consulted once per Runtime, after discovery.
  std::function<std::vector<std::pair<Device, Device>>(const DeviceRegistry& present)> stand_ins;
};

// nullptr when no type has that value / name (names and aliases compare case-sensitively:
// ParseDevice lower-cases first).
const DeviceTypeInfo* FindDeviceType(DeviceType type);
const DeviceTypeInfo* FindDeviceTypeByName(absl::string_view name);
// Every registered type, in registration order (host, sim, cuda, then the application's).
std::vector<const DeviceTypeInfo*> DeviceTypes();

// Registers `info` as a new device type and returns its value. InvalidArgument for a malformed
// name or alias, AlreadyExists naming the clash when a name or alias is taken, ResourceExhausted
// when all 256 values are used.
absl::StatusOr<DeviceType> RegisterDeviceType(DeviceTypeInfo info);

// The built-in plug-ins, defined beside their runtimes; the table registers them first.
DeviceTypeInfo HostDeviceType();
DeviceTypeInfo SimDeviceType();
DeviceTypeInfo CudaDeviceType();
// The CUDA plug-in's discovery: adds a runtime for every CUDA device found; a no-op without CUDA
// support, a driver or a GPU. Defined by the CUDA runtime (memory/devices/cuda/cuda_device.cc) when Ferry
// is built with CUDA, by memory/devices/cuda/no_cuda.cc otherwise.
void AddCudaDevices(DeviceRegistry& registry, const DeviceRegistryOptions& options);

}  // namespace ferry

#endif  // FERRY_MEMORY_DEVICE_TYPE_H_
