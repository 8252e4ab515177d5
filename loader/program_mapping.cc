#include "ferry/loader/program_mapping.h"

#include <sys/mman.h>
#include <unistd.h>

namespace ferry {
namespace {

// madvise over the whole pages inside [data, data + bytes); a hint, never an error.
void AdvisePages(const void* data, size_t bytes, int advice) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(page - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

}  // namespace

std::unique_ptr<ProgramMapping> ProgramMapping::Map(int fd, size_t size) {
  if (size == 0) return nullptr;
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  return std::unique_ptr<ProgramMapping>(new ProgramMapping(static_cast<const uint8_t*>(p), size));
}

ProgramMapping::~ProgramMapping() {
  ::munmap(const_cast<uint8_t*>(data_), size_);
}

void ProgramMapping::WillRead(const void* data, size_t bytes) const {
#ifdef MADV_POPULATE_READ
  AdvisePages(data, bytes, MADV_POPULATE_READ);
#else
  AdvisePages(data, bytes, MADV_WILLNEED);
#endif
}

void ProgramMapping::DoneReading(const void* data, size_t bytes) const {
  AdvisePages(data, bytes, MADV_DONTNEED);
}

}  // namespace ferry
