// Marking memory unaddressable for AddressSanitizer (its manual poisoning), so that reads and
// writes into it are reported like heap overflows. Without AddressSanitizer both calls do nothing
// and kAddressSanitizer is false.
//
//   PoisonMemory(arena, arena_bytes);               // the whole arena, gaps and slack included
//   UnpoisonMemory(arena + offset, value_bytes);    // exactly what a kernel may touch
//
// ASan tracks memory in 8-byte granules: a range that ends inside a granule leaves its tail bytes
// as they were when poisoning, and marks only the granule's leading bytes addressable when
// unpoisoning (so a range that starts 8-byte aligned is exact at both ends). Unpoisoning never
// makes an addressable byte unaddressable.
//
// Memory must be unpoisoned before it is given back to an allocator that may hand it out again
// without going through ASan (mmap'd regions, pools).
// Thread safety: any thread, for memory no other thread is accessing.
#ifndef FERRY_BASE_SANITIZERS_H_
#define FERRY_BASE_SANITIZERS_H_

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define FERRY_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FERRY_ADDRESS_SANITIZER 1
#endif
#endif

#ifdef FERRY_ADDRESS_SANITIZER
#include <sanitizer/asan_interface.h>
#endif

namespace ferry {

#ifdef FERRY_ADDRESS_SANITIZER
inline constexpr bool kAddressSanitizer = true;
inline void PoisonMemory(const void* data, size_t bytes) {
  if (data != nullptr && bytes > 0) __asan_poison_memory_region(data, bytes);
}
inline void UnpoisonMemory(const void* data, size_t bytes) {
  if (data != nullptr && bytes > 0) __asan_unpoison_memory_region(data, bytes);
}
#else
inline constexpr bool kAddressSanitizer = false;
inline void PoisonMemory(const void*, size_t) {}
inline void UnpoisonMemory(const void*, size_t) {}
#endif

}  // namespace ferry

#endif  // FERRY_BASE_SANITIZERS_H_
