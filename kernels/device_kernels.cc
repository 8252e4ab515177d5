#include "ferry/kernels/device_kernels.h"

#include <array>
#include <atomic>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "ferry/kernels/cuda/cuda_ops.h"

namespace ferry {
namespace {

// CUDA's kernels (kernels/cuda/cuda_ops.h) as the cuda type's table.
class CudaKernels final : public DeviceKernels {
 public:
  absl::Status Prepare(int32_t device_index) const override {
    return PrepareCudaKernels(device_index);
  }
  KernelFn Find(absl::string_view op) const override { return FindCudaKernel(op); }
  absl::Status CheckDTypes(absl::string_view op, absl::Span<const OpArg> args,
                           absl::Span<const TensorRef* const> results) const override {
    return CheckCudaKernelDTypes(op, args, results);
  }
  void SetStream(void* stream) const override { SetCurrentCudaStream(stream); }
};

class KernelTable {
 public:
  KernelTable() {
    static const CudaKernels cuda;
    if (HaveCudaKernels()) slots_[static_cast<size_t>(DeviceType::kCuda)].store(&cuda);
  }

  const DeviceKernels* Find(DeviceType type) const {
    return slots_[static_cast<size_t>(type)].load(std::memory_order_acquire);
  }

  absl::Status Register(DeviceType type, const DeviceKernels* kernels) {
    if (kernels == nullptr) {
      return absl::InvalidArgumentError("RegisterDeviceKernels: null kernels");
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::atomic<const DeviceKernels*>& slot = slots_[static_cast<size_t>(type)];
    if (slot.load(std::memory_order_relaxed) != nullptr) {
      return absl::AlreadyExistsError(absl::StrCat("device type \"", DeviceTypeName(type),
                                                   "\" has kernels registered already"));
    }
    slot.store(kernels, std::memory_order_release);
    return absl::OkStatus();
  }

 private:
  std::mutex mu_;
  std::array<std::atomic<const DeviceKernels*>, 256> slots_{};
};

KernelTable& Table() {
  static KernelTable* table = new KernelTable();  // never destroyed: lookups may run at exit
  return *table;
}

}  // namespace

const DeviceKernels* FindDeviceKernels(DeviceType type) { return Table().Find(type); }

absl::Status RegisterDeviceKernels(DeviceType type, const DeviceKernels* kernels) {
  return Table().Register(type, kernels);
}

}  // namespace ferry
