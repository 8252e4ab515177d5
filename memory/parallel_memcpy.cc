#include "ferry/memory/parallel_memcpy.h"

#include <algorithm>
#include <cstring>
#include <system_error>

namespace ferry {
namespace {

// Iterations a waiting thread spins before it sleeps: tens of microseconds, longer than the gap
// between two chunks of one staged copy.
constexpr int kSpins = 2048;

inline void Relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

// Parts start at multiples of this, so no two threads write one page.
constexpr size_t kPartAlignment = 4096;

}  // namespace

ParallelMemcpy::ParallelMemcpy(int threads) {
  const int n = std::clamp(threads, 1, kMaxThreads);
  helpers_.reserve(static_cast<size_t>(n - 1));
  for (int i = 1; i < n; ++i) {
    try {
      helpers_.emplace_back([this, i] { Help(i); });
    } catch (const std::system_error&) {
      break;  // the system refuses more threads: copy with the ones started
    }
  }
}

ParallelMemcpy::~ParallelMemcpy() {
  if (helpers_.empty()) return;
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

int ParallelMemcpy::DefaultThreads() {
  const unsigned hardware = std::thread::hardware_concurrency();
  return std::clamp(static_cast<int>(hardware / 2), 1, 4);
}

int ParallelMemcpy::PartsFor(size_t bytes) const {
  if (helpers_.empty() || bytes < 2 * kMinPartBytes) return 1;
  return static_cast<int>(std::min<size_t>(static_cast<size_t>(threads()), bytes / kMinPartBytes));
}

void ParallelMemcpy::CopyPart(int part, int parts) {
  const size_t per =
      (bytes_ / static_cast<size_t>(parts) + kPartAlignment - 1) & ~(kPartAlignment - 1);
  const size_t begin = std::min(bytes_, static_cast<size_t>(part) * per);
  const size_t end = part == parts - 1 ? bytes_ : std::min(bytes_, begin + per);
  if (end > begin) std::memcpy(dst_ + begin, src_ + begin, end - begin);
}

void ParallelMemcpy::Copy(void* dst, const void* src, size_t bytes) {
  const int parts = PartsFor(bytes);
  if (parts == 1) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  dst_ = static_cast<char*>(dst);
  src_ = static_cast<const char*>(src);
  bytes_ = bytes;
  parts_ = parts;
  // Every helper acknowledges every job, the ones without a part too: the job's fields are not
  // written again until all of them are done with it.
  remaining_.store(static_cast<int>(helpers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  CopyPart(0, parts);
  int spins = 0;
  for (int left = remaining_.load(std::memory_order_acquire); left != 0;
       left = remaining_.load(std::memory_order_acquire)) {
    if (++spins < kSpins) {
      Relax();
    } else {
      remaining_.wait(left, std::memory_order_acquire);
    }
  }
}

void ParallelMemcpy::Help(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    uint64_t now = generation_.load(std::memory_order_acquire);
    while (now == seen) {
      if (++spins < kSpins) {
        Relax();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load(std::memory_order_relaxed)) return;
    if (index < parts_) CopyPart(index, parts_);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_one();
  }
}

}  // namespace ferry
