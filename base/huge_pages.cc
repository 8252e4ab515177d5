#include "ferry/base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace ferry {
namespace {

constexpr size_t kSmallPageBytes = 4096;

// Whether the kernel gives transparent huge pages to mappings that ask for them: "always" or
// "madvise" in the setting's brackets. Read once per process (not at all in sanitizer builds).
[[maybe_unused]] bool KernelGivesHugePages() {
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
  if (f == nullptr) return false;
  char line[128] = {};
  const bool read = std::fgets(line, sizeof(line), f) != nullptr;
  std::fclose(f);
  return read &&
         (std::strstr(line, "[always]") != nullptr || std::strstr(line, "[madvise]") != nullptr);
}

// The sanitizers check heap memory only: their builds keep every table there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FERRY_HEAP_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define FERRY_HEAP_CHECKED 1
#endif
#endif

bool LargeTablesMapped() {
#ifdef FERRY_HEAP_CHECKED
  return false;
#else
  static const bool mapped = KernelGivesHugePages();
  return mapped;
#endif
}

// Freed table mappings kept for the next table of the same size (a reload of the same method asks
// for the same sizes), so that it neither faults nor has the kernel zero fresh pages again. At
// most kLargeTableCacheBytes are kept; the oldest go back to the system first.
class TableCache {
 public:
  static TableCache& Get() {
    static TableCache* cache = new TableCache;  // never destroyed: tables may outlive statics
    return *cache;
  }

  void* Take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = kept_.size(); i-- > 0;) {
      if (kept_[i].second != bytes) continue;
      void* p = kept_[i].first;
      kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(i));
      kept_bytes_ -= bytes;
      return p;
    }
    return nullptr;
  }

  void Put(void* p, size_t bytes) {
    std::vector<std::pair<void*, size_t>> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (bytes <= kLargeTableCacheBytes) {
        size_t first_kept = 0;
        while (kept_bytes_ + bytes > kLargeTableCacheBytes) {
          kept_bytes_ -= kept_[first_kept].second;
          dropped.push_back(kept_[first_kept++]);
        }
        kept_.erase(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(first_kept));
        kept_.emplace_back(p, bytes);
        kept_bytes_ += bytes;
      } else {
        dropped.emplace_back(p, bytes);
      }
    }
    for (const auto& [q, n] : dropped) munmap(q, n);
  }

  size_t Release() {
    std::vector<std::pair<void*, size_t>> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dropped.swap(kept_);
      kept_bytes_ = 0;
    }
    size_t released = 0;
    for (const auto& [q, n] : dropped) {
      munmap(q, n);
      released += n;
    }
    return released;
  }

  size_t kept_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_bytes_;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> kept_;  // (mapping, bytes), oldest first
  size_t kept_bytes_ = 0;
};

}  // namespace

size_t ReleaseCachedLargeTables() { return TableCache::Get().Release(); }

void* MapHugePageMemory(size_t bytes, int prot) {
  if (bytes < kHugePageBytes || bytes > SIZE_MAX - kHugePageBytes) {
    void* p = mmap(nullptr, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  const size_t padded = bytes + kHugePageBytes;
  void* raw = mmap(nullptr, padded, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t tail = aligned + bytes;
  if (begin + padded > tail) munmap(reinterpret_cast<void*>(tail), begin + padded - tail);
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);  // a hint
#endif
  return reinterpret_cast<void*>(aligned);
}

namespace internal {

bool MapsLargeTable(size_t bytes) {
  return bytes >= kLargeTableBytes && bytes <= SIZE_MAX / 2 && LargeTablesMapped();
}

size_t MappedTableBytes(size_t bytes) {
  const size_t page = bytes >= kHugeTableBytes ? kHugePageBytes : kSmallPageBytes;
  return (bytes + page - 1) / page * page;
}

void* MapLargeTable(size_t bytes) {
  const size_t mapped = MappedTableBytes(bytes);
  if (void* kept = TableCache::Get().Take(mapped)) return kept;
  // Below kHugeTableBytes the mapping is smaller than a huge page: MapHugePageMemory maps it on
  // ordinary pages.
  void* p = MapHugePageMemory(mapped, PROT_READ | PROT_WRITE);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void UnmapLargeTable(void* p, size_t bytes) { TableCache::Get().Put(p, MappedTableBytes(bytes)); }

size_t CachedLargeTableBytes() { return TableCache::Get().kept_bytes(); }

}  // namespace internal
}  // namespace ferry
