// A verified reader for ExecuTorch's bundled programs (.bpte files: file identifier "BP08").
//
//   FERRY_ASSIGN_OR_RETURN(EtBundle bundle, ReadExecuTorchBundle(bytes));
//   ... ReadExecuTorchProgram(bundle.program) ...     // the .pte inside, in place
//   for (const TestSuite& suite : bundle.suites) ...  // loader/model/test_cases.h
//
// A bundled program (loader/executorch/schema/bundled_program.fbs) is one FlatBuffer holding a
// .pte file's bytes and test cases per method: inputs, and the outputs the method is expected to
// return, each a tensor, an int, a bool or a double. Program::Load reads it through this reader
// and loads the program inside like any .pte; runtime/verify.h runs the cases.
//
// Every byte is untrusted. The reader checks the file identifier, then the FlatBuffers verifier
// (bounded depth and table count), then every value: a member of the union present, a tensor's
// scalar type one Ferry has, rank at most 16, non-negative sizes whose byte size fits in int64
// and equals its data's length, a dim order that is empty or a permutation of the rank. The
// program must be there, non-empty and at a multiple of 16 bytes from the start of the bundle
// (ExecuTorch's writer puts it at a multiple of 32), so that it is read in place. Lists copied
// out (values, sizes, dim orders) are bounded by the file's size even when the file shares
// tables between them. A failure is InvalidArgument naming the element, e.g.
//   bundled program: suite 0 (method "forward"), case 1, expected output 0: a float32 tensor of
//   sizes [2, 3] takes 24 bytes, but its data has 20
//
// Ownership: `program` and the tensors' data point into `bytes`; an EtBundle must not outlive
// them. `bytes` is never written.
// Thread safety: a pure function.
#ifndef FERRY_LOADER_EXECUTORCH_BPTE_READER_H_
#define FERRY_LOADER_EXECUTORCH_BPTE_READER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ferry/loader/file_identifiers.h"
#include "ferry/loader/model/test_cases.h"

namespace ferry {

struct EtBundle {
  uint32_t version = 0;
  absl::Span<const uint8_t> program;  // the .pte file's bytes, inside the bundle
  uint64_t program_offset = 0;        // where they start in the bundle
  std::vector<TestSuite> suites;
};

absl::StatusOr<EtBundle> ReadExecuTorchBundle(absl::Span<const uint8_t> bytes);

}  // namespace ferry

#endif  // FERRY_LOADER_EXECUTORCH_BPTE_READER_H_
