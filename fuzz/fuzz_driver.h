// The one path every fuzz input takes: parse a program, load each of its methods, bind small
// host inputs and execute. Shared by the libFuzzer targets (fuzz/*_fuzzer.cc) and the regression
// test (tests/fuzz/), so an input replays in the test exactly as the fuzzer ran it.
//
//   static ferry::Runtime& runtime = ferry::fuzz::FuzzRuntime();
//   ferry::fuzz::DriveResult r = ferry::fuzz::DriveBytes(runtime, bytes);
//   for (const ferry::fuzz::MethodOutcome& m : r.methods) { m.load; m.execute; }
//
// Statuses are data here, not failures: a fuzz input is expected to be refused, and only a crash
// (or a sanitizer report) is a finding. The result records every status so that tests can make
// assertions about specific inputs.
//
// Each method loads under FuzzLoadOptions: at most kMaxDeviceBytes on each device and
// kMaxTableBytes of load tables, so a small program that asks for gigabytes is refused at load
// (ResourceExhausted) instead of taking the fuzzer's time and memory.
//
// Inputs are bound only when the plan expects them on the host and each is at most
// kMaxBoundInputBytes (kMaxTotalInputBytes together); otherwise the method is loaded but not
// executed (MethodOutcome::executed is false and skip_reason says why). Input memory is
// zero-filled, sized exactly as the plan asks, so a kernel that reads past it is caught by ASan.
//
// Thread safety: as Runtime::LoadMethod (one thread at a time per runtime).
#ifndef FERRY_FUZZ_FUZZ_DRIVER_H_
#define FERRY_FUZZ_FUZZ_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"

namespace ferry::fuzz {

// Inputs larger than this are not worth a fuzzer's time (programs that matter are far smaller).
inline constexpr size_t kMaxProgramBytes = size_t{1} << 20;
inline constexpr size_t kMaxBoundInputBytes = size_t{1} << 20;
inline constexpr size_t kMaxTotalInputBytes = size_t{4} << 20;
// Per device (host, sim:0 .. sim:3): arena and constants of one method.
inline constexpr size_t kMaxDeviceBytes = size_t{64} << 20;
inline constexpr size_t kMaxTableBytes = size_t{64} << 20;

struct MethodOutcome {
  std::string name;
  absl::Status load;
  bool executed = false;
  std::string skip_reason;  // why Execute was not called, when load succeeded
  // The first failing SetInput, or Execute's status; OK when not executed.
  absl::Status execute;
};

struct DriveResult {
  // Program::FromBytes / FromJson; `methods` is empty unless it is OK.
  absl::Status parse;
  // VerifyMethodDef (loader/model/checks.h) over every method of a parsed program. Unlike the
  // other statuses, a failure here is a finding: a reader built a method that breaks the model's
  // invariants. The fuzz targets stop on it; the regression test expects OK.
  absl::Status model;
  std::vector<MethodOutcome> methods;
};

// Four guarded sim devices, which cuda:0 .. cuda:3 map to, and no CUDA: the runtime the fuzzers
// use, created on first use and never destroyed. Four, as in the default runtime, so that inputs
// found against it (the shared repros use cuda:2) replay here.
RuntimeOptions FuzzRuntimeOptions();
const Runtime& FuzzRuntime();
// The limits above, for the host and every device of FuzzRuntimeOptions.
LoadOptions FuzzLoadOptions();

// Program::FromBytes, then DriveProgram. Inputs over kMaxProgramBytes are refused (parse is
// InvalidArgument) before any parsing.
DriveResult DriveBytes(const Runtime& runtime, absl::Span<const uint8_t> bytes);
// Program::FromJson, then DriveProgram, with the same size limit.
DriveResult DriveJson(const Runtime& runtime, absl::string_view json);
// Every method in order: load, bind inputs, execute.
std::vector<MethodOutcome> DriveProgram(const Runtime& runtime, const Program& program);

// Whether Ferry's verifier for its schema (loader/ferry/internal/table_verifier.h) gives the
// verdict of the verifier flatc generates on `bytes`, at the table limit reading uses. The program
// fuzzer stops on an input where they differ; the regression test checks every stored input.
bool TableVerifiersAgree(absl::Span<const uint8_t> bytes);

// One line per status, for logs and test output.
std::string Describe(const DriveResult& result);

}  // namespace ferry::fuzz

#endif  // FERRY_FUZZ_FUZZ_DRIVER_H_
