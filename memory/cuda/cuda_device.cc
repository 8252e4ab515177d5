#include "memory/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "memory/cuda/cuda_status.h"
#include "memory/device_registry.h"
#include "memory/host_device.h"
#include "memory/status_macros.h"

namespace ferry {
namespace {

constexpr size_t kStagingBytes = 8u << 20;

cudaStream_t AsStream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Open(int32_t index) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  cudaStream_t stream = nullptr;
  FERRY_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return std::unique_ptr<CudaDevice>(new CudaDevice(index, stream));
}

CudaDevice::~CudaDevice() {
  if (cudaSetDevice(index_) != cudaSuccess) return;
  cudaStreamSynchronize(AsStream(stream_));
  for (const auto& [start, bytes] : allocations_) cudaFree(reinterpret_cast<void*>(start));
  if (staging_ != nullptr) cudaFreeHost(staging_);
  cudaStreamDestroy(AsStream(stream_));
}

absl::Status CudaDevice::Activate() const {
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  return absl::OkStatus();
}

absl::StatusOr<void*> CudaDevice::Allocate(size_t bytes, size_t alignment) {
  if (bytes == 0) return absl::InvalidArgumentError(absl::StrCat(device().ToString(), ": cannot allocate 0 bytes"));
  if (alignment > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat(device().ToString(), ": alignment ", alignment, " is above 256"));
  }
  FERRY_RETURN_IF_ERROR(Activate());
  void* p = nullptr;
  FERRY_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
  allocations_[reinterpret_cast<uintptr_t>(p)] = bytes;
  ++counters_.allocations;
  counters_.allocated_bytes += bytes;
  return p;
}

void CudaDevice::Free(void* ptr) {
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (ptr == nullptr || it == allocations_.end()) return;
  if (cudaSetDevice(index_) == cudaSuccess) {
    cudaStreamSynchronize(AsStream(stream_));
    cudaFree(ptr);
  }
  counters_.allocated_bytes -= it->second;
  allocations_.erase(it);
}

bool CudaDevice::Owns(const void* ptr, size_t bytes) const {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error of an unknown pointer
    return false;
  }
  if (attributes.type != cudaMemoryTypeDevice || attributes.device != index_) return false;
  // The whole range must lie in one allocation; for memory allocated elsewhere (a caller's
  // cudaMalloc) the driver's answer for both ends is the best available.
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations_.upper_bound(p);
  if (it != allocations_.begin()) {
    --it;
    if (p >= it->first && p < it->first + it->second) {
      return bytes <= it->second && p - it->first <= it->second - bytes;
    }
  }
  if (bytes == 0) return true;
  cudaPointerAttributes last;
  if (cudaPointerGetAttributes(&last, static_cast<const char*>(ptr) + bytes - 1) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return last.type == cudaMemoryTypeDevice && last.device == index_;
}

bool CudaDevice::IsPinned(const void* host) const {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

absl::StatusOr<char*> CudaDevice::Staging() {
  if (staging_ == nullptr) {
    void* p = nullptr;
    FERRY_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&p, kStagingBytes, cudaHostAllocDefault));
    staging_ = static_cast<char*>(p);
  }
  return staging_;
}

absl::Status CudaDevice::CopyHostToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(Activate());
  if (IsPinned(src)) {
    FERRY_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, AsStream(stream_)));
  } else {
    // Pageable memory: stage through pinned memory in chunks.
    FERRY_ASSIGN_OR_RETURN(char* staging, Staging());
    for (size_t done = 0; done < bytes; done += kStagingBytes) {
      const size_t n = std::min(kStagingBytes, bytes - done);
      FERRY_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream_)));
      std::memcpy(staging, static_cast<const char*>(src) + done, n);
      FERRY_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(static_cast<char*>(dst) + done, staging, n,
                                                 cudaMemcpyHostToDevice, AsStream(stream_)));
    }
    FERRY_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream_)));
  }
  ++counters_.h2d_copies;
  counters_.h2d_bytes += bytes;
  return absl::OkStatus();
}

absl::Status CudaDevice::CopyDeviceToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(Activate());
  if (IsPinned(dst)) {
    FERRY_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, AsStream(stream_)));
  } else {
    FERRY_ASSIGN_OR_RETURN(char* staging, Staging());
    for (size_t done = 0; done < bytes; done += kStagingBytes) {
      const size_t n = std::min(kStagingBytes, bytes - done);
      FERRY_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging, static_cast<const char*>(src) + done, n,
                                                 cudaMemcpyDeviceToHost, AsStream(stream_)));
      FERRY_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream_)));
      std::memcpy(static_cast<char*>(dst) + done, staging, n);
    }
  }
  ++counters_.d2h_copies;
  counters_.d2h_bytes += bytes;
  return absl::OkStatus();
}

absl::Status CudaDevice::CopyDeviceToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(Activate());
  FERRY_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, AsStream(stream_)));
  ++counters_.d2d_copies;
  counters_.d2d_bytes += bytes;
  return absl::OkStatus();
}

absl::Status CudaDevice::CopyHostStridedToDevice(void* dst, const void* src,
                                                 const StridedLayout& layout) {
  FERRY_ASSIGN_OR_RETURN(const size_t bytes, internal::DenseBytesOf(layout, device().ToString()));
  if (bytes == 0) return absl::OkStatus();
  // Gather on the host into pinned memory, then one DMA; large tensors go through a temporary
  // pinned buffer of their own size (load-time constant conversion).
  FERRY_RETURN_IF_ERROR(Activate());
  void* pinned = nullptr;
  FERRY_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault));
  internal::GatherStrided(pinned, src, layout);
  cudaError_t copy = cudaMemcpyAsync(dst, pinned, bytes, cudaMemcpyHostToDevice, AsStream(stream_));
  cudaError_t sync = cudaStreamSynchronize(AsStream(stream_));
  cudaFreeHost(pinned);
  FERRY_CUDA_RETURN_IF_ERROR(copy);
  FERRY_CUDA_RETURN_IF_ERROR(sync);
  ++counters_.h2d_copies;
  counters_.h2d_bytes += bytes;
  return absl::OkStatus();
}

absl::Status CudaDevice::CopyFromPeer(void* dst, DeviceRuntime& peer, const void* src,
                                      size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (peer.device().type != DeviceType::kCuda) {
    return absl::UnimplementedError(absl::StrCat(device().ToString(), ": peer copy from ",
                                                 peer.device().ToString(), " is not supported"));
  }
  FERRY_RETURN_IF_ERROR(peer.Synchronize());
  FERRY_RETURN_IF_ERROR(Activate());
  FERRY_CUDA_RETURN_IF_ERROR(
      cudaMemcpyPeerAsync(dst, index_, src, peer.device().index, bytes, AsStream(stream_)));
  ++counters_.d2d_copies;
  counters_.d2d_bytes += bytes;
  return absl::OkStatus();
}

absl::StatusOr<void*> CudaDevice::AllocatePinnedHost(size_t bytes) {
  void* p = nullptr;
  FERRY_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
  return p;
}

void CudaDevice::FreePinnedHost(void* ptr) {
  if (ptr != nullptr) cudaFreeHost(ptr);
}

void CudaDevice::EnterScope() { cudaSetDevice(index_); }

absl::Status CudaDevice::Zero(void* dst, size_t bytes) {
  FERRY_RETURN_IF_ERROR(Activate());
  FERRY_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, AsStream(stream_)));
  return absl::OkStatus();
}

absl::Status CudaDevice::Synchronize() {
  FERRY_RETURN_IF_ERROR(Activate());
  FERRY_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream_)));
  return absl::OkStatus();
}

void CudaDevice::ResetCounters() {
  uint64_t allocations = counters_.allocations, allocated = counters_.allocated_bytes;
  counters_ = DeviceCounters{};
  counters_.allocations = allocations;
  counters_.allocated_bytes = allocated;
}

void AddCudaDevices(DeviceRegistry& registry) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return;  // no driver or no GPU: the default device map sends cuda:N to sim:N
  }
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Open(i);
    if (device.ok()) registry.Add(*std::move(device)).IgnoreError();
  }
}

}  // namespace ferry
