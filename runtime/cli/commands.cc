// RunCommand, and the helpers the commands share (runtime/cli/internal.h). Each command is a file
// of its own: args.cc (the command line), plan.cc, run.cc, bench.cc, decode_loop.cc.
#include "ferry/runtime/cli/commands.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ferry/base/status_macros.h"
#include "ferry/base/text.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/cli/internal.h"

namespace ferry::cli {

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

int Fail(std::FILE* err, const absl::Status& status) {
  // The whole message, whatever bytes it holds: names from files are escaped where messages are
  // made (base/text.h); what is left is escaped here rather than cut short at a NUL or written
  // raw to the terminal. Lines stay lines.
  std::string text = "ferry: ";
  bool first = true;
  for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
    if (!first) text.push_back('\n');
    first = false;
    absl::StrAppend(&text, EscapeControls(line));
  }
  text.push_back('\n');
  std::fwrite(text.data(), 1, text.size(), err);
  return kExitError;
}

DeviceCounters TotalCounters(const Runtime& rt, const std::vector<Device>& devices) {
  DeviceCounters total;
  for (const Device& d : devices) {
    total.AddCopies(rt.devices().Find(d)->counters());
  }
  return total;
}

std::string DeviceBytes(const std::vector<std::pair<Device, size_t>>& per_device) {
  if (per_device.empty()) return "none";
  std::vector<std::string> parts;
  for (const auto& [device, bytes] : per_device) {
    parts.push_back(absl::StrCat(device.ToString(), " ", bytes, " B"));
  }
  return absl::StrJoin(parts, ", ");
}

// A JSON string: quotes, backslashes and control characters escaped.
std::string JsonString(absl::string_view text) { return JsonQuoted(text); }

// A JSON number with `digits` significant digits (9 read back as the same float32, 17 as the
// same double); null for NaN and infinities, which JSON cannot write.
std::string JsonNumber(double v, int digits) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.*g", digits, v);
}

absl::Status WriteTrace(const Options& options, const TraceRecorder& trace, std::FILE* err) {
  FERRY_RETURN_IF_ERROR(trace.WriteFile(options.trace_path));
  absl::FPrintF(err,
                "ferry: trace: %s, %d events%s (open in ui.perfetto.dev or chrome://tracing)\n",
                options.trace_path, trace.num_events(),
                trace.calls_left_out() > 0
                    ? absl::StrFormat("; %d calls left out (event limit)", trace.calls_left_out())
                    : "");
  return absl::OkStatus();
}

int RunCommand(const Options& options, std::FILE* out, std::FILE* err) {
  Runtime rt(options.runtime);
  auto verify_start = Clock::now();
  ProgramLoadOptions program_options;
  program_options.data_path = options.data;
  absl::StatusOr<std::unique_ptr<Program>> program =
      Program::Load(options.program, program_options);
  const double verify_us = MicrosSince(verify_start);
  if (!program.ok()) return Fail(err, program.status());
  if (options.command == "plan") {
    return Plan(options, rt, **program, rt.RegisterPlanOnlyBackends(**program), out, err);
  }
  if (options.tokens > 0) return RunTokens(options, rt, **program, out, err);
  if (options.command == "bench") {
    // Every method of a program with several, when none is named.
    std::vector<std::string> names = {options.method};
    if (!options.method_given && (*program)->method_names().size() > 1) {
      names = (*program)->method_names();
    }
    return Bench(options, rt, **program, names, verify_us, out, err);
  }
  if (options.command == "verify") return Verify(options, rt, **program, out, err);
  absl::StatusOr<std::unique_ptr<Method>> method =
      rt.LoadMethod(**program, options.method, options.load);
  if (!method.ok()) return Fail(err, method.status());
  // A bundle's method runs on its first test case's inputs unless --input gives some.
  const TestCase* test_inputs = nullptr;
  if (options.inputs.empty()) {
    for (const TestSuite& suite : (*program)->test_suites()) {
      if (suite.method_name == options.method && !suite.cases.empty()) {
        test_inputs = &suite.cases[0];
        break;
      }
    }
  }
  return RunMethod(options, rt, **method, test_inputs, out, err);
}

}  // namespace ferry::cli
