// Strided-to-dense conversion on a CUDA device: the device half of
// CudaDevice::CopyHostStridedToDevice.
//
// At load, a constant stored in one dense dimension order (a transposed weight, a channels-last
// filter) is converted into the order the reading delegate was compiled for. When the source is a
// permutation of a dense layout, its elements fill exactly numel * element_size contiguous bytes
// starting at `src`, so the device copies those raw bytes (one streamed DMA, host memory bounded)
// and gathers them into dense row-major order with a kernel, instead of the host gathering them
// element by element first.
//
//   internal::PermuteLayout permute;
//   if (internal::MakePermuteLayout(layout, &permute)) {
//     // ... copy permute.numel * layout.element_size bytes from src to `raw` on the device ...
//     FERRY_RETURN_IF_ERROR(
//         internal::LaunchPermuteCopy(dst, raw, permute, layout.element_size, stream));
//   }
//
// The index math, PermuteSourceOffset, is a __host__ __device__ function, so a host-side test
// checks it against GatherStrided (memory/devices/host/host_device.h). Everything here is a pure function of its
// arguments: safe from any thread; only LaunchPermuteCopy touches the device (asynchronously, on
// the given stream). Only memory/ (and that test) includes this header.
#ifndef FERRY_MEMORY_DEVICES_CUDA_STRIDED_COPY_H_
#define FERRY_MEMORY_DEVICES_CUDA_STRIDED_COPY_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "ferry/memory/device_runtime.h"
#include "ferry/memory/devices/host/host_device.h"

#if defined(__CUDACC__)
#define FERRY_HOST_DEVICE __host__ __device__
#else
#define FERRY_HOST_DEVICE
#endif

namespace ferry::internal {

// A dense permutation, simplified: size-1 dimensions dropped and dimensions that are contiguous
// with their inner neighbour merged. Destination element i (row-major over `sizes`) is source
// element PermuteSourceOffset(*this, i). Plain data, passed to the kernel by value.
struct PermuteLayout {
  int32_t rank = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxStridedRank] = {};
  int64_t strides[kMaxStridedRank] = {};  // in elements of the source, all positive
};

// Fills `*out` and returns true when `layout` (which must have passed DenseBytesOf with a non-zero
// size) is a permutation of a dense layout: all strides of dimensions of size > 1 are positive and,
// taken from the smallest, each is the product of the sizes of the dimensions with smaller
// strides. Then its elements occupy exactly [src, src + numel * element_size). Returns false for
// anything else (gaps, overlaps, zero or negative strides, an empty tensor); `*out` is then
// unspecified. Allocates nothing.
bool MakePermuteLayout(const StridedLayout& layout, PermuteLayout* out);

// Whether the permutation is the identity: the source is already dense row-major.
inline bool IsIdentity(const PermuteLayout& l) {
  return l.rank == 0 || (l.rank == 1 && l.strides[0] == 1);
}

// The source element offset of destination element `i` (0 <= i < l.numel).
FERRY_HOST_DEVICE inline int64_t PermuteSourceOffset(const PermuteLayout& l, int64_t i) {
  int64_t offset = 0;
  for (int32_t d = l.rank - 1; d >= 0; --d) {
    const int64_t q = i / l.sizes[d];
    offset += (i - q * l.sizes[d]) * l.strides[d];
    i = q;
  }
  return offset;
}

// Launches, on `stream` (a cudaStream_t of the current device), the gather of l.numel elements of
// `element_size` bytes from `src` (dense source bytes in device memory) into dense row-major `dst`
// (device memory, not overlapping `src`). Returns without waiting; Internal with CUDA's text when
// the launch fails (which may also report an earlier asynchronous error).
absl::Status LaunchPermuteCopy(void* dst, const void* src, const PermuteLayout& l,
                               size_t element_size, void* stream);

}  // namespace ferry::internal

#endif  // FERRY_MEMORY_DEVICES_CUDA_STRIDED_COPY_H_
