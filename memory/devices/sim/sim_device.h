// SimDevice: a simulated device whose memory is real host memory, guarded from host code.
//
// Machines without a GPU (CI included) run device delegates on sim devices. Every allocation is
// its own mmap (rounded up to whole pages). While no device scope is open, a guarded device's
// mappings are PROT_NONE, so a host kernel that touches device memory faults at once instead of
// silently working; inside a scope (EnterScope/ExitScope, or DeviceScope) they are readable and
// writable. Copies open the scopes they need themselves and refuse device-side ranges the device
// does not own: that is how a host pointer posing as device memory is caught.
//
//   SimDevice sim(0);
//   FERRY_ASSIGN_OR_RETURN(void* p, sim.Allocate(4096, 64));
//   FERRY_RETURN_IF_ERROR(sim.CopyHostToDevice(p, host_data, 4096));
//   { DeviceScope scope(sim); static_cast<float*>(p)[0] = 1; }   // fine
//   static_cast<float*>(p)[0] = 1;                                 // faults: outside a scope
//
// Scopes: a depth counter. Entering at depth 0 makes every mapping read/write (one mprotect per
// allocation), leaving back to depth 0 makes them PROT_NONE again; nested scopes cost a counter
// update. An allocation made while a scope is open is accessible until that scope closes. With
// SimDeviceOptions::guard = false (benchmarks) mappings stay read/write and scopes are a counter.
//
// Copies: memcpy inside the scope(s), completed before returning (Synchronize is a no-op),
// counted in DeviceCounters. The device side of every copy must lie inside one allocation of this
// device (InvalidArgument naming the device otherwise); the host side of h2d/d2h must not be
// memory of this device (InvalidArgument: use CopyDeviceToDevice). Zero-byte copies are no-ops.
//
// Fault injection (reliability tests): set_allocation_limit, set_capacity_bytes,
// set_copy_failure_after. InstallSimGuardFaultHandler() makes a guard fault explain itself.
//
// Capacity: SimDeviceOptions::capacity_bytes (0: as much as the host has available) bounds what
// the device holds at once; available_bytes() reports what is left of it, within the host's
// available memory, since sim memory is host memory.
//
// Ownership: memory from Allocate() is the caller's until Free(); the destructor unmaps whatever
// is still allocated. Thread safety: one thread at a time (see DeviceRuntime), except Owns(),
// WasFreed() and available_bytes(), which any thread may call at any time: a method on another
// device asks every device whether a caller's pointer is its memory. The fault handler reads a
// lock-free table and is safe to run at any time.
#ifndef FERRY_MEMORY_DEVICES_SIM_SIM_DEVICE_H_
#define FERRY_MEMORY_DEVICES_SIM_SIM_DEVICE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/memory/device.h"
#include "ferry/memory/device_runtime.h"

namespace ferry {

struct SimDeviceOptions {
  // Make memory inaccessible outside device scopes. Off for benchmarks.
  bool guard = true;
  // The most requested bytes the device holds at once; 0 = as much as the host has available.
  size_t capacity_bytes = 0;
};

class SimDevice final : public DeviceRuntime {
 public:
  explicit SimDevice(int32_t index, SimDeviceOptions options = {});
  ~SimDevice() override;
  SimDevice(const SimDevice&) = delete;
  SimDevice& operator=(const SimDevice&) = delete;

  Device device() const override { return Device::Sim(index_); }

  // InvalidArgument for 0 bytes or an alignment that is not a power of two in [1, 4096];
  // ResourceExhausted naming the device when mmap fails or an injected limit or capacity is hit.
  absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) override;
  // Unmaps memory from Allocate(); nullptr and pointers that do not start an allocation of this
  // device are ignored.
  void Free(void* ptr) override;
  // Against the requested sizes, not the page-rounded mappings. Thread-safe.
  bool Owns(const void* ptr, size_t bytes) const override;
  // Whether `ptr` lies in one of the last allocations this device freed (it remembers a few), so
  // that a use after free is named as such instead of as foreign memory. Thread-safe.
  bool WasFreed(const void* ptr) const override;
  // What is left of the capacity, within the host's available memory. Thread-safe.
  size_t available_bytes() const override;
  bool uses_host_memory() const override { return true; }
  bool ReportAllocationsTo(AddressSpan* span) override;

  absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) override;
  // One memcpy when the source is dense, otherwise a gather; counted as one h2d copy.
  absl::Status CopyHostStridedToDevice(void* dst, const void* src,
                                       const StridedLayout& layout) override;
  // From another sim device: opens both scopes, checks that `src` is the peer's memory, counted
  // as d2d here. From the host: a CopyHostToDevice. From any other device: the peer's
  // device-to-host copy into this device's memory (counted by the peer as d2h, here as d2d).
  absl::Status CopyFromPeer(void* dst, DeviceRuntime& peer, const void* src,
                            size_t bytes) override;
  // memset inside the scope; not counted as a copy.
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

  void EnterScope() override;
  // An ExitScope without a matching EnterScope is ignored.
  void ExitScope() override;

  // `allocations` counts successful Allocate() calls since the last reset; `allocated_bytes`
  // (requested bytes allocated now) survives ResetCounters().
  DeviceCounters counters() const override { return counters_; }
  void ResetCounters() override;

  bool guarded() const override { return guard_; }
  int scope_depth() const { return depth_; }
  // Whether host code may touch the device's memory right now.
  bool accessible() const { return !guard_ || depth_ > 0; }
  size_t live_allocations() const { return allocations_.size(); }

  // Fault injection. The next `n` allocations succeed, every later one returns
  // ResourceExhausted naming the device; -1 = unlimited.
  void set_allocation_limit(int64_t n) { allocation_limit_ = n; }
  // The most requested bytes the device holds at once; an allocation beyond it returns
  // ResourceExhausted. 0 = as much as the host has available.
  void set_capacity_bytes(size_t bytes) { capacity_bytes_ = bytes; }
  // The next `n` copies succeed, the one after returns Internal naming the device (once; later
  // copies succeed again); -1 = never. Copies refused for a bad range do not count.
  void set_copy_failure_after(int64_t n) { copy_failure_after_ = n; }
  bool InjectAllocationFailures(int64_t n) override {
    set_allocation_limit(n);
    return true;
  }
  bool InjectCopyFailure(int64_t n) override {
    set_copy_failure_after(n);
    return true;
  }

 private:
  struct Mapping {
    size_t requested;
    size_t mapped;
    int guard_slot;  // index in the fault handler's table, or -1
  };

  // Whether a copy can skip the checked path: every device-side range lies in the allocation the
  // last range check found (InLastHit), the host side (null: none) lies outside the span of all
  // allocations, no copy failure is armed and nothing is guarded. The checked path gives the same
  // result for such a copy; it exists for everything else and for its error messages.
  bool FastPathApplies(const void* device_side, const void* other_device_side,
                       const void* host_side, size_t bytes) const {
    if (guard_ || copy_failure_after_ >= 0 || !InLastHit(device_side, bytes)) return false;
    if (other_device_side != nullptr && !InLastHit(other_device_side, bytes)) return false;
    if (host_side == nullptr) return other_device_side != nullptr;
    const uintptr_t h = reinterpret_cast<uintptr_t>(host_side);
    const uintptr_t begin = span_begin_.load(std::memory_order_relaxed);
    return h >= span_end_.load(std::memory_order_relaxed) || (h < begin && bytes <= begin - h);
  }
  // Owns() for the thread using the device: also remembers the allocation it found.
  bool OwnsAndRemember(const void* ptr, size_t bytes) const;
  bool InLastHit(const void* p, size_t bytes) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return a >= last_hit_begin_ && a - last_hit_begin_ < last_hit_size_ &&
           bytes <= last_hit_size_ - (a - last_hit_begin_);
  }
  // Validates the device-side range of a copy and applies the injected copy failure.
  absl::Status CheckDeviceRange(const char* what, const char* side, const void* ptr,
                                size_t bytes) const;
  absl::Status CheckHostRange(const char* what, const void* ptr, size_t bytes) const;
  absl::Status ConsumeCopy(const char* what);
  // Scope used by the copies: reports an mprotect failure instead of faulting later.
  absl::Status OpenScope();
  bool Overlaps(uintptr_t begin, size_t bytes) const;
  // Recomputes span_begin_ / span_end_ after the allocations change.
  void UpdateSpan();
  // mprotect every mapping; false (errno set) when one fails.
  bool ProtectAll(int prot);

  int32_t index_;
  bool guard_;
  int depth_ = 0;
  // Changed only by the thread using the device, under mu_; other threads read it under mu_.
  mutable std::mutex mu_;
  std::map<uintptr_t, Mapping> allocations_;  // by start address
  // The last allocations freed, [begin, end) each, for WasFreed (guarded by mu_).
  static constexpr int kFreedRemembered = 32;
  std::array<std::pair<uintptr_t, uintptr_t>, kFreedRemembered> freed_{};
  int freed_next_ = 0;
  // The allocation OwnsAndRemember() last found (requested bytes), checked before the map; the
  // using thread's alone.
  mutable uintptr_t last_hit_begin_ = 0;
  mutable size_t last_hit_size_ = 0;
  // [lowest start, highest end) of all mappings; empty when nothing is allocated. Read by any
  // thread to rule pointers out without a lock.
  std::atomic<uintptr_t> span_begin_{0};
  std::atomic<uintptr_t> span_end_{0};
  AddressSpan* reported_span_ = nullptr;  // see ReportAllocationsTo
  std::atomic<size_t> live_bytes_{0};  // requested bytes allocated now
  DeviceCounters counters_;
  int64_t allocation_limit_ = -1;
  std::atomic<size_t> capacity_bytes_{0};
  int64_t copy_failure_after_ = -1;
};

// Installs (once per process) a SIGSEGV handler that, when the fault address lies in guarded sim
// memory, writes "ferry: sim:N memory touched outside a device scope (address 0x...)" to stderr
// and then lets the fault take its previous course (by default the process dies of SIGSEGV).
// Faults elsewhere go straight to the previous handler. Idempotent; thread-safe.
void InstallSimGuardFaultHandler();

// The SimDevice behind `runtime`, or nullptr when it is another kind of runtime (for tests and
// tools that use fault injection through a DeviceRegistry).
SimDevice* AsSimDevice(DeviceRuntime* runtime);

}  // namespace ferry

#endif  // FERRY_MEMORY_DEVICES_SIM_SIM_DEVICE_H_
