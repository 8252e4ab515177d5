// Writing MethodDefs as Ferry program bytes: the one writer behind ProgramBuilder::Build and the
// re-packing of the JSON form.
//
//   FERRY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, SerializeProgram({&forward, &prefill}));
//
// Every constant's and state's data becomes its own data segment, 64 bytes aligned from the start
// of the buffer; payloads are aligned the same way (so a graph payload's own segments stay aligned
// in place), and the buffer's size is padded to a multiple of 64. The writer does not verify its
// input: callers that need a valid program run VerifyProgram on the result.
//
// Errors: InvalidArgument when the program would exceed the format's 2 GiB limit.
// Thread safety: pure function.
#ifndef FERRY_LOADER_FERRY_INTERNAL_WRITER_H_
#define FERRY_LOADER_FERRY_INTERNAL_WRITER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ferry/loader/model/method_def.h"

namespace ferry::internal {

absl::StatusOr<std::vector<uint8_t>> SerializeProgram(absl::Span<const MethodDef* const> methods);

// The text of loader/ferry/schema/program.fbs, embedded at build time.
extern const char kProgramSchemaText[];

}  // namespace ferry::internal

#endif  // FERRY_LOADER_FERRY_INTERNAL_WRITER_H_
