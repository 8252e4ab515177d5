// Verification of Ferry program bytes, and MethodDefs built from verified bytes.
//
//   FERRY_ASSIGN_OR_RETURN(std::vector<MethodDef> methods, ReadProgram(bytes, {}, SIZE_MAX));
//
// VerifyProgram runs, in order, the size and file identifier checks, the structural check (the
// FlatBuffers verifier's verdict, reached by Ferry's verifier for its schema,
// loader/ferry/internal/table_verifier.h) and the semantic pass (see loader/program.h for the
// list); nothing in `bytes` is read through a FlatBuffers accessor before the structural check has
// passed. ReadProgram runs the same checks and builds
// the MethodDefs in the semantic pass itself: each value and node is built as soon as its checks
// have passed, so the program's tables are walked once, not once to check and once to build.
//
// Errors: InvalidArgument naming the element (method, value, node, argument). Nothing is
// allocated beyond small temporaries; `bytes` is never written.
// Thread safety: pure functions.
#ifndef FERRY_LOADER_FERRY_INTERNAL_READER_H_
#define FERRY_LOADER_FERRY_INTERNAL_READER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ferry/loader/internal/read_memory.h"
#include "ferry/loader/model/method_def.h"
#include "loader/ferry/schema/program_generated.h"

namespace ferry::internal {

// Constant and state data (and payloads written by Ferry) start at multiples of this many bytes
// from the start of the program, and a program's size is a multiple of it.
inline constexpr size_t kSegmentAlignment = 64;
// The format version this runtime reads.
inline constexpr uint32_t kProgramFormatVersion = 1;

struct VerifyOptions {
  // Require 64-byte aligned data segments and a size that is a multiple of 64. Off only for bytes
  // that are about to be re-packed by SerializeProgram (the JSON parser does not align).
  bool check_alignment = true;
};

// `bytes` must be at least 8-byte aligned in memory (FlatBuffers reads scalars in place).
absl::StatusOr<const fbs::Program*> VerifyProgram(absl::Span<const uint8_t> bytes,
                                                  const VerifyOptions& options);

// What the MethodDefs of a program take for its values and nodes; the FlatBuffers verifier must
// have accepted it.
ReadMemory ReadMemoryOf(const fbs::Program& program);

// Verifies `bytes` as VerifyProgram does and returns its methods; spans point into `bytes`.
// Before building anything, the MethodDefs' memory (ReadMemoryOf) is checked against
// `memory_limit` and the host's available memory (CheckReadMemory).
absl::StatusOr<std::vector<MethodDef>> ReadProgram(absl::Span<const uint8_t> bytes,
                                                   const VerifyOptions& options,
                                                   size_t memory_limit);

}  // namespace ferry::internal

#endif  // FERRY_LOADER_FERRY_INTERNAL_READER_H_
