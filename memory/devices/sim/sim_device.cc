#include "ferry/memory/devices/sim/sim_device.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ferry/base/huge_pages.h"
#include "ferry/base/status_macros.h"
#include "ferry/memory/device_registry.h"
#include "ferry/memory/device_type.h"
#include "ferry/memory/devices/host/host_device.h"

namespace ferry {
namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

std::string Range(const void* ptr, size_t bytes) {
  return absl::StrCat("[0x", absl::Hex(reinterpret_cast<uintptr_t>(ptr)), ", +", bytes,
                      " bytes)");
}

// The fault handler's view of guarded mappings: a fixed, lock-free table, because a signal
// handler may neither lock nor walk a std::map that another thread is changing. A mapping that
// finds no free slot is still guarded; its faults are just not explained.
struct GuardSlot {
  std::atomic<bool> claimed{false};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};  // 0 while the slot is not published
  std::atomic<int32_t> device_index{-1};
};
constexpr int kGuardSlots = 8192;
GuardSlot g_guard_slots[kGuardSlots];
std::atomic<int> g_guard_hint{0};

int ClaimGuardSlot(uintptr_t begin, uintptr_t end, int32_t device_index) {
  const int start = g_guard_hint.load(std::memory_order_relaxed);
  for (int k = 0; k < kGuardSlots; ++k) {
    const int i = (start + k) % kGuardSlots;
    GuardSlot& slot = g_guard_slots[i];
    if (slot.claimed.load(std::memory_order_relaxed)) continue;
    bool expected = false;
    if (!slot.claimed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) continue;
    slot.begin.store(begin, std::memory_order_relaxed);
    slot.device_index.store(device_index, std::memory_order_relaxed);
    slot.end.store(end, std::memory_order_release);
    g_guard_hint.store((i + 1) % kGuardSlots, std::memory_order_relaxed);
    return i;
  }
  return -1;
}

void ReleaseGuardSlot(int i) {
  if (i < 0) return;
  g_guard_slots[i].end.store(0, std::memory_order_release);
  g_guard_slots[i].claimed.store(false, std::memory_order_release);
}

struct sigaction g_previous_segv;

// Async-signal-safe formatting: appends to `out` (which has room) and returns the new end.
char* AppendText(char* out, const char* text) {
  while (*text != '\0') *out++ = *text++;
  return out;
}
char* AppendDecimal(char* out, uint64_t value) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  while (n > 0) *out++ = digits[--n];
  return out;
}
char* AppendHex(char* out, uint64_t value) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value & 15];
    value >>= 4;
  } while (value != 0);
  while (n > 0) *out++ = digits[--n];
  return out;
}

void OnSegv(int sig, siginfo_t* info, void* context) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (GuardSlot& slot : g_guard_slots) {
    const uintptr_t end = slot.end.load(std::memory_order_acquire);
    if (end == 0) continue;
    const uintptr_t begin = slot.begin.load(std::memory_order_relaxed);
    if (addr < begin || addr >= end) continue;
    char message[160];
    char* p = AppendText(message, "ferry: sim:");
    p = AppendDecimal(p, static_cast<uint64_t>(slot.device_index.load(std::memory_order_relaxed)));
    p = AppendText(p, " memory touched outside a device scope (address 0x");
    p = AppendHex(p, addr);
    p = AppendText(p, ")\n");
    (void)!write(STDERR_FILENO, message, static_cast<size_t>(p - message));
    // Returning re-executes the access, which faults again under the previous disposition (by
    // default: the process dies of SIGSEGV, as it would have without us).
    sigaction(SIGSEGV, &g_previous_segv, nullptr);
    return;
  }
  // Not ours: hand the fault to whoever had it before.
  if ((g_previous_segv.sa_flags & SA_SIGINFO) != 0 && g_previous_segv.sa_sigaction != nullptr) {
    g_previous_segv.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous_segv.sa_handler == SIG_DFL || g_previous_segv.sa_handler == SIG_IGN) {
    sigaction(SIGSEGV, &g_previous_segv, nullptr);
    return;
  }
  g_previous_segv.sa_handler(sig);
}

// Closes a scope opened by SimDevice::OpenScope.
class ScopeCloser {
 public:
  explicit ScopeCloser(DeviceRuntime& runtime) : runtime_(runtime) {}
  ~ScopeCloser() { runtime_.ExitScope(); }
  ScopeCloser(const ScopeCloser&) = delete;
  ScopeCloser& operator=(const ScopeCloser&) = delete;

 private:
  DeviceRuntime& runtime_;
};

}  // namespace

void InstallSimGuardFaultHandler() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = OnSegv;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &g_previous_segv);
}

SimDevice* AsSimDevice(DeviceRuntime* runtime) { return dynamic_cast<SimDevice*>(runtime); }

SimDevice::SimDevice(int32_t index, SimDeviceOptions options)
    : index_(index), guard_(options.guard), capacity_bytes_(options.capacity_bytes) {}

SimDevice::~SimDevice() {
  for (const auto& [start, mapping] : allocations_) {
    ReleaseGuardSlot(mapping.guard_slot);
    munmap(reinterpret_cast<void*>(start), mapping.mapped);
  }
}

bool SimDevice::ProtectAll(int prot) {
  bool ok = true;
  for (const auto& [start, mapping] : allocations_) {
    if (mprotect(reinterpret_cast<void*>(start), mapping.mapped, prot) != 0) ok = false;
  }
  return ok;
}

void SimDevice::EnterScope() {
  if (guard_ && depth_ == 0) ProtectAll(PROT_READ | PROT_WRITE);
  ++depth_;
}

void SimDevice::ExitScope() {
  if (depth_ == 0) return;
  if (--depth_ == 0 && guard_) ProtectAll(PROT_NONE);
}

absl::Status SimDevice::OpenScope() {
  if (guard_ && depth_ == 0 && !ProtectAll(PROT_READ | PROT_WRITE)) {
    const int error = errno;
    ProtectAll(PROT_NONE);
    return absl::InternalError(absl::StrCat(device().ToString(),
                                            ": cannot open the device scope: mprotect: ",
                                            std::strerror(error)));
  }
  ++depth_;
  return absl::OkStatus();
}

absl::StatusOr<void*> SimDevice::Allocate(size_t bytes, size_t alignment) {
  FERRY_RETURN_IF_ERROR(internal::CheckAllocationRequest(device(), bytes, alignment));
  const std::string name = device().ToString();
  if (allocation_limit_ == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name, ": out of memory allocating ", bytes, " bytes (injected allocation limit)"));
  }
  const size_t capacity = capacity_bytes_.load(std::memory_order_relaxed);
  if (capacity != 0 && (counters_.allocated_bytes > capacity ||
                        bytes > capacity - counters_.allocated_bytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name, ": out of memory allocating ", bytes, " bytes (",
                     counters_.allocated_bytes, " of ", capacity, " bytes in use)"));
  }
  const size_t page = PageSize();
  if (bytes > SIZE_MAX - (page - 1)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name, ": cannot allocate ", bytes, " bytes: the size is too large"));
  }
  const size_t mapped = (bytes + page - 1) / page * page;
  const int prot = accessible() ? PROT_READ | PROT_WRITE : PROT_NONE;
  void* p = MapHugePageMemory(mapped, prot);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(name, ": out of memory allocating ", bytes,
                                                     " bytes: mmap: ", std::strerror(errno)));
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const int slot = guard_ ? ClaimGuardSlot(start, start + mapped, index_) : -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    allocations_.emplace(start, Mapping{bytes, mapped, slot});
    UpdateSpan();
  }
  if (allocation_limit_ > 0) --allocation_limit_;
  ++counters_.allocations;
  counters_.allocated_bytes += bytes;
  live_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return p;
}

void SimDevice::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations_.end()) return;
  ReleaseGuardSlot(it->second.guard_slot);
  munmap(ptr, it->second.mapped);
  counters_.allocated_bytes -= it->second.requested;
  live_bytes_.fetch_sub(it->second.requested, std::memory_order_relaxed);
  if (it->first == last_hit_begin_) last_hit_begin_ = last_hit_size_ = 0;
  freed_[freed_next_] = {it->first, it->first + it->second.requested};
  freed_next_ = (freed_next_ + 1) % kFreedRemembered;
  allocations_.erase(it);
  UpdateSpan();
}

bool SimDevice::Owns(const void* ptr, size_t bytes) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  // Outside the span of all allocations (most host pointers): no lock, no lookup.
  if (p < span_begin_.load(std::memory_order_relaxed) ||
      p >= span_end_.load(std::memory_order_relaxed)) {
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return false;
  --it;
  const uintptr_t offset = p - it->first;
  return offset < it->second.requested && bytes <= it->second.requested - offset;
}

bool SimDevice::OwnsAndRemember(const void* ptr, size_t bytes) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  // Copies mostly hit the allocation the previous one hit (a method's arena).
  if (p >= last_hit_begin_ && p - last_hit_begin_ < last_hit_size_) {
    return bytes <= last_hit_size_ - (p - last_hit_begin_);
  }
  // The map changes only on this thread, so reading it needs no lock here.
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return false;
  --it;
  const uintptr_t offset = p - it->first;
  if (offset >= it->second.requested) return false;
  last_hit_begin_ = it->first;
  last_hit_size_ = it->second.requested;
  return bytes <= it->second.requested - offset;
}

bool SimDevice::WasFreed(const void* ptr) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [begin, end] : freed_) {
    if (p >= begin && p < end) {
      // The range may have been handed out again since.
      auto it = allocations_.upper_bound(p);
      return it == allocations_.begin() || p >= std::prev(it)->first + std::prev(it)->second.requested;
    }
  }
  return false;
}

size_t SimDevice::available_bytes() const {
  size_t available = internal::HostAvailableBytes();
  const size_t capacity = capacity_bytes_.load(std::memory_order_relaxed);
  if (capacity != 0) {
    const size_t live = live_bytes_.load(std::memory_order_relaxed);
    available = std::min(available, capacity > live ? capacity - live : 0);
  }
  return available;
}

void SimDevice::UpdateSpan() {
  if (allocations_.empty()) {
    span_begin_.store(0, std::memory_order_relaxed);
    span_end_.store(0, std::memory_order_relaxed);
    return;
  }
  const auto last = std::prev(allocations_.end());
  span_begin_.store(allocations_.begin()->first, std::memory_order_relaxed);
  span_end_.store(last->first + last->second.mapped, std::memory_order_relaxed);
  if (reported_span_ != nullptr) {
    reported_span_->Include(allocations_.begin()->first, last->first + last->second.mapped);
  }
}

bool SimDevice::ReportAllocationsTo(AddressSpan* span) {
  std::lock_guard<std::mutex> lock(mu_);
  reported_span_ = span;
  UpdateSpan();
  return true;
}

bool SimDevice::Overlaps(uintptr_t begin, size_t bytes) const {
  const uintptr_t end = bytes > UINTPTR_MAX - begin ? UINTPTR_MAX : begin + bytes;
  // Outside the span of all allocations: no lookup.
  if (end <= span_begin_.load(std::memory_order_relaxed) ||
      begin >= span_end_.load(std::memory_order_relaxed)) {
    return false;
  }
  auto it = allocations_.lower_bound(end);  // first allocation starting at or after `end`
  if (it == allocations_.begin()) return false;
  --it;
  return it->first + it->second.requested > begin;
}

absl::Status SimDevice::CheckDeviceRange(const char* what, const char* side, const void* ptr,
                                         size_t bytes) const {
  if (OwnsAndRemember(ptr, bytes)) return absl::OkStatus();
  const std::string name = device().ToString();
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": ", what, " copy ", side, " ", Range(ptr, bytes), " is not memory of ", name,
      " (a host pointer, memory of another device, or a range past the end of an allocation)"));
}

absl::Status SimDevice::CheckHostRange(const char* what, const void* ptr, size_t bytes) const {
  if (ptr == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(device().ToString(), ": ", what, " copy of ",
                                                   bytes, " bytes with a null host pointer"));
  }
  if (Overlaps(reinterpret_cast<uintptr_t>(ptr), bytes)) {
    const std::string name = device().ToString();
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", what, " copy: the host side ", Range(ptr, bytes), " is memory of ", name,
        ", not host memory; use a device-to-device copy"));
  }
  return absl::OkStatus();
}

absl::Status SimDevice::ConsumeCopy(const char* what) {
  if (copy_failure_after_ == 0) {
    copy_failure_after_ = -1;
    return absl::InternalError(
        absl::StrCat(device().ToString(), ": ", what, " copy failed (injected fault)"));
  }
  if (copy_failure_after_ > 0) --copy_failure_after_;
  return absl::OkStatus();
}

absl::Status SimDevice::CopyHostToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (FastPathApplies(dst, nullptr, src, bytes)) {
    std::memcpy(dst, src, bytes);
    ++counters_.h2d_copies;
    counters_.h2d_bytes += bytes;
    return absl::OkStatus();
  }
  FERRY_RETURN_IF_ERROR(CheckDeviceRange("h2d", "destination", dst, bytes));
  FERRY_RETURN_IF_ERROR(CheckHostRange("h2d", src, bytes));
  FERRY_RETURN_IF_ERROR(ConsumeCopy("h2d"));
  FERRY_RETURN_IF_ERROR(OpenScope());
  ScopeCloser close(*this);
  std::memcpy(dst, src, bytes);
  ++counters_.h2d_copies;
  counters_.h2d_bytes += bytes;
  return absl::OkStatus();
}

absl::Status SimDevice::CopyDeviceToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (FastPathApplies(src, nullptr, dst, bytes)) {
    std::memcpy(dst, src, bytes);
    ++counters_.d2h_copies;
    counters_.d2h_bytes += bytes;
    return absl::OkStatus();
  }
  FERRY_RETURN_IF_ERROR(CheckDeviceRange("d2h", "source", src, bytes));
  FERRY_RETURN_IF_ERROR(CheckHostRange("d2h", dst, bytes));
  FERRY_RETURN_IF_ERROR(ConsumeCopy("d2h"));
  FERRY_RETURN_IF_ERROR(OpenScope());
  ScopeCloser close(*this);
  std::memcpy(dst, src, bytes);
  ++counters_.d2h_copies;
  counters_.d2h_bytes += bytes;
  return absl::OkStatus();
}

absl::Status SimDevice::CopyDeviceToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (FastPathApplies(dst, src, nullptr, bytes)) {
    std::memmove(dst, src, bytes);
    ++counters_.d2d_copies;
    counters_.d2d_bytes += bytes;
    return absl::OkStatus();
  }
  FERRY_RETURN_IF_ERROR(CheckDeviceRange("d2d", "destination", dst, bytes));
  FERRY_RETURN_IF_ERROR(CheckDeviceRange("d2d", "source", src, bytes));
  FERRY_RETURN_IF_ERROR(ConsumeCopy("d2d"));
  FERRY_RETURN_IF_ERROR(OpenScope());
  ScopeCloser close(*this);
  std::memmove(dst, src, bytes);
  ++counters_.d2d_copies;
  counters_.d2d_bytes += bytes;
  return absl::OkStatus();
}

absl::Status SimDevice::CopyHostStridedToDevice(void* dst, const void* src,
                                                const StridedLayout& layout) {
  FERRY_ASSIGN_OR_RETURN(size_t bytes, internal::DenseBytesOf(layout, device().ToString()));
  if (bytes == 0) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(CheckDeviceRange("strided h2d", "destination", dst, bytes));
  if (src == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        device().ToString(), ": strided h2d copy of ", bytes, " bytes with a null host pointer"));
  }
  FERRY_RETURN_IF_ERROR(ConsumeCopy("strided h2d"));
  FERRY_RETURN_IF_ERROR(OpenScope());
  ScopeCloser close(*this);
  internal::GatherStrided(dst, src, layout);
  ++counters_.h2d_copies;
  counters_.h2d_bytes += bytes;
  return absl::OkStatus();
}

absl::Status SimDevice::CopyFromPeer(void* dst, DeviceRuntime& peer, const void* src,
                                     size_t bytes) {
  if (&peer == this) return CopyDeviceToDevice(dst, src, bytes);
  if (peer.device().is_host()) return CopyHostToDevice(dst, src, bytes);
  if (bytes == 0) return absl::OkStatus();
  SimDevice* sim_peer = AsSimDevice(&peer);
  if (sim_peer != nullptr && !guard_ && !sim_peer->guard_ && copy_failure_after_ < 0 &&
      InLastHit(dst, bytes) && sim_peer->InLastHit(src, bytes)) {
    std::memcpy(dst, src, bytes);
    ++counters_.d2d_copies;
    counters_.d2d_bytes += bytes;
    return absl::OkStatus();
  }
  FERRY_RETURN_IF_ERROR(CheckDeviceRange("d2d", "destination", dst, bytes));
  if (sim_peer != nullptr && !sim_peer->OwnsAndRemember(src, bytes)) {
    const std::string peer_name = peer.device().ToString();
    return absl::InvalidArgumentError(absl::StrCat(
        device().ToString(), ": d2d copy from ", peer_name, ": source ", Range(src, bytes),
        " is not memory of ", peer_name));
  }
  FERRY_RETURN_IF_ERROR(ConsumeCopy("d2d"));
  FERRY_RETURN_IF_ERROR(OpenScope());
  ScopeCloser close(*this);
  if (sim_peer != nullptr) {
    FERRY_RETURN_IF_ERROR(sim_peer->OpenScope());
    ScopeCloser close_peer(*sim_peer);
    std::memcpy(dst, src, bytes);
  } else {
    // A device whose memory the host cannot read (CUDA): it copies into ours, which is host
    // memory while our scope is open.
    FERRY_RETURN_IF_ERROR(peer.CopyDeviceToHost(dst, src, bytes));
    FERRY_RETURN_IF_ERROR(peer.Synchronize());
  }
  ++counters_.d2d_copies;
  counters_.d2d_bytes += bytes;
  return absl::OkStatus();
}

absl::Status SimDevice::Zero(void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (!OwnsAndRemember(dst, bytes)) {
    const std::string name = device().ToString();
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": zeroing ", Range(dst, bytes), ": the range is not memory of ", name));
  }
  FERRY_RETURN_IF_ERROR(OpenScope());
  ScopeCloser close(*this);
  std::memset(dst, 0, bytes);
  return absl::OkStatus();
}

void SimDevice::ResetCounters() {
  const uint64_t allocated = counters_.allocated_bytes;
  counters_ = DeviceCounters{};
  counters_.allocated_bytes = allocated;
}

// The sim plug-in: sim:0 .. sim:(sim.count - 1), guarded as the options say. Host code
// runs over sim memory inside a scope, so the host's kernels serve sim delegates.
DeviceTypeInfo SimDeviceType() {
  DeviceTypeInfo info;
  info.name = "sim";
  info.host_kernels_run_on_memory = true;
  info.discover = [](DeviceRegistry& registry, const DeviceRegistryOptions& options) {
    SimDeviceOptions sim_options;
    sim_options.guard = options.sim.guard;
    sim_options.capacity_bytes = options.sim.bytes;
    for (int i = 0; i < options.sim.count; ++i) {
      registry.Add(std::make_unique<SimDevice>(i, sim_options)).IgnoreError();
    }
    if (options.sim.guard && options.sim.count > 0) InstallSimGuardFaultHandler();
  };
  return info;
}

}  // namespace ferry
