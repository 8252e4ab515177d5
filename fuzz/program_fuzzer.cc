// libFuzzer target: the input is a binary program (Program::FromBytes), then every method is
// loaded and, where its inputs can be bound on the host, executed. See fuzz/README.md.
#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "ferry/fuzz/fuzz_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ferry::fuzz::kMaxProgramBytes) return 0;
  static const ferry::Runtime& runtime = ferry::fuzz::FuzzRuntime();
  // Reading trusts Ferry's verifier for the schema: it must agree with flatc's on every input.
  if (!ferry::fuzz::TableVerifiersAgree(absl::MakeConstSpan(data, size))) __builtin_trap();
  const ferry::fuzz::DriveResult result =
      ferry::fuzz::DriveBytes(runtime, absl::MakeConstSpan(data, size));
  // A reader built a method that breaks the model's invariants.
  if (!result.model.ok()) __builtin_trap();
  return 0;
}
