// libFuzzer target: the input is an ExecuTorch program (.pte) taken the whole way a user's is:
// read, imported, every method loaded (under the driver's per-device memory limits) and, where
// its inputs can be bound on the host, executed. Seeds: the real programs of ../shared/pte and the
// ExecuTorch reproducers of ../shared/repro3 when those folders exist. See fuzz/README.md.
#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "ferry/fuzz/fuzz_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ferry::fuzz::kMaxProgramBytes) return 0;
  static const ferry::Runtime& runtime = ferry::fuzz::FuzzRuntime();
  const ferry::fuzz::DriveResult result =
      ferry::fuzz::DriveBytes(runtime, absl::MakeConstSpan(data, size));
  // The importer built a method that breaks the model's invariants.
  if (!result.model.ok()) __builtin_trap();
  return 0;
}
