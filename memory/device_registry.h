// DeviceRegistry: the devices present in a process, owning one DeviceRuntime per device.
//
// CreateDefault() asks every registered device type (memory/device_type.h) to add its present
// devices: the host, sim:0..sim:(n-1) and, when Ferry is built with CUDA and a GPU is found, the
// CUDA devices. Other runtimes can be added with Add().
//
//   std::unique_ptr<DeviceRegistry> devices = DeviceRegistry::CreateDefault();
//   DeviceRuntime* sim0 = devices->Find(Device::Sim(0));      // nullptr when absent
//   for (const Device& d : devices->devices()) { ... }       // host first, then sim, then cuda
//
// Ownership: the registry owns its runtimes; pointers from Find() live as long as the registry.
// Allocation: creating a sim device allocates no device memory until it is used.
// Thread safety: fill it (CreateDefault, Add) before sharing; Find(), devices() and Has() may
// then be called from any thread.
#ifndef FERRY_MEMORY_DEVICE_REGISTRY_H_
#define FERRY_MEMORY_DEVICE_REGISTRY_H_

#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "ferry/memory/device.h"
#include "ferry/memory/device_runtime.h"
#include "ferry/memory/devices/cuda/cuda_options.h"
#include "ferry/memory/devices/sim/sim_options.h"

namespace ferry {

// The options of each built-in device type, in its own folder (memory/devices/<type>/).
struct DeviceRegistryOptions {
  SimTypeOptions sim;
  CudaTypeOptions cuda;
};

class DeviceRegistry {
 public:
  // An empty registry (no host either): fill it with Add().
  DeviceRegistry() = default;
  DeviceRegistry(const DeviceRegistry&) = delete;
  DeviceRegistry& operator=(const DeviceRegistry&) = delete;

  // The devices every registered type discovers, as `options` say (the host; sim devices, with
  // the fault handler that explains guard faults when guarded; CUDA devices).
  static std::unique_ptr<DeviceRegistry> CreateDefault(const DeviceRegistryOptions& options = {});

  // nullptr when the device is not present.
  DeviceRuntime* Find(const Device& device) const;
  // InvalidArgument for a null runtime, AlreadyExists naming the device for a duplicate; on an
  // error the registry is unchanged (and the runtime is destroyed).
  absl::Status Add(std::unique_ptr<DeviceRuntime> runtime);
  // The present devices, sorted (host, sim:0, sim:1, ..., cuda:0, ...).
  std::vector<Device> devices() const;
  // The runtimes of the present devices other than the host, in the same order; no copy.
  const std::vector<DeviceRuntime*>& non_host_runtimes() const { return non_host_; }
  // Whether some device of `type` is present.
  bool Has(DeviceType type) const;
  // False when `ptr` is known to be memory of no device but the host, in O(1): every non-host
  // runtime reports its allocations' ranges (DeviceRuntime::ReportAllocationsTo) and `ptr` lies
  // outside all of them. True means: ask the runtimes (Owns). Thread-safe.
  bool MayBeDeviceMemory(const void* ptr) const {
    return !all_report_ranges_ || device_span_.Contains(ptr);
  }

 private:
  std::map<Device, std::unique_ptr<DeviceRuntime>> runtimes_;
  std::vector<DeviceRuntime*> non_host_;
  AddressSpan device_span_;         // the non-host runtimes' allocations, where they report them
  bool all_report_ranges_ = true;   // every non-host runtime reports to device_span_
};

}  // namespace ferry

#endif  // FERRY_MEMORY_DEVICE_REGISTRY_H_
