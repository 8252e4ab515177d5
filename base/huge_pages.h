// Memory on transparent huge pages, for the large tables of loading and for device arenas.
//
// Touching fresh memory costs one page fault per 4 KiB page; on a virtual machine a fault can cost
// several microseconds, so a load that builds tens of megabytes of tables spends most of its time
// in faults, and a second load in the same process faults again when the allocator has given the
// first one's memory back to the system. Mappings that ask for transparent huge pages fault once
// per 2 MiB instead.
//
//   LargeTable<TensorRef> refs;  // std::vector<TensorRef, LargeTableAllocator<TensorRef>>
//
// LargeTableAllocator hands out tables of at least kLargeTableBytes as their own mappings, and
// smaller ones from the heap, as std::allocator does. Tables of at least kHugeTableBytes are
// mapped on huge pages (rounded up to whole 2 MiB pages, so at most 2x the bytes of the smallest
// of them); those in between on ordinary pages. It falls back to the heap for every size when the
// kernel's transparent huge pages are off ("never" in /sys/kernel/mm/transparent_hugepage/enabled)
// and under AddressSanitizer and ThreadSanitizer, whose checks cover only heap memory. Out of
// memory is std::bad_alloc, as for std::allocator.
//
// Freed tables are kept, up to kLargeTableCacheBytes in all, and handed to the next table of the
// same size: loading the same method again reuses the previous load's pages instead of faulting
// in fresh ones (which the kernel zeroes, at a few GB/s). The heap gives no such promise: whether
// glibc keeps a freed block of a few hundred KiB or returns it to the system depends on the
// process's history, so the same load may fault on every repetition in one process and never in
// another. ReleaseCachedLargeTables gives the kept tables back to the system.
#ifndef FERRY_BASE_HUGE_PAGES_H_
#define FERRY_BASE_HUGE_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace ferry {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// Tables of at least this many bytes are mappings of their own, kept for reuse when freed.
inline constexpr size_t kLargeTableBytes = size_t{128} << 10;
// Tables of at least this many bytes are mapped on huge pages.
inline constexpr size_t kHugeTableBytes = size_t{1} << 20;
// At most this many bytes of freed tables are kept for reuse.
inline constexpr size_t kLargeTableCacheBytes = size_t{256} << 20;

// An anonymous mapping of `bytes` (a multiple of the page size) with `prot` (PROT_* flags), or
// nullptr (errno set). Mappings of at least kHugePageBytes start on a huge-page boundary and ask
// for huge pages (a hint the kernel may ignore). Release with munmap(p, bytes).
void* MapHugePageMemory(size_t bytes, int prot);

// Unmaps the freed tables kept for reuse; returns their bytes. Thread-safe.
size_t ReleaseCachedLargeTables();

namespace internal {
// Whether tables of `bytes` are mapped (true) or taken from the heap.
bool MapsLargeTable(size_t bytes);
// The bytes of the mapping that holds a table of `bytes`: whole huge pages from kHugeTableBytes,
// whole 4 KiB pages below.
size_t MappedTableBytes(size_t bytes);
// A mapping for a table of `bytes` when MapsLargeTable(bytes); throws std::bad_alloc.
void* MapLargeTable(size_t bytes);
void UnmapLargeTable(void* p, size_t bytes);
// The bytes of freed tables kept for reuse now.
size_t CachedLargeTableBytes();
}  // namespace internal

template <typename T>
class LargeTableAllocator {
 public:
  using value_type = T;

  LargeTableAllocator() = default;
  template <typename U>
  LargeTableAllocator(const LargeTableAllocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (internal::MapsLargeTable(bytes)) return static_cast<T*>(internal::MapLargeTable(bytes));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (internal::MapsLargeTable(bytes)) {
      internal::UnmapLargeTable(p, bytes);
    } else {
      std::allocator<T>().deallocate(p, n);
    }
  }

  template <typename U>
  bool operator==(const LargeTableAllocator<U>&) const noexcept {
    return true;
  }
};

// A vector whose storage is a LargeTableAllocator's.
template <typename T>
using LargeTable = std::vector<T, LargeTableAllocator<T>>;

}  // namespace ferry

#endif  // FERRY_BASE_HUGE_PAGES_H_
