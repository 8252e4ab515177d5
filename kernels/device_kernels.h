// Kernels of device types whose memory host code cannot run over (DeviceTypeInfo::
// host_kernels_run_on_memory is false, as for CUDA): the graph backend runs a sub-graph on such a
// device with the type's kernels, looked up here by device type and op name. Types whose memory
// the host can run over (host, sim) use the host kernels of the op registry and register nothing.
//
//   const DeviceKernels* kernels = FindDeviceKernels(device.type);   // nullptr: none registered
//   FERRY_RETURN_IF_ERROR(kernels->Prepare(device.index));            // at load, per device used
//   KernelFn relu = kernels->Find("relu");                            // at load; nullptr: no kernel
//   FERRY_RETURN_IF_ERROR(kernels->CheckDTypes("relu", args, results)); // at load
//   kernels->SetStream(runtime->native_stream());                     // before running, per call
//
// The built-in registration is CUDA's (kernels/cuda/cuda_ops.h), present when Ferry is built with
// CUDA kernels. Kernels follow the host kernels' calling convention (kernels/op_registry.h) over
// the device's memory.
//
// Thread safety: FindDeviceKernels is lock-free and may run at any time; a registered table is
// never removed. What Prepare, Find and SetStream allow is the implementation's to say (CUDA:
// kernels/cuda/cuda_ops.h).
#ifndef FERRY_KERNELS_DEVICE_KERNELS_H_
#define FERRY_KERNELS_DEVICE_KERNELS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/memory/device.h"

namespace ferry {

class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;
  // Load-time preparation of device `device_index` of the type (handles, staging buffers), once
  // per device; later calls return OK at once.
  virtual absl::Status Prepare(int32_t device_index) const = 0;
  // The kernel of op `op` (its registered name) on this type; nullptr when it has none.
  virtual KernelFn Find(absl::string_view op) const = 0;
  // At load, for a call of `op`'s kernel with these (inferred) arguments and results: OK when the
  // kernel takes their dtypes, else Unimplemented naming the op and the dtype. A kernel may take
  // fewer dtypes than the host kernel of the same op. The default accepts everything.
  virtual absl::Status CheckDTypes(absl::string_view op, absl::Span<const OpArg> args,
                                   absl::Span<const TensorRef* const> results) const {
    return absl::OkStatus();
  }
  // Sets where the calling thread's later kernels run: the device runtime's native_stream().
  virtual void SetStream(void* stream) const = 0;
};

// The kernels registered for `type`; nullptr when none are.
const DeviceKernels* FindDeviceKernels(DeviceType type);

// Registers `kernels` (not owned; it must outlive every Runtime) for `type`. InvalidArgument for
// nullptr, AlreadyExists when the type has kernels already.
absl::Status RegisterDeviceKernels(DeviceType type, const DeviceKernels* kernels);

}  // namespace ferry

#endif  // FERRY_KERNELS_DEVICE_KERNELS_H_
