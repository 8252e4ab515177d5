// A program file mapped read-only, and the page hints that keep what it costs in host memory
// bounded while loading copies its data to devices.
//
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ProgramMapping> m, ProgramMapping::Map(fd, size));
//   m->WillRead(src, n);      // map [src, src + n) in one call instead of a fault per page
//   ... copy [src, src + n) to a device ...
//   m->DoneReading(src, n);   // drop those pages from the process; the file keeps them
//
// Hints never change what the memory reads and never fail: a dropped page is read back from the
// file when touched again. Only whole pages inside the given range are affected.
//
// Ownership: unmaps on destruction. Thread safety: immutable; the hints may be given from any
// thread.
#ifndef FERRY_LOADER_PROGRAM_MAPPING_H_
#define FERRY_LOADER_PROGRAM_MAPPING_H_

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ferry {

class ProgramMapping {
 public:
  // Maps the first `size` (> 0) bytes of the open file `fd` read-only; nullptr when the file
  // cannot be mapped (the caller reads it instead).
  static std::unique_ptr<ProgramMapping> Map(int fd, size_t size);
  ~ProgramMapping();
  ProgramMapping(const ProgramMapping&) = delete;
  ProgramMapping& operator=(const ProgramMapping&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  // Loading is about to read [data, data + bytes) once.
  void WillRead(const void* data, size_t bytes) const;
  // Loading has read [data, data + bytes) and nothing reads it on the host per call.
  void DoneReading(const void* data, size_t bytes) const;

 private:
  ProgramMapping(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  size_t size_;
};

}  // namespace ferry

#endif  // FERRY_LOADER_PROGRAM_MAPPING_H_
