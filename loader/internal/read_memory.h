// The host memory reading a program takes for the structures it builds per value and per node,
// checked before any of them is built.
//
// A table in a FlatBuffer takes a few bytes, and a list may refer to one table any number of
// times: a file of a few megabytes can list millions of values or nodes, each of which reading
// turns into a structure of a few hundred bytes (ValueDef, NodeDef, and the ExecuTorch reader's
// own). Both program readers count them first and refuse, with ResourceExhausted, a program whose
// structures would not fit in the host's available memory or in the caller's limit
// (ProgramLoadOptions::memory_limit_bytes). Lists and names are bounded separately, by the file's
// size (CopyBudget in untrusted_bytes.h).
#ifndef FERRY_LOADER_INTERNAL_READ_MEMORY_H_
#define FERRY_LOADER_INTERNAL_READ_MEMORY_H_

#include <cstddef>

#include "absl/status/status.h"

namespace ferry::internal {

struct ReadMemory {
  size_t values = 0;
  size_t nodes = 0;  // nodes of a Ferry program, instructions of an ExecuTorch one
  size_t bytes = 0;  // what the structures for them take, saturating at SIZE_MAX

  // Counts `values` of `value_bytes` each and `nodes` of `node_bytes` each.
  void Add(size_t values, size_t value_bytes, size_t nodes, size_t node_bytes);
};

// OK when `need.bytes` fits in `limit` (SIZE_MAX: none) and in the host's available memory;
// otherwise ResourceExhausted naming the counts, the bytes and what they were over.
absl::Status CheckReadMemory(const ReadMemory& need, size_t limit);

}  // namespace ferry::internal

#endif  // FERRY_LOADER_INTERNAL_READ_MEMORY_H_
