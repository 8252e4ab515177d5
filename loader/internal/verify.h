// Verification of Ferry program bytes, and MethodDefs built from verified bytes.
//
//   FERRY_ASSIGN_OR_RETURN(const fbs::Program* root, VerifyProgram(bytes, {}));
//   std::vector<MethodDef> methods = BuildMethodDefs(*root);
//
// VerifyProgram runs, in order, the size and file identifier checks, the FlatBuffers verifier and
// the semantic pass (see loader/program.h for the list); nothing in `bytes` is read through a
// FlatBuffers accessor before the verifier has passed. On success every index, size and data
// reference in the program is known to be valid, so BuildMethodDefs cannot fail.
//
// Errors: InvalidArgument naming the element (method, value, node, argument). Nothing is
// allocated beyond small temporaries; `bytes` is never written.
// Thread safety: pure functions.
#ifndef FERRY_LOADER_INTERNAL_VERIFY_H_
#define FERRY_LOADER_INTERNAL_VERIFY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ferry/loader/internal/read_memory.h"
#include "ferry/loader/method_graph.h"
#include "loader/schema/program_generated.h"

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

// What BuildMethodDefs takes for the values and nodes of a program that VerifyProgram accepted:
// to be checked (CheckReadMemory) before building them.
ReadMemory ReadMemoryOf(const fbs::Program& program);

// The methods of a program that VerifyProgram accepted; spans point into its bytes.
std::vector<MethodDef> BuildMethodDefs(const fbs::Program& program);

}  // namespace ferry::internal

#endif  // FERRY_LOADER_INTERNAL_VERIFY_H_
