// libFuzzer target: the input is the JSON form of a program (Program::FromJson), then every
// method is loaded and, where its inputs can be bound on the host, executed. See fuzz/README.md.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "ferry/fuzz/fuzz_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ferry::fuzz::kMaxProgramBytes) return 0;
  static const ferry::Runtime& runtime = ferry::fuzz::FuzzRuntime();
  const ferry::fuzz::DriveResult result = ferry::fuzz::DriveJson(
      runtime, absl::string_view(reinterpret_cast<const char*>(data), size));
  // A reader built a method that breaks the model's invariants.
  if (!result.model.ok()) __builtin_trap();
  return 0;
}
