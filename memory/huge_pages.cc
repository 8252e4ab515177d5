#include "ferry/memory/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace ferry {
namespace {

size_t RoundUpToHugePages(size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// Whether the kernel gives transparent huge pages to mappings that ask for them: "always" or
// "madvise" in the setting's brackets. Read once per process.
bool KernelGivesHugePages() {
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
  if (f == nullptr) return false;
  char line[128] = {};
  const bool read = std::fgets(line, sizeof(line), f) != nullptr;
  std::fclose(f);
  return read &&
         (std::strstr(line, "[always]") != nullptr || std::strstr(line, "[madvise]") != nullptr);
}

bool LargeTablesMapped() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return false;  // the sanitizers check heap memory only
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
  return false;
#else
  static const bool mapped = KernelGivesHugePages();
  return mapped;
#endif
#else
  static const bool mapped = KernelGivesHugePages();
  return mapped;
#endif
}

}  // namespace

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

void* MapLargeTable(size_t bytes) {
  void* p = MapHugePageMemory(RoundUpToHugePages(bytes), PROT_READ | PROT_WRITE);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void UnmapLargeTable(void* p, size_t bytes) { munmap(p, RoundUpToHugePages(bytes)); }

}  // namespace internal
}  // namespace ferry
