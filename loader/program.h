// A loaded, verified Ferry program.
//
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Program> program, Program::Load("model.ferry"));
//   FERRY_ASSIGN_OR_RETURN(const MethodDef* forward, program->method("forward"));
//
// Load reads or maps the file (constants are used in place, zero-copy) and runs the FlatBuffers
// verifier's checks (loader/ferry/internal/table_verifier.h), then the semantic checks: indices in
// range, sizes and byte counts that do not overflow, valid dtypes, ranks and dim orders, constant
// and state data inside the program and of the right size, every argument defined before the node
// that reads it, every intermediate produced exactly once. Nothing is dereferenced before the
// verifier has passed. A failure is InvalidArgument naming the element, e.g.
//   method "forward", node 12 (add): argument 1 is value 40, but the method has 38 values
// Files ending in ".json" are parsed as the JSON form with the built-in schema.
//
// ExecuTorch programs (.pte, file identifier "ET12" at bytes 4..7) load through the same calls:
// loader/executorch/pte_reader.h reads and verifies them and loader/executorch/importer.h maps
// their methods onto MethodDefs, so method_names() and method() work alike for both formats. Their
// constants are copied to 64-byte aligned memory owned by the Program (ExecuTorch aligns them to 16
// bytes). Each method is imported on its own: one the import does not support (an op, a dtype, a
// value) is listed by method_names() like the others, and method() returns why for it
// (Unimplemented naming the method and the instruction), while the program's other methods load.
// An ExecuTorch program may keep tensors outside itself, in a data file (.ptd,
// file identifier "FT01", loader/executorch/ptd_reader.h), found by fully qualified name: give it
// in ProgramLoadOptions::data_path (or as the second span of FromBytes). The data file is read and
// verified at load, the tensors it provides are copied like the program's other constants, and
// it is not needed once the call has returned. A program with external tensors loaded without a
// data file is FailedPrecondition naming the tensor; a tensor the data file lacks is NotFound
// naming it; a dtype, shape or size that differs is InvalidArgument. The exporter's memory plan
// (ExecuTorch's arenas and offsets) is checked and kept in MethodDef::exporter_arenas.
//
//   ProgramLoadOptions options;
//   options.data_path = "linear.ptd";
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Program> program, Program::Load("linear.pte", options));
//
// A bundled program (.bpte, file identifier "BP08", loader/executorch/bpte_reader.h) is an
// ExecuTorch program with test cases: it loads like the .pte inside it, read in place, and
// test_suites() lists its cases (runtime/verify.h runs them). An error in the program inside
// starts "the program inside the bundle: ".
//
// Format invariants (loader/ferry/schema/program.fbs): constant and state data start at multiples
// of 64 bytes from the start of the program, and the program's size is a multiple of 64, so that
// data can be used and copied in place and a truncated file is detected. Ferry's writer
// (ProgramBuilder) guarantees both; the JSON form does not need them, since FromJson re-packs what
// it parses. A binary written by stock `flatc -b` does not align its data (flatc's force_align
// stops at 32 bytes) and is refused with a message that says so: load its JSON form instead.
//
// Files: a program smaller than kProgramMapThresholdBytes is read into memory, and the file may
// change or go away once Load has returned. A larger one is mapped read-only (its constants are
// used in place and copied to devices in pieces, so they are never all resident at once); the
// file must then stay unchanged while the Program exists. Truncating or rewriting a mapped
// program's file makes the pages behind it vanish, and reading them (in LoadMethod, or in a host
// op that reads a constant) kills the process with SIGBUS: write a new file and rename it over
// the old one instead, which leaves the mapping intact.
//
// Ownership: a Program owns its bytes (the mapping or a copy); MethodDefs and their spans point
// into it and live as long as it. Loading never writes to the program's bytes.
// Thread safety: immutable after load; safe to share between threads.
#ifndef FERRY_LOADER_PROGRAM_H_
#define FERRY_LOADER_PROGRAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/loader/file_identifiers.h"
#include "ferry/loader/model/method_def.h"
#include "ferry/loader/model/named_data.h"
#include "ferry/loader/model/test_cases.h"

namespace ferry {


// Program files of at least this many bytes are mapped; smaller ones are read (see above).
inline constexpr size_t kProgramMapThresholdBytes = size_t{8} << 20;

struct ProgramLoadOptions {
  // An ExecuTorch program's data file (.ptd); empty for none. Giving one for a Ferry program, or
  // for a data file that is not a .ptd, is InvalidArgument.
  std::string data_path;
  // The most host memory reading may take for the structures it builds per value and per node
  // (a few hundred bytes each; the file's own bytes are not counted). Reading also checks them,
  // from 1 MiB, against what the host has available, and refuses a program over either with
  // ResourceExhausted before building any of them: a small file can list millions of values or
  // nodes when its lists share tables. SIZE_MAX: no limit of the caller's.
  size_t memory_limit_bytes = SIZE_MAX;
  // Whether to run VerifyMethodDef (loader/model/checks.h) over every method the reader built,
  // refusing the program with Internal when one breaks the model's invariants (a bug in Ferry's
  // reader, never the file's fault: the readers check files before they build). It costs one more
  // pass over each method. Unset: the environment's FERRY_VERIFY_METHODS decides ("0" off,
  // anything else on; the test suite sets it to 1), and without it, on in debug builds of Ferry
  // (NDEBUG undefined) and off otherwise. Load and FromBytes without options use that default.
  std::optional<bool> verify_methods;
};

class Program {
 public:
  // Maps and verifies the file at `path` (binary, or JSON when the name ends in ".json").
  // NotFound / PermissionDenied for an unreadable file, InvalidArgument for a bad program.
  static absl::StatusOr<std::unique_ptr<Program>> Load(const std::string& path);
  // The same, with the options above. Errors reading the data file name it.
  static absl::StatusOr<std::unique_ptr<Program>> Load(const std::string& path,
                                                       const ProgramLoadOptions& options);
  // Copies and verifies a binary program.
  static absl::StatusOr<std::unique_ptr<Program>> FromBytes(absl::Span<const uint8_t> bytes);
  // The same for an ExecuTorch program with the bytes of its data file (.ptd); `data` is read
  // during the call only.
  static absl::StatusOr<std::unique_ptr<Program>> FromBytes(absl::Span<const uint8_t> bytes,
                                                            absl::Span<const uint8_t> data);
  // Parses the JSON form (flatc's JSON for Ferry's schema) and verifies the result.
  static absl::StatusOr<std::unique_ptr<Program>> FromJson(absl::string_view json);
  // Converts a binary program to its JSON form.
  static absl::StatusOr<std::string> ToJson(absl::Span<const uint8_t> bytes);

  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Every method, in the program's order, including those the import refused.
  std::vector<std::string> method_names() const;
  // The method; for one the import refused, why (its status names the method and the
  // instruction); NotFound naming the method and listing the ones present.
  absl::StatusOr<const MethodDef*> method(absl::string_view name) const;
  // The program's bytes (the mapped file or the owned copy; for a bundle, the .pte inside it).
  absl::Span<const uint8_t> bytes() const;
  // The test cases a bundled program (.bpte) carries, by method, in the file's order (run them
  // with runtime/verify.h); empty for other programs. They live as long as the Program.
  absl::Span<const TestSuite> test_suites() const;
  // The data an ExecuTorch program keeps by name for its delegates: the program's named data and
  // its data file's entries that are not tensors (copied, so the data file is not needed after
  // the load); empty for Ferry's own programs. Every method's MethodDef::named_data points here
  // when it is not empty.
  const NamedData& named_data() const { return named_data_; }

 private:
  struct Storage;
  // `order`: every method's name in the program's order (empty: `methods`' order, none refused).
  Program(std::unique_ptr<Storage> storage, std::vector<MethodDef> methods,
          std::vector<std::pair<std::string, absl::Status>> refused = {},
          std::vector<std::string> order = {});
  // Verifies the bytes in `storage` and builds the methods over them.
  // `data`, when not null, is the data file's bytes (8-byte aligned).
  // `memory_limit` is ProgramLoadOptions::memory_limit_bytes.
  // With `verify`, every method built is checked against the model (VerifyReaderOutput).
  static absl::StatusOr<std::unique_ptr<Program>> Create(std::unique_ptr<Storage> storage,
                                                         const absl::Span<const uint8_t>* data,
                                                         size_t memory_limit, bool verify);
  // The same for an ExecuTorch program (file identifier "ET12").
  static absl::StatusOr<std::unique_ptr<Program>> CreateFromExecuTorch(
      std::unique_ptr<Storage> storage, const absl::Span<const uint8_t>* data, size_t memory_limit,
      bool verify);
  // The same for an ExecuTorch bundled program (file identifier "BP08"): the program inside,
  // and the test cases.
  static absl::StatusOr<std::unique_ptr<Program>> CreateFromBundle(
      std::unique_ptr<Storage> storage, const absl::Span<const uint8_t>* data, size_t memory_limit,
      bool verify);
  std::unique_ptr<Storage> storage_;
  std::vector<MethodDef> methods_;
  std::vector<std::pair<std::string, absl::Status>> refused_;  // name, why
  std::vector<std::string> order_;
  std::vector<TestSuite> test_suites_;  // a bundle's
  NamedData named_data_;
  // Method name -> index of its first method: loading each of M methods costs O(M), not O(M^2).
  absl::flat_hash_map<absl::string_view, size_t> method_index_;
  absl::flat_hash_map<absl::string_view, size_t> refused_index_;  // name -> index in refused_
};

}  // namespace ferry

#endif  // FERRY_LOADER_PROGRAM_H_
