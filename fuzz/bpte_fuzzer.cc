// libFuzzer target: the input is a bundled program (.bpte), loaded as Program::FromBytes loads
// any file (the bundle's reader, then the .pte inside) and, when it loads, verified: every test
// case of every suite bound, executed and compared (runtime/verify.h), each method under the
// driver's per-device memory limits. Seeds: the real programs of ../shared/pte, each bundled with
// one test case by ferry_fuzz_make_seeds. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/types/span.h"
#include "ferry/fuzz/fuzz_driver.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ferry::fuzz::kMaxProgramBytes) return 0;
  static const ferry::Runtime& runtime = ferry::fuzz::FuzzRuntime();
  absl::StatusOr<std::unique_ptr<ferry::Program>> program =
      ferry::Program::FromBytes(absl::MakeConstSpan(data, size));
  if (!program.ok() || (*program)->test_suites().empty()) return 0;
  ferry::VerifyOptions options;
  options.load = ferry::fuzz::FuzzLoadOptions();
  // Failures and cases that cannot run are results; only a crash or a sanitizer report is a find.
  absl::StatusOr<std::vector<ferry::CaseResult>> results =
      ferry::VerifyTestSuites(runtime, **program, options);
  (void)results;
  return 0;
}
