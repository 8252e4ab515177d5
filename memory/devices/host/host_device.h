// HostDevice: the DeviceRuntime of ordinary host memory (Device::Host()).
//
//   HostDevice host;
//   FERRY_ASSIGN_OR_RETURN(void* p, host.Allocate(4096, 64));
//   FERRY_RETURN_IF_ERROR(host.CopyHostToDevice(p, data, 4096));   // a counted memcpy
//   host.Free(p);
//
// Allocation: aligned heap memory; Owns() answers from this runtime's own allocation table, so it
// is true only for memory this runtime allocated. Copies are memcpy and are counted; they do not
// check ownership, because on the host every pointer is host memory (program data, caller
// buffers, arenas alike). Copies complete before returning; Synchronize() is a no-op. No guard.
//
// Fault injection: set_allocation_limit() (InjectAllocationFailures) makes later allocations fail
// with ResourceExhausted, so load paths can be tested for failure at every allocation;
// InjectCopyFailure fails one copy.
//
// Ownership: memory from Allocate() belongs to the caller until Free(); the destructor frees
// whatever is still allocated. Thread safety: Allocate, Free, Owns, the copies and the counters
// may be called from any thread (every method's host arena comes from this runtime, and
// methods run on threads of their own); the fault injection setters are for tests that
// configure the runtime before use.
//
// This header also carries the strided-gather primitives the host and sim runtimes share
// (ferry::internal).
#ifndef FERRY_MEMORY_DEVICES_HOST_HOST_DEVICE_H_
#define FERRY_MEMORY_DEVICES_HOST_HOST_DEVICE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/memory/device.h"
#include "ferry/memory/device_runtime.h"

namespace ferry {

class HostDevice final : public DeviceRuntime {
 public:
  HostDevice() = default;
  ~HostDevice() override;
  HostDevice(const HostDevice&) = delete;
  HostDevice& operator=(const HostDevice&) = delete;

  Device device() const override { return Device::Host(); }

  // InvalidArgument for 0 bytes or an alignment that is not a power of two in [1, 4096];
  // ResourceExhausted when the heap (or the injected limit) refuses.
  absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) override;
  // Frees memory from Allocate(); nullptr and pointers this runtime did not allocate are ignored.
  void Free(void* ptr) override;
  bool Owns(const void* ptr, size_t bytes) const override;
  // The memory the system reports available (MemAvailable), within the process's cgroup limit.
  size_t available_bytes() const override;
  bool uses_host_memory() const override { return true; }

  absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyHostStridedToDevice(void* dst, const void* src,
                                       const StridedLayout& layout) override;
  // From a sim peer this opens the peer's scope and checks that `src` is the peer's memory; from
  // any other peer it asks the peer for a device-to-host copy. Counted as d2d here.
  absl::Status CopyFromPeer(void* dst, DeviceRuntime& peer, const void* src,
                            size_t bytes) override;
  // memset; not counted as a copy.
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

  // `allocations` counts successful Allocate() calls since the last reset; `allocated_bytes` is
  // what is allocated now and survives ResetCounters().
  DeviceCounters counters() const override;
  void ResetCounters() override;

  // The next `n` allocations succeed, later ones return ResourceExhausted; -1 = unlimited.
  void set_allocation_limit(int64_t n) { allocation_limit_ = n; }
  bool InjectAllocationFailures(int64_t n) override {
    set_allocation_limit(n);
    return true;
  }
  bool InjectCopyFailure(int64_t n) override {
    copy_failure_after_ = n;
    return true;
  }
  // Number of allocations not yet freed.
  size_t live_allocations() const;

 private:
  void Count(uint64_t DeviceCounters::*copies, uint64_t DeviceCounters::*bytes_counter,
             size_t bytes);
  // Refuses null pointers and applies the injected copy failure.
  absl::Status CheckCopy(const char* what, const void* dst, const void* src, size_t bytes);

  mutable std::mutex mu_;  // guards allocations_ and counters_
  std::map<uintptr_t, size_t> allocations_;  // start -> requested bytes
  DeviceCounters counters_;
  std::atomic<int64_t> allocation_limit_{-1};
  std::atomic<int64_t> copy_failure_after_{-1};
};

namespace internal {

// The largest rank CopyHostStridedToDevice accepts after size-1 and contiguous dimensions have
// been merged away.
inline constexpr int kMaxStridedRank = 16;

// Checks `layout` (rank in [0, 16] before merging, non-negative sizes, element_size > 0, sizes
// and strides present when rank > 0) and returns the dense byte size of the tensor it describes.
// InvalidArgument naming `who` for a malformed layout; ResourceExhausted when the size overflows.
absl::StatusOr<size_t> DenseBytesOf(const StridedLayout& layout, absl::string_view who);

// Gathers the strided tensor at `src` into dense row-major memory at `dst`. `layout` must have
// passed DenseBytesOf. One memcpy when the source is already dense; otherwise one memcpy per
// innermost contiguous run. Allocates nothing.
void GatherStrided(void* dst, const void* src, const StridedLayout& layout);

// The host memory this process can still use: the system's MemAvailable, within the cgroup's
// memory limit when one is set. SIZE_MAX when neither can be read. Each call reads up to three
// files (tens of microseconds): call it once per load, not per node or per delegate.
size_t HostAvailableBytes();
// How many times HostAvailableBytes has been called in this process (tests check that loading
// asks a bounded number of times, whatever the program's size).
size_t HostAvailableBytesQueries();

// Loading's own structures (a program's parsed values and nodes, a method's load tables) are
// checked against HostAvailableBytes only from this size: they guard against a file that makes
// the loader build gigabytes, and a smaller need is not worth the query (a method with many
// graph delegates parses one small sub-program per delegate). A caller's limit still applies
// at every size.
inline constexpr size_t kHostMemoryQueryFloorBytes = size_t{1} << 20;

// HostAvailableBytes() when `need` is at least kHostMemoryQueryFloorBytes, else SIZE_MAX
// (without asking).
size_t HostAvailableBytesFor(size_t need);

// "16 B", "4.0 KiB", "1.5 MiB", "24.56 GiB", "128.00 TiB".
std::string FormatBytes(size_t n);

// Power of two in [1, 4096]: what every runtime's Allocate() accepts.
absl::Status CheckAllocationRequest(Device device, size_t bytes, size_t alignment);

}  // namespace internal
}  // namespace ferry

#endif  // FERRY_MEMORY_DEVICES_HOST_HOST_DEVICE_H_
