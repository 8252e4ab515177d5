#include "memory/host_device.h"

#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "memory/status_macros.h"

namespace ferry {
namespace internal {

absl::Status CheckAllocationRequest(Device device, size_t bytes, size_t alignment) {
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(device.ToString(), ": cannot allocate 0 bytes; use an empty buffer instead"));
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat(device.ToString(), ": allocation alignment ", alignment,
                     " is not a power of two between 1 and 4096"));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> DenseBytesOf(const StridedLayout& layout, absl::string_view who) {
  if (layout.rank < 0 || layout.rank > kMaxStridedRank) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": strided copy of rank ", layout.rank,
                                                   "; the rank must be between 0 and ",
                                                   kMaxStridedRank));
  }
  if (layout.element_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": strided copy with element_size 0"));
  }
  if (layout.rank > 0 && (layout.sizes == nullptr || layout.strides == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": strided copy of rank ", layout.rank, " without sizes or strides"));
  }
  size_t bytes = layout.element_size;
  bool empty = false;
  for (int32_t i = 0; i < layout.rank; ++i) {
    const int64_t size = layout.sizes[i];
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": strided copy: dimension ", i, " has negative size ", size));
    }
    if (size == 0) empty = true;
    if (!empty && __builtin_mul_overflow(bytes, static_cast<size_t>(size), &bytes)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(who, ": strided copy: the tensor's byte size overflows size_t"));
    }
  }
  return empty ? 0 : bytes;
}

namespace {

// Copies `count` elements of `Size` bytes `stride` elements apart; constant sizes let the
// compiler turn each memcpy into one load and one store.
template <size_t Size>
char* GatherRow(char* out, const char* in, int64_t count, int64_t stride_bytes) {
  for (int64_t j = 0; j < count; ++j) {
    std::memcpy(out, in, Size);
    out += Size;
    in += stride_bytes;
  }
  return out;
}

char* GatherRowAnySize(char* out, const char* in, int64_t count, int64_t stride_bytes,
                       size_t es) {
  switch (es) {
    case 1:
      return GatherRow<1>(out, in, count, stride_bytes);
    case 2:
      return GatherRow<2>(out, in, count, stride_bytes);
    case 4:
      return GatherRow<4>(out, in, count, stride_bytes);
    case 8:
      return GatherRow<8>(out, in, count, stride_bytes);
    default:
      for (int64_t j = 0; j < count; ++j) {
        std::memcpy(out, in, es);
        out += es;
        in += stride_bytes;
      }
      return out;
  }
}

}  // namespace

void GatherStrided(void* dst, const void* src, const StridedLayout& layout) {
  const size_t es = layout.element_size;
  // Drop size-1 dimensions and merge each dimension into its outer neighbour when the pair is
  // contiguous, so dense and "dense in blocks" sources take the fewest memcpy calls.
  int64_t sizes[kMaxStridedRank];
  int64_t strides[kMaxStridedRank];
  int rank = 0;
  for (int32_t i = 0; i < layout.rank; ++i) {
    const int64_t size = layout.sizes[i];
    if (size == 0) return;
    if (size == 1) continue;
    sizes[rank] = size;
    strides[rank] = layout.strides[i];
    ++rank;
    if (rank >= 2 && strides[rank - 2] == strides[rank - 1] * sizes[rank - 1]) {
      sizes[rank - 2] *= sizes[rank - 1];
      strides[rank - 2] = strides[rank - 1];
      --rank;
    }
  }
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  if (rank == 0) {
    std::memcpy(out, in, es);
    return;
  }
  const int64_t ies = static_cast<int64_t>(es);
  const int64_t inner = sizes[rank - 1];
  const int64_t inner_stride_bytes = strides[rank - 1] * ies;
  const bool inner_dense = strides[rank - 1] == 1;
  if (rank == 1 && inner_dense) {
    std::memcpy(out, in, static_cast<size_t>(inner) * es);
    return;
  }
  // Odometer over the outer dimensions; `offset` is in bytes from `in`.
  int64_t index[kMaxStridedRank] = {};
  int64_t offset = 0;
  const int outer = rank - 1;
  while (true) {
    if (inner_dense) {
      std::memcpy(out, in + offset, static_cast<size_t>(inner) * es);
      out += inner * ies;
    } else {
      out = GatherRowAnySize(out, in + offset, inner, inner_stride_bytes, es);
    }
    int d = outer - 1;
    while (d >= 0) {
      offset += strides[d] * ies;
      if (++index[d] < sizes[d]) break;
      offset -= strides[d] * ies * sizes[d];
      index[d] = 0;
      --d;
    }
    if (d < 0) return;
  }
}

}  // namespace internal

namespace {

absl::Status CheckHostCopy(const char* what, const void* dst, const void* src, size_t bytes) {
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("host: ", what, " copy of ", bytes, " bytes with a null pointer"));
  }
  return absl::OkStatus();
}

}  // namespace

HostDevice::~HostDevice() {
  for (const auto& [start, bytes] : allocations_) std::free(reinterpret_cast<void*>(start));
}

absl::StatusOr<void*> HostDevice::Allocate(size_t bytes, size_t alignment) {
  FERRY_RETURN_IF_ERROR(internal::CheckAllocationRequest(device(), bytes, alignment));
  if (allocation_limit_ == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "host: out of memory allocating ", bytes, " bytes (injected allocation limit)"));
  }
  if (alignment < alignof(std::max_align_t)) alignment = alignof(std::max_align_t);
  // aligned_alloc wants a multiple of the alignment.
  if (bytes > SIZE_MAX - (alignment - 1)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("host: cannot allocate ", bytes, " bytes: the size is too large"));
  }
  const size_t rounded = (bytes + alignment - 1) & ~(alignment - 1);
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("host: out of memory allocating ", bytes, " bytes"));
  }
  if (allocation_limit_ > 0) --allocation_limit_;
  allocations_.emplace(reinterpret_cast<uintptr_t>(p), bytes);
  ++counters_.allocations;
  counters_.allocated_bytes += bytes;
  return p;
}

void HostDevice::Free(void* ptr) {
  if (ptr == nullptr) return;
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations_.end()) return;
  counters_.allocated_bytes -= it->second;
  allocations_.erase(it);
  std::free(ptr);
}

bool HostDevice::Owns(const void* ptr, size_t bytes) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return false;
  --it;
  const uintptr_t offset = p - it->first;
  return offset < it->second && bytes <= it->second - offset;
}

absl::Status HostDevice::CopyHostToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(CheckHostCopy("h2d", dst, src, bytes));
  std::memmove(dst, src, bytes);
  ++counters_.h2d_copies;
  counters_.h2d_bytes += bytes;
  return absl::OkStatus();
}

absl::Status HostDevice::CopyDeviceToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(CheckHostCopy("d2h", dst, src, bytes));
  std::memmove(dst, src, bytes);
  ++counters_.d2h_copies;
  counters_.d2h_bytes += bytes;
  return absl::OkStatus();
}

absl::Status HostDevice::CopyDeviceToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(CheckHostCopy("d2d", dst, src, bytes));
  std::memmove(dst, src, bytes);
  ++counters_.d2d_copies;
  counters_.d2d_bytes += bytes;
  return absl::OkStatus();
}

absl::Status HostDevice::CopyHostStridedToDevice(void* dst, const void* src,
                                                 const StridedLayout& layout) {
  FERRY_ASSIGN_OR_RETURN(size_t bytes, internal::DenseBytesOf(layout, "host"));
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(CheckHostCopy("strided h2d", dst, src, bytes));
  internal::GatherStrided(dst, src, layout);
  ++counters_.h2d_copies;
  counters_.h2d_bytes += bytes;
  return absl::OkStatus();
}

absl::Status HostDevice::CopyFromPeer(void* dst, DeviceRuntime& peer, const void* src,
                                      size_t bytes) {
  if (peer.device().is_host()) return CopyDeviceToDevice(dst, src, bytes);
  // From a device to the host is that device's d2h: it checks the range, opens its own scope
  // and counts the copy.
  FERRY_RETURN_IF_ERROR(peer.CopyDeviceToHost(dst, src, bytes));
  return peer.Synchronize();
}

absl::Status HostDevice::Zero(void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("host: zeroing ", bytes, " bytes at null"));
  }
  std::memset(dst, 0, bytes);
  return absl::OkStatus();
}

void HostDevice::ResetCounters() {
  const uint64_t allocated = counters_.allocated_bytes;
  counters_ = DeviceCounters{};
  counters_.allocated_bytes = allocated;
}

}  // namespace ferry
