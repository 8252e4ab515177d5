#include "ferry/memory/devices/host/host_device.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "ferry/base/status_macros.h"
#include "ferry/memory/device_registry.h"
#include "ferry/memory/device_type.h"

namespace ferry {
namespace internal {

namespace {

// The first number in the file at `path` ("max" and unreadable files: SIZE_MAX).
size_t ReadNumber(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return std::numeric_limits<size_t>::max();
  unsigned long long value = 0;
  const bool ok = std::fscanf(f, "%llu", &value) == 1;
  std::fclose(f);
  return ok ? static_cast<size_t>(value) : std::numeric_limits<size_t>::max();
}

// MemAvailable in the text of /proc/meminfo, in bytes; SIZE_MAX when it is not there.
size_t ParseMemAvailable(const char* text) {
  constexpr absl::string_view kField = "MemAvailable:";
  const char* line = std::strstr(text, kField.data());
  if (line == nullptr) return std::numeric_limits<size_t>::max();
  char* end = nullptr;
  const unsigned long long kib = std::strtoull(line + kField.size(), &end, 10);
  return end == line + kField.size() ? std::numeric_limits<size_t>::max()
                                     : static_cast<size_t>(kib) * 1024;
}

// MemAvailable from /proc/meminfo, SIZE_MAX when it cannot be read. The file is opened once per
// process and read from its start with pread (any thread may), which halves the cost of a query;
// should the descriptor stop reading as /proc/meminfo (a process that closes descriptors it did
// not open), the file is opened afresh for that query.
size_t MemAvailable() {
  static const int fd = ::open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
  char buf[8192];
  if (fd >= 0) {
    ssize_t n;
    do {
      n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      buf[n] = '\0';
      if (size_t available = ParseMemAvailable(buf);
          available != std::numeric_limits<size_t>::max()) {
        return available;
      }
    }
  }
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return std::numeric_limits<size_t>::max();
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  return ParseMemAvailable(buf);
}

std::atomic<size_t> host_available_queries{0};

}  // namespace

size_t HostAvailableBytesQueries() {
  return host_available_queries.load(std::memory_order_relaxed);
}

size_t HostAvailableBytesFor(size_t need) {
  return need < kHostMemoryQueryFloorBytes ? std::numeric_limits<size_t>::max()
                                           : HostAvailableBytes();
}

size_t HostAvailableBytes() {
  host_available_queries.fetch_add(1, std::memory_order_relaxed);
  size_t available = MemAvailable();
  if (available == std::numeric_limits<size_t>::max()) {
    const long pages = sysconf(_SC_AVPHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) available = static_cast<size_t>(pages) * static_cast<size_t>(page);
  }
  // A container's memory limit (cgroup v2) binds before the machine's memory does. Outside one
  // the files are absent for the process's life: looked for once.
  static const bool has_cgroup_limit = ::access("/sys/fs/cgroup/memory.max", R_OK) == 0;
  if (!has_cgroup_limit) return available;
  const size_t limit = ReadNumber("/sys/fs/cgroup/memory.max");
  const size_t used = ReadNumber("/sys/fs/cgroup/memory.current");
  if (limit != std::numeric_limits<size_t>::max() && used != std::numeric_limits<size_t>::max()) {
    available = std::min(available, limit > used ? limit - used : 0);
  }
  return available;
}

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

std::string FormatBytes(size_t n) {
  if (n >= (size_t{1} << 40)) return absl::StrFormat("%.2f TiB", n / 1099511627776.0);
  if (n >= (size_t{1} << 30)) return absl::StrFormat("%.2f GiB", n / 1073741824.0);
  if (n >= (size_t{1} << 20)) return absl::StrFormat("%.1f MiB", n / 1048576.0);
  if (n >= 4096) return absl::StrFormat("%.1f KiB", n / 1024.0);
  return absl::StrCat(n, " B");
}

}  // namespace internal

HostDevice::~HostDevice() {
  for (const auto& [start, bytes] : allocations_) std::free(reinterpret_cast<void*>(start));
}

absl::StatusOr<void*> HostDevice::Allocate(size_t bytes, size_t alignment) {
  FERRY_RETURN_IF_ERROR(internal::CheckAllocationRequest(device(), bytes, alignment));
  if (allocation_limit_.load(std::memory_order_relaxed) == 0) {
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
  std::lock_guard<std::mutex> lock(mu_);
  if (allocation_limit_ > 0) --allocation_limit_;
  allocations_.emplace(reinterpret_cast<uintptr_t>(p), bytes);
  ++counters_.allocations;
  counters_.allocated_bytes += bytes;
  return p;
}

void HostDevice::Free(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations_.end()) return;
    counters_.allocated_bytes -= it->second;
    allocations_.erase(it);
  }
  std::free(ptr);
}

size_t HostDevice::live_allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocations_.size();
}

DeviceCounters HostDevice::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void HostDevice::Count(uint64_t DeviceCounters::*copies, uint64_t DeviceCounters::*bytes_counter,
                       size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  ++(counters_.*copies);
  counters_.*bytes_counter += bytes;
}

absl::Status HostDevice::CheckCopy(const char* what, const void* dst, const void* src,
                                   size_t bytes) {
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("host: ", what, " copy of ", bytes, " bytes with a null pointer"));
  }
  if (copy_failure_after_.load(std::memory_order_relaxed) >= 0) {
    if (copy_failure_after_.fetch_sub(1, std::memory_order_relaxed) == 0) {
      copy_failure_after_.store(-1, std::memory_order_relaxed);
      return absl::InternalError(absl::StrCat("host: ", what, " copy failed (injected fault)"));
    }
  }
  return absl::OkStatus();
}

size_t HostDevice::available_bytes() const { return internal::HostAvailableBytes(); }

bool HostDevice::Owns(const void* ptr, size_t bytes) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return false;
  --it;
  const uintptr_t offset = p - it->first;
  return offset < it->second && bytes <= it->second - offset;
}

absl::Status HostDevice::CopyHostToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(CheckCopy("h2d", dst, src, bytes));
  std::memmove(dst, src, bytes);
  Count(&DeviceCounters::h2d_copies, &DeviceCounters::h2d_bytes, bytes);
  return absl::OkStatus();
}

absl::Status HostDevice::CopyDeviceToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(CheckCopy("d2h", dst, src, bytes));
  std::memmove(dst, src, bytes);
  Count(&DeviceCounters::d2h_copies, &DeviceCounters::d2h_bytes, bytes);
  return absl::OkStatus();
}

absl::Status HostDevice::CopyDeviceToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(CheckCopy("d2d", dst, src, bytes));
  std::memmove(dst, src, bytes);
  Count(&DeviceCounters::d2d_copies, &DeviceCounters::d2d_bytes, bytes);
  return absl::OkStatus();
}

absl::Status HostDevice::CopyHostStridedToDevice(void* dst, const void* src,
                                                 const StridedLayout& layout) {
  FERRY_ASSIGN_OR_RETURN(size_t bytes, internal::DenseBytesOf(layout, "host"));
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(CheckCopy("strided h2d", dst, src, bytes));
  internal::GatherStrided(dst, src, layout);
  Count(&DeviceCounters::h2d_copies, &DeviceCounters::h2d_bytes, bytes);
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
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t allocated = counters_.allocated_bytes;
  counters_ = DeviceCounters{};
  counters_.allocated_bytes = allocated;
}

// The host's plug-in: one device, present everywhere; "cpu" names it too.
DeviceTypeInfo HostDeviceType() {
  DeviceTypeInfo info;
  info.name = "host";
  info.aliases = {"cpu"};
  info.host_kernels_run_on_memory = true;
  info.discover = [](DeviceRegistry& registry, const DeviceRegistryOptions&) {
    registry.Add(std::make_unique<HostDevice>()).IgnoreError();
  };
  return info;
}

}  // namespace ferry
