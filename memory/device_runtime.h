// The narrow interface through which Ferry touches a device: allocation, copies, ordering and
// pointer truth. One DeviceRuntime exists per present device; a DeviceRegistry owns them.
//
//   DeviceRuntime* sim = registry.Find(Device::Sim(0));
//   FERRY_ASSIGN_OR_RETURN(void* p, sim->Allocate(1 << 20, 64));
//   FERRY_RETURN_IF_ERROR(sim->CopyHostToDevice(p, host_data, bytes));
//   FERRY_RETURN_IF_ERROR(sim->Synchronize());
//   sim->Free(p);
//
// Ordering: every copy a runtime performs is ordered on that device's single stream, in the order
// it was issued. Copies may complete asynchronously (CUDA); the host must call Synchronize() before
// it reads memory a device-to-host copy writes, or writes memory a host-to-device copy reads. The
// host and sim runtimes complete every copy before returning.
//
// Device scope (sim guard): memory of a guarded device is inaccessible to host code unless a scope
// on that device is open. Delegate calls and copy kernels on a device run inside its scope; host
// kernels run outside every scope, so a host kernel that touches device memory faults loudly.
// Scopes nest. DeviceScope is the RAII form.
//
// Errors: ResourceExhausted when memory runs out (or an injected limit is reached), Internal for a
// device runtime failure with its own text, InvalidArgument for a pointer range the device does not
// own.
//
// Thread safety: a runtime is used by one thread at a time (the executor that owns a method),
// with two exceptions that any thread may call at any time: Owns(), which answers without
// touching state the using thread changes, and available_bytes(). Host memory allocation
// (Allocate/Free on the host runtime) is also safe from any thread, since every method's
// host arena comes from it.
#ifndef FERRY_MEMORY_DEVICE_RUNTIME_H_
#define FERRY_MEMORY_DEVICE_RUNTIME_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/memory/device.h"

namespace ferry {

// The union of the address ranges some runtimes have allocated: a pointer outside it is memory of
// none of them. Widened as they allocate, never narrowed (freed ranges stay inside). Lock-free;
// Include and Contains may run on any thread at any time.
class AddressSpan {
 public:
  void Include(uintptr_t begin, uintptr_t end) {
    uintptr_t lo = begin_.load(std::memory_order_relaxed);
    while (begin < lo && !begin_.compare_exchange_weak(lo, begin, std::memory_order_release)) {
    }
    uintptr_t hi = end_.load(std::memory_order_relaxed);
    while (end > hi && !end_.compare_exchange_weak(hi, end, std::memory_order_release)) {
    }
  }
  bool Contains(const void* ptr) const {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    return p >= begin_.load(std::memory_order_acquire) && p < end_.load(std::memory_order_acquire);
  }

 private:
  std::atomic<uintptr_t> begin_{std::numeric_limits<uintptr_t>::max()};
  std::atomic<uintptr_t> end_{0};
};

// Copy and allocation counters of one device, for tests and `ferry bench`.
struct DeviceCounters {
  uint64_t h2d_copies = 0;
  uint64_t h2d_bytes = 0;
  uint64_t d2h_copies = 0;
  uint64_t d2h_bytes = 0;
  uint64_t d2d_copies = 0;  // within the device and from peers into it
  uint64_t d2d_bytes = 0;
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;  // currently allocated

  // Adds the copy counts and bytes of `other` (not its allocation figures).
  void AddCopies(const DeviceCounters& other) {
    h2d_copies += other.h2d_copies;
    h2d_bytes += other.h2d_bytes;
    d2h_copies += other.d2h_copies;
    d2h_bytes += other.d2h_bytes;
    d2d_copies += other.d2d_copies;
    d2d_bytes += other.d2d_bytes;
  }
};

// A strided host-side source: `rank` sizes and strides, in elements of `element_size` bytes.
struct StridedLayout {
  int32_t rank = 0;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
  size_t element_size = 0;
};

// Timing markers in a device's own order, for traces (LoadOptions::record_trace): Record(i) is
// a point after all work issued to the device so far, taken without waiting; once the device
// has been synchronized, ElapsedNs gives the device's time between two recorded markers. Made
// at load (DeviceRuntime::CreateTimer), so recording allocates nothing. Used by one thread at
// a time, like the device's stream.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  // InvalidArgument for a marker out of range.
  virtual absl::Status Record(size_t marker) = 0;
  // Nanoseconds from marker `from` to marker `to` on the device; Unavailable when either has not
  // been reached yet or was never recorded.
  virtual absl::StatusOr<int64_t> ElapsedNs(size_t from, size_t to) = 0;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  virtual Device device() const = 0;

  // Allocates `bytes` (> 0) aligned to `alignment` (a power of two; every device takes up to 256,
  // the host and sim devices up to 4096). The memory is device memory: for guarded devices, only
  // touchable inside a scope. InvalidArgument for 0 bytes or an alignment it cannot give.
  virtual absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) = 0;
  // Frees memory from Allocate. nullptr is ignored.
  virtual void Free(void* ptr) = 0;

  // Whether [ptr, ptr + bytes) lies entirely inside one allocation of this device. Safe to call
  // from any thread.
  virtual bool Owns(const void* ptr, size_t bytes) const = 0;

  // Whether `ptr` lies in memory this device allocated and has since freed, as far as it
  // remembers; lets an error say "freed memory" instead of "not this device's memory".
  // Safe to call from any thread.
  virtual bool WasFreed(const void* /*ptr*/) const { return false; }

  // Bytes this device can still allocate, as far as it can tell: the host's available memory,
  // a sim device's capacity (within the host's), a CUDA device's free memory. Loading checks
  // every planned arena and constant region against it before allocating anything. The default
  // (a device that cannot tell) is unlimited. Safe to call from any thread.
  virtual size_t available_bytes() const { return std::numeric_limits<size_t>::max(); }
  // Whether this device's memory is the host's RAM (the host itself, sim devices), so that its
  // allocations and the host's draw on one budget.
  virtual bool uses_host_memory() const { return false; }

  // Asks the runtime to include the range of every allocation it has made and will make in
  // `span` (the registry's), so that a pointer outside `span` is known not to be its memory
  // without asking it. Returns false when it cannot (the default), for instance because memory
  // it owns may come from elsewhere; then Owns() must be asked. Called before the runtime is
  // shared between threads; `span` outlives the runtime.
  virtual bool ReportAllocationsTo(AddressSpan* /*span*/) { return false; }

  // Copies between host memory and this device's memory, and within this device.
  virtual absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) = 0;
  // Copies a strided host tensor into dense (row-major over `layout.sizes`) device memory at `dst`.
  virtual absl::Status CopyHostStridedToDevice(void* dst, const void* src,
                                               const StridedLayout& layout) = 0;
  // Copies `bytes` from `src` on `peer` (another device) to `dst` on this device. Counted as a
  // d2d copy on this device.
  virtual absl::Status CopyFromPeer(void* dst, DeviceRuntime& peer, const void* src,
                                    size_t bytes) = 0;

  // Writes zeros over [dst, dst + bytes) of this device's memory (not counted as a copy). Used
  // to fault arenas in at load.
  virtual absl::Status Zero(void* dst, size_t bytes) = 0;

  // Waits until all work issued on this device's stream has completed.
  virtual absl::Status Synchronize() = 0;

  // Device scope; see the file comment. Default: nothing to guard.
  virtual void EnterScope() {}
  virtual void ExitScope() {}
  // Whether host code is kept off this device's memory outside scopes, so that entering and
  // leaving a scope costs protection changes (a guarded sim device).
  virtual bool guarded() const { return false; }

  // Page-locked host memory that this device copies to and from asynchronously, at full DMA
  // speed (cudaHostAlloc on CUDA). Devices that offer it say so with has_pinned_host_memory();
  // then a method's host arena is allocated here, so that its copies to and from the device
  // run asynchronously. Unimplemented for devices without such memory. Free it with
  // FreePinnedHost of the same runtime.
  virtual bool has_pinned_host_memory() const { return false; }
  virtual absl::StatusOr<void*> AllocatePinnedHost(size_t /*bytes*/) {
    return absl::UnimplementedError("this device has no pinned host memory");
  }
  virtual void FreePinnedHost(void* /*ptr*/) {}

  // The device's native stream (a cudaStream_t for CUDA devices), for backends that launch their
  // own kernels on it; nullptr for devices without one.
  virtual void* native_stream() const { return nullptr; }

  // A timer of `markers` markers for device-side times in traces, or nullptr for a device that
  // runs its work in the host's order (the host, sim devices, and the default), whose steps a
  // trace times with the host's clock.
  virtual absl::StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer(size_t /*markers*/) {
    return std::unique_ptr<DeviceTimer>();
  }

  virtual DeviceCounters counters() const = 0;
  virtual void ResetCounters() = 0;

  // Fault injection, for tests of what fails when a device does. Each returns false, changing
  // nothing, where the device offers none. Configure before use (not thread-safe with the
  // calls they affect).
  //  - InjectAllocationFailures(n): the next `n` allocations succeed and every later one returns
  //    ResourceExhausted naming the device; -1 stops it.
  //  - InjectCopyFailure(n): the next `n` copies succeed and the one after returns Internal
  //    naming the device without writing anything (once; later copies succeed); -1 stops it.
  virtual bool InjectAllocationFailures(int64_t /*n*/) { return false; }
  virtual bool InjectCopyFailure(int64_t /*n*/) { return false; }
};

// Opens a scope on a device for the lifetime of the object.
class DeviceScope {
 public:
  explicit DeviceScope(DeviceRuntime& runtime) : runtime_(runtime) { runtime_.EnterScope(); }
  ~DeviceScope() { runtime_.ExitScope(); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  DeviceRuntime& runtime_;
};

}  // namespace ferry

#endif  // FERRY_MEMORY_DEVICE_RUNTIME_H_
