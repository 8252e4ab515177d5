// Pieces the `ferry` commands share across files (runtime/cli/); not part of the library's API.
#ifndef FERRY_RUNTIME_CLI_INTERNAL_H_
#define FERRY_RUNTIME_CLI_INTERNAL_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/runtime/cli/commands.h"
#include "ferry/runtime/runtime.h"
#include "ferry/runtime/verify.h"

namespace ferry::cli {

using Clock = std::chrono::steady_clock;

double MicrosSince(Clock::time_point start);
// Prints "ferry: MESSAGE" to `err`; returns kExitError.
int Fail(std::FILE* err, const absl::Status& status);
// The copy counters of `devices`, added up.
DeviceCounters TotalCounters(const Runtime& rt, const std::vector<Device>& devices);
// "sim:0 1024 B, host 64 B", or "none".
std::string DeviceBytes(const std::vector<std::pair<Device, size_t>>& per_device);

// A JSON string: quotes, backslashes and control characters escaped.
std::string JsonString(absl::string_view text);
// A JSON number with `digits` significant digits (9 read back as the same float32, 17 as the
// same double); null for NaN and infinities, which JSON cannot write.
std::string JsonNumber(double v, int digits);

// Caller-side buffers for a method's inputs: host memory, or memory of the input's device.
struct InputBuffers {
  std::vector<std::vector<uint8_t>> host;
  std::vector<DeviceBuffer> device;
};
// Binds every input of `method`: the values `options.inputs` gives by name, a fixed pattern
// for the others (runtime/cli/run.cc).
absl::Status FillInputs(const Options& options, const Runtime& rt, Method& method,
                        InputBuffers& buffers);
// Writes `trace` to options.trace_path and says so on `err` ("ferry: trace: FILE, N events").
absl::Status WriteTrace(const Options& options, const TraceRecorder& trace, std::FILE* err);
// The placement's diagnostics, one line each, to `err`.
void PrintDiagnostics(const Method& method, std::FILE* err);

// The commands, one file each. `ferry plan` (runtime/cli/plan.cc); `planned_only` names the
// backends registered as plan-only stand-ins.
int Plan(const Options& options, const Runtime& rt, const Program& program,
         const std::vector<std::string>& planned_only, std::FILE* out, std::FILE* err);
// `ferry run` of one loaded method (runtime/cli/run.cc), its inputs from `test_inputs` when not
// null (a bundle's first test case), otherwise FillInputs'.
int RunMethod(const Options& options, const Runtime& rt, Method& method,
              const TestCase* test_inputs, std::FILE* out, std::FILE* err);
// `ferry verify` of a bundled program (runtime/cli/verify.cc).
int Verify(const Options& options, Runtime& rt, const Program& program, std::FILE* out,
           std::FILE* err);
// `ferry bench` of the methods `names` (runtime/cli/bench.cc).
int Bench(const Options& options, const Runtime& rt, const Program& program,
          const std::vector<std::string>& names, double verify_us, std::FILE* out, std::FILE* err);
// `ferry run --tokens N` (runtime/cli/decode_loop.cc).
int RunTokens(const Options& options, const Runtime& rt, const Program& program, std::FILE* out,
              std::FILE* err);

}  // namespace ferry::cli

#endif  // FERRY_RUNTIME_CLI_INTERNAL_H_
