// Pieces the `ferry` commands share across files (runtime/cli/); not part of the library's API.
#ifndef FERRY_RUNTIME_CLI_INTERNAL_H_
#define FERRY_RUNTIME_CLI_INTERNAL_H_

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device.h"
#include "ferry/runtime/cli/commands.h"
#include "ferry/runtime/runtime.h"

namespace ferry::cli {

using Clock = std::chrono::steady_clock;

double MicrosSince(Clock::time_point start);
// Prints "ferry: MESSAGE" to `err`; returns kExitError.
int Fail(std::FILE* err, const absl::Status& status);
// The copy counters of `devices`, added up.
DeviceCounters TotalCounters(const Runtime& rt, const std::vector<Device>& devices);
// "sim:0 1024 B, host 64 B", or "none".
std::string DeviceBytes(const std::vector<std::pair<Device, size_t>>& per_device);

// `ferry run --tokens N` (runtime/cli/decode_loop.cc).
int RunTokens(const Options& options, const Runtime& rt, const Program& program, std::FILE* out,
              std::FILE* err);

}  // namespace ferry::cli

#endif  // FERRY_RUNTIME_CLI_INTERNAL_H_
