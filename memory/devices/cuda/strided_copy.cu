// The permute/gather kernel of CudaDevice::CopyHostStridedToDevice (see strided_copy.h).
#include "ferry/memory/devices/cuda/strided_copy.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ferry/memory/devices/cuda/cuda_status.h"

namespace ferry::internal {

bool MakePermuteLayout(const StridedLayout& layout, PermuteLayout* out) {
  PermuteLayout l;
  int64_t numel = 1;
  for (int32_t i = 0; i < layout.rank; ++i) {
    const int64_t size = layout.sizes[i];
    if (size <= 0) return false;
    if (__builtin_mul_overflow(numel, size, &numel)) return false;
    if (size == 1) continue;
    if (layout.strides[i] <= 0) return false;
    l.sizes[l.rank] = size;
    l.strides[l.rank] = layout.strides[i];
    ++l.rank;
  }
  // Dense: visiting dimensions from the smallest stride up, each stride is the number of elements
  // the dimensions before it span. (Two dimensions with the same stride fail here: the second one
  // finds the count already multiplied by the first one's size.)
  int32_t order[kMaxStridedRank];
  for (int32_t d = 0; d < l.rank; ++d) order[d] = d;
  std::sort(order, order + l.rank, [&](int32_t a, int32_t b) { return l.strides[a] < l.strides[b]; });
  int64_t span = 1;
  for (int32_t j = 0; j < l.rank; ++j) {
    if (l.strides[order[j]] != span) return false;
    span *= l.sizes[order[j]];  // at most numel: no overflow
  }
  // Merge each dimension into its outer neighbour when the pair is contiguous, so the kernel
  // divides over as few dimensions as possible.
  PermuteLayout merged;
  for (int32_t d = 0; d < l.rank; ++d) {
    const int32_t r = merged.rank;
    if (r > 0 && merged.strides[r - 1] == l.strides[d] * l.sizes[d]) {
      merged.sizes[r - 1] *= l.sizes[d];
      merged.strides[r - 1] = l.strides[d];
      continue;
    }
    merged.sizes[r] = l.sizes[d];
    merged.strides[r] = l.strides[d];
    ++merged.rank;
  }
  merged.numel = numel;
  *out = merged;
  return true;
}

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

// dst[i] = src[PermuteSourceOffset(l, i)]: writes coalesce, reads follow the permutation.
template <typename T>
__global__ void PermuteGather(T* dst, const T* src, PermuteLayout l) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.numel;
       i += step) {
    dst[i] = src[PermuteSourceOffset(l, i)];
  }
}

// The same for element sizes without a matching word type (or misaligned pointers).
__global__ void PermuteGatherBytes(char* dst, const char* src, PermuteLayout l,
                                   int64_t element_size) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.numel;
       i += step) {
    const char* s = src + PermuteSourceOffset(l, i) * element_size;
    char* d = dst + i * element_size;
    for (int64_t b = 0; b < element_size; ++b) d[b] = s[b];
  }
}

template <typename T>
bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(T) == 0;
}

template <typename T>
bool LaunchTyped(void* dst, const void* src, const PermuteLayout& l, int blocks,
                 cudaStream_t stream) {
  if (!Aligned<T>(dst) || !Aligned<T>(src)) return false;
  PermuteGather<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(dst),
                                                    static_cast<const T*>(src), l);
  return true;
}

}  // namespace

absl::Status LaunchPermuteCopy(void* dst, const void* src, const PermuteLayout& l,
                               size_t element_size, void* stream) {
  if (l.numel == 0) return absl::OkStatus();
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int blocks =
      static_cast<int>(std::min<int64_t>((l.numel + kThreads - 1) / kThreads, kMaxBlocks));
  bool launched = false;
  switch (element_size) {
    case 1:
      launched = LaunchTyped<uint8_t>(dst, src, l, blocks, s);
      break;
    case 2:
      launched = LaunchTyped<uint16_t>(dst, src, l, blocks, s);
      break;
    case 4:
      launched = LaunchTyped<uint32_t>(dst, src, l, blocks, s);
      break;
    case 8:
      launched = LaunchTyped<uint64_t>(dst, src, l, blocks, s);
      break;
    case 16:
      launched = LaunchTyped<uint4>(dst, src, l, blocks, s);
      break;
    default:
      break;
  }
  if (!launched) {
    PermuteGatherBytes<<<blocks, kThreads, 0, s>>>(static_cast<char*>(dst),
                                                   static_cast<const char*>(src), l,
                                                   static_cast<int64_t>(element_size));
  }
  FERRY_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace ferry::internal
