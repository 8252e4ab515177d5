// A CUDA device as a DeviceRuntime.
//
// One stream per device; every copy is issued on it asynchronously and Synchronize() waits for it.
// Device memory comes from cudaMalloc (one allocation per arena or constant region, sized at load).
// Host-to-device copies from pageable memory are staged through a pinned buffer owned by the
// device (chunked, so host memory stays bounded); copies from pinned memory go straight to the DMA
// engine. Owns() asks the driver (cudaPointerGetAttributes), so a host pointer posing as device
// memory is refused (P13).
//
// Built only when a CUDA compiler is found. Thread safety: one thread at a time.
#ifndef FERRY_MEMORY_CUDA_CUDA_DEVICE_H_
#define FERRY_MEMORY_CUDA_CUDA_DEVICE_H_

#include <cstdint>
#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "memory/device_runtime.h"

namespace ferry {

class CudaDevice : public DeviceRuntime {
 public:
  // Internal when the device cannot be opened.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Open(int32_t index);
  ~CudaDevice() override;

  Device device() const override { return Device::Cuda(index_); }
  absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) override;
  void Free(void* ptr) override;
  bool Owns(const void* ptr, size_t bytes) const override;
  absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyHostStridedToDevice(void* dst, const void* src,
                                       const StridedLayout& layout) override;
  absl::Status CopyFromPeer(void* dst, DeviceRuntime& peer, const void* src,
                            size_t bytes) override;
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::Status Synchronize() override;
  DeviceCounters counters() const override { return counters_; }
  void ResetCounters() override;

  void* native_stream() const override { return stream_; }
  // Page-locked host memory (cudaHostAlloc): copies from and to it go straight to the DMA engine.
  absl::StatusOr<void*> AllocatePinnedHost(size_t bytes) override;
  void FreePinnedHost(void* ptr) override;
  // Makes this device current for the calling thread, so kernels launched inside the scope (on
  // native_stream()) run on it.
  void EnterScope() override;

 private:
  CudaDevice(int32_t index, void* stream) : index_(index), stream_(stream) {}
  absl::Status Activate() const;
  bool IsPinned(const void* host) const;
  absl::StatusOr<char*> Staging();

  int32_t index_;
  void* stream_;
  std::map<uintptr_t, size_t> allocations_;
  char* staging_ = nullptr;  // pinned, kStagingBytes
  DeviceCounters counters_;
};

}  // namespace ferry

#endif  // FERRY_MEMORY_CUDA_CUDA_DEVICE_H_
