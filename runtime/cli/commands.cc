#include "ferry/runtime/cli/commands.h"

#include <algorithm>
#include <chrono>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/plan/exporter_audit.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/cli/internal.h"
#include "ferry/runtime/plan_printer.h"

#ifndef FERRY_VERSION
#error "FERRY_VERSION (the project's version) is defined by runtime/CMakeLists.txt"
#endif

namespace ferry::cli {
namespace {

// ---- the command line -------------------------------------------------------------------------

enum CommandBit : unsigned { kPlan = 1, kRun = 2, kBench = 4, kAllCommands = 7 };

struct CommandSpec {
  const char* name;
  CommandBit bit;
  const char* summary;      // one line in the usage
  const char* description;  // what `ferry COMMAND --help` explains
  const char* example;
};

constexpr CommandSpec kCommands[] = {
    {"plan", kPlan, "print placement, the copy manifest, arenas and diagnostics (--dot: Graphviz)",
     "Loads the method and prints where every node runs, the copy manifest (each copy's\n"
     "direction, value, devices and bytes, whether it runs once at load or on every call, and\n"
     "why), the arenas per device with their lower bounds, memory per device, and the\n"
     "diagnostics. Nothing is executed. A program with several methods and no --method: every\n"
     "method, loaded together, then once what they share (constant replicas, shared states)\n"
     "and each method's own memory; with --dot, the methods side by side and the values they\n"
     "share drawn once between them. A delegate whose backend is not registered (an ExecuTorch\n"
     "backend id such as XnnpackBackend) is planned from what the program declares, and named.\n",
     "ferry plan build/bench/decoder_block.ferry --skip-h2d\n"
     "  ferry plan --dot | dot -Tpng -o plan.png\n"},
    {"run", kRun, "load, execute with generated (or --input) inputs, print outputs and timings",
     "Loads the method, fills its inputs with generated values (integer inputs with zeros) or\n"
     "with the values given by --input, executes it --calls times and prints the time of the\n"
     "first and the last call and every output's dtype, shape, device, sum, minimum, maximum and\n"
     "first values. --json prints the outputs as JSON instead, with all their values, for\n"
     "scripts.\n"
     "With --tokens N: greedy generation. The program's \"prefill\" method (when present) runs\n"
     "on a prompt, then the decode method (--method, default \"decode\") once per token, each\n"
     "call fed the argmax of the last logits. Both are loaded as one program: constants on a\n"
     "device are copied there once, and shared states (the KV caches) are one buffer. They take\n"
     "inputs \"tokens\" (int64 [T]), \"pos\" (int64 [T]) and optionally \"mask\" (float32 [T, S],\n"
     "causal, -1e9 where masked) and return the logits (float32 [T, V]) as output 0; decode\n"
     "takes T = 1. Prints the prefill time, tokens per second, the tokens, copies per token (the\n"
     "devices' counters against the manifest; exit status 1 when they disagree), copies of\n"
     "constants and state per call, and device memory. Without PROGRAM the decode-loop example\n"
     "(build/bench/decoder_lm.ferry) is used.\n",
     "ferry run --input pos=3 --calls 4\n"
     "  ferry run linear.pte --data linear.ptd --input 0=1,2,3 --json\n"
     "  ferry run --tokens 32            (the decode loop of the language-model example)\n"},
    {"bench", kBench,
     "load and execute repeatedly; report load time, latency, copies, arenas (--json)",
     "Loads the method, executes it --warmup times, then --calls times measured, and reports the\n"
     "load time by phase, the latency (min, median, p99), copies and bytes per call (the\n"
     "manifest's against the devices' counters; exit status 1 when they disagree), the constant\n"
     "bytes materialized at load and the arenas. A program with several methods and no\n"
     "--method: every method, loaded together and measured in turn, then once the constant\n"
     "replicas and shared states they share (JSON: one object per method under \"methods\").\n",
     "ferry bench --calls 10000 --no-guard --json\n"
     "  ferry bench build/bench/decoder_lm.ferry --json   (prefill and decode, one program)\n"},
};

struct OptionSpec {
  const char* name;
  const char* arg;  // the value's name, or nullptr for a switch
  unsigned commands;
  const char* help;
};

constexpr OptionSpec kOptions[] = {
    {"--method", "NAME", kAllCommands, "method to load (default: forward)"},
    {"--data", "FILE", kAllCommands,
     "an ExecuTorch program's data file (.ptd), with the tensors it keeps outside itself"},
    {"--skip-h2d", nullptr, kAllCommands,
     "skip_h2d_for_method_inputs: inputs read on a device are passed there"},
    {"--skip-d2h", nullptr, kAllCommands,
     "skip_d2h_for_method_outputs: outputs stay on their device"},
    {"--strict", nullptr, kAllCommands,
     "error_on_per_call_copies: boundary copies are load errors"},
    {"--no-guard", nullptr, kAllCommands,
     "do not guard sim device memory (faster, for measurements)"},
    {"--calls", "N", kRun | kBench, "calls to execute, at least 1 (default: run 1, bench 1000)"},
    {"--warmup", "N", kBench, "calls before measuring (default 10)"},
    {"--input", "NAME=V,V", kRun,
     "values of an input, by name or position (0, 1, ...; repeated to fill it), instead of "
     "generated ones"},
    {"--tokens", "N", kRun,
     "generate N tokens: prefill, then the decode method once per token (see ferry run --help)"},
    {"--dot", nullptr, kPlan, "print Graphviz DOT instead of text"},
    {"--audit", nullptr, kPlan,
     "list where the exporter's copies, device annotations and arena devices (ExecuTorch "
     "programs) differ from Ferry's plan"},
    {"--json", nullptr, kRun | kBench,
     "print JSON instead of text (run: every output with all its values)"},
};

constexpr char kProgramLine[] =
    "PROGRAM is a .ferry file, its .json form, or an ExecuTorch program (.pte, with --data FILE\n"
    "for its .ptd); without it the example decoder block is used.\n";
constexpr char kExitStatusLine[] = "exit status: 0 ok, 1 load or run error, 2 usage error\n";

const CommandSpec* FindCommand(absl::string_view name) {
  for (const CommandSpec& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

const OptionSpec* FindOption(absl::string_view name) {
  for (const OptionSpec& o : kOptions) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

// "plan", "run and bench", "plan, run and bench" (`last` joins the last two).
std::string CommandList(unsigned commands, absl::string_view last = " and ") {
  std::vector<std::string> names;
  for (const CommandSpec& c : kCommands) {
    if (commands & c.bit) names.push_back(c.name);
  }
  if (names.size() < 2) return absl::StrJoin(names, "");
  const std::string final_name = names.back();
  names.pop_back();
  return absl::StrCat(absl::StrJoin(names, ", "), last, final_name);
}

std::string OptionLine(const OptionSpec& o, absl::string_view prefix) {
  const std::string flag = o.arg == nullptr ? o.name : absl::StrCat(o.name, " ", o.arg);
  return absl::StrFormat("  %-16s  %s%s\n", flag, prefix, o.help);
}

std::string Usage() {
  std::string s =
      "usage: ferry <plan|run|bench> [PROGRAM] [options]\n"
      "       ferry <plan|run|bench> --help\n"
      "       ferry --help | --version\n"
      "\n"
      "commands:\n";
  for (const CommandSpec& c : kCommands) {
    absl::StrAppendFormat(&s, "  %-6s  %s\n", c.name, c.summary);
  }
  absl::StrAppend(&s, "\n", kProgramLine, "\noptions:\n");
  for (const OptionSpec& o : kOptions) {
    const std::string prefix =
        o.commands == kAllCommands ? "" : absl::StrCat(CommandList(o.commands, ", "), ": ");
    absl::StrAppend(&s, OptionLine(o, prefix));
  }
  absl::StrAppend(&s, "\n", kExitStatusLine);
  return s;
}

std::string CommandHelp(const CommandSpec& c) {
  std::string s = absl::StrCat("usage: ferry ", c.name, " [PROGRAM] [options]\n\n", c.description,
                               "\n", kProgramLine, "\noptions:\n");
  for (const OptionSpec& o : kOptions) {  // the command's own options first
    if (o.commands != kAllCommands && (o.commands & c.bit)) absl::StrAppend(&s, OptionLine(o, ""));
  }
  for (const OptionSpec& o : kOptions) {
    if (o.commands == kAllCommands) absl::StrAppend(&s, OptionLine(o, ""));
  }
  absl::StrAppend(&s, "\nexample:\n  ", c.example, "\n", kExitStatusLine);
  return s;
}

int UnknownCommand(absl::string_view name, std::FILE* err) {
  absl::FPrintF(err, "ferry: unknown command \"%s\"; the commands are %s\n\n%s", name,
                CommandList(kAllCommands), Usage());
  return kExitUsage;
}

// ---- the commands -----------------------------------------------------------------------------

// Caller-side buffers for a method's inputs: host memory, or memory of the input's device.
struct InputBuffers {
  std::vector<std::vector<uint8_t>> host;
  std::vector<DeviceBuffer> device;
};

// Stores `v` as one element of input `io`, refusing what the dtype cannot hold exactly: a
// float32 beyond its range, an int64 that is not a whole number in range (NaN included).
absl::Status StoreElement(const IoInfo& io, double v, uint8_t* out) {
  switch (io.dtype) {
    case DType::kFloat32: {
      if (std::isfinite(v) && std::fabs(v) > static_cast<double>(FLT_MAX)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--input %s: %g is out of the range of float32", io.name, v));
      }
      const float f = static_cast<float>(v);
      std::memcpy(out, &f, sizeof(f));
      return absl::OkStatus();
    }
    case DType::kInt64: {
      // [-2^63, 2^63): every double in it converts to int64 exactly when it is whole.
      if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0) || v != std::trunc(v)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--input %s: %g is not a whole number in the range of int64, and input \"%s\" is "
            "int64",
            io.name, v, io.name));
      }
      const int64_t n = static_cast<int64_t>(v);
      std::memcpy(out, &n, sizeof(n));
      return absl::OkStatus();
    }
    case DType::kInt32: {
      if (!(v >= -2147483648.0 && v <= 2147483647.0) || v != std::trunc(v)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--input %s: %g is not a whole number in the range of int32, and input \"%s\" is "
            "int32",
            io.name, v, io.name));
      }
      const int32_t n = static_cast<int32_t>(v);
      std::memcpy(out, &n, sizeof(n));
      return absl::OkStatus();
    }
    case DType::kBool: {
      if (v != 0.0 && v != 1.0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--input %s: %g is not 0 or 1, and input \"%s\" is bool", io.name, v, io.name));
      }
      *out = v == 1.0 ? 1 : 0;
      return absl::OkStatus();
    }
  }
  return absl::UnimplementedError(
      absl::StrCat("--input ", io.name, ": inputs of dtype ", DTypeName(io.dtype),
                   " cannot be given on the command line"));
}

absl::Status FillInputs(const Options& options, const Runtime& rt, Method& method,
                        InputBuffers& buffers) {
  const MethodPlan& plan = method.plan();
  buffers.host.resize(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const IoInfo& io = plan.inputs[i];
    std::vector<uint8_t>& bytes = buffers.host[i];
    bytes.assign(io.bytes, 0);
    const size_t count = io.bytes / DTypeSize(io.dtype);
    // By name, or by position for inputs without a name of their own (ExecuTorch's).
    auto given = options.inputs.find(io.name);
    if (given == options.inputs.end()) given = options.inputs.find(std::to_string(i));
    for (size_t j = 0; j < count; ++j) {
      double v;
      if (given != options.inputs.end()) {
        v = given->second[j % given->second.size()];
      } else {
        // Deterministic values; integer and bool inputs are zero so that index inputs stay in range.
        v = io.dtype == DType::kFloat32 ? 0.5 * std::sin(0.1 * j + i) : 0.0;
      }
      FERRY_RETURN_IF_ERROR(StoreElement(io, v, bytes.data() + j * DTypeSize(io.dtype)));
    }
    void* data = bytes.data();
    if (!io.device.is_host()) {
      DeviceRuntime* device = rt.devices().Find(io.device);
      FERRY_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(*device, io.bytes, 64));
      FERRY_RETURN_IF_ERROR(device->CopyHostToDevice(buffer.data(), bytes.data(), io.bytes));
      FERRY_RETURN_IF_ERROR(device->Synchronize());
      data = buffer.data();
      buffers.device.push_back(std::move(buffer));
    }
    FERRY_RETURN_IF_ERROR(method.SetInput(i, TensorView(io.dtype, io.sizes, data, io.device)));
  }
  for (const auto& [name, values] : options.inputs) {
    bool found = false;
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      found = found || plan.inputs[i].name == name || std::to_string(i) == name;
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--input: the method has no input \"", name, "\" (name one, or give its position, 0 to ",
          plan.inputs.size() - 1, ")"));
    }
  }
  return absl::OkStatus();
}

void PrintDiagnostics(const Method& method, std::FILE* err) {
  for (const Diagnostic& d : method.plan().placement.diagnostics) {
    std::fprintf(err, "ferry: %s: %s\n",
                 d.severity == Diagnostic::Severity::kError ? "error" : "warning",
                 d.message.c_str());
  }
}

// A JSON string: quotes, backslashes and control characters escaped.
std::string JsonString(absl::string_view text) {
  std::string s = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      s.push_back('\\');
      s.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&s, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      s.push_back(c);
    }
  }
  s.push_back('"');
  return s;
}

// A JSON number with `digits` significant digits (9 read back as the same float32, 17 as the
// same double); null for NaN and infinities, which JSON cannot write.
std::string JsonNumber(double v, int digits) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.*g", digits, v);
}

// `ferry run --json`: the method's outputs with all their values.
int PrintOutputsJson(const Options& options, const Runtime& rt, Method& method,
                     const std::vector<double>& times, std::FILE* out, std::FILE* err) {
  const MethodPlan& plan = method.plan();
  std::string text = absl::StrCat("{\"program\": ", JsonString(options.program),
                                  ", \"method\": ", JsonString(method.def().name),
                                  ", \"calls\": ", times.size(), ",\n \"latency_us\": {\"first\": ",
                                  JsonNumber(times.front(), 6), ", \"last\": ",
                                  JsonNumber(times.back(), 6),
                                  "},\n \"outputs\": [");
  for (size_t i = 0; i < method.num_outputs(); ++i) {
    absl::StatusOr<std::vector<double>> values = ReadValues(rt, method.Output(i));
    if (!values.ok()) return Fail(err, values.status());
    const IoInfo& io = plan.outputs[i];
    std::vector<std::string> numbers;
    numbers.reserve(values->size());
    const int digits = io.dtype == DType::kFloat32 ? 9 : 17;
    for (double v : *values) numbers.push_back(JsonNumber(v, digits));
    absl::StrAppend(&text, i == 0 ? "\n  " : ",\n  ", "{\"index\": ", i,
                    ", \"name\": ", JsonString(io.name), ", \"dtype\": ",
                    JsonString(DTypeName(io.dtype)), ", \"sizes\": [",
                    absl::StrJoin(io.sizes, ", "), "], \"device\": ", JsonString(io.device_label),
                    ", \"values\": [", absl::StrJoin(numbers, ", "), "]}");
  }
  absl::StrAppend(&text, method.num_outputs() == 0 ? "]}\n" : "\n ]}\n");
  std::fputs(text.c_str(), out);
  return 0;
}

int Run(const Options& options, const Runtime& rt, Method& method, std::FILE* out,
        std::FILE* err) {
  PrintDiagnostics(method, err);
  InputBuffers buffers;
  if (absl::Status s = FillInputs(options, rt, method, buffers); !s.ok()) return Fail(err, s);
  const int calls = std::max(options.calls, 1);
  std::vector<double> times;
  for (int c = 0; c < calls; ++c) {
    auto start = Clock::now();
    if (absl::Status s = method.Execute(); !s.ok()) return Fail(err, s);
    times.push_back(MicrosSince(start));
  }
  const MethodPlan& plan = method.plan();
  if (options.json) return PrintOutputsJson(options, rt, method, times, out, err);
  absl::FPrintF(out, "method \"%s\": %d call%s, first %.1f us, last %.1f us\n", method.def().name,
                calls, calls == 1 ? "" : "s", times.front(), times.back());
  for (size_t i = 0; i < method.num_outputs(); ++i) {
    TensorView view = method.Output(i);
    absl::StatusOr<std::vector<double>> values = ReadValues(rt, view);
    if (!values.ok()) return Fail(err, values.status());
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    for (double v : *values) {
      sum += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    std::vector<std::string> head;
    for (size_t j = 0; j < std::min<size_t>(values->size(), 6); ++j) {
      head.push_back(absl::StrFormat("%.6g", (*values)[j]));
    }
    const IoInfo& io = plan.outputs[i];
    absl::FPrintF(out, "output %d \"%s\" %s[%s] on %s: sum %.6g min %.6g max %.6g  [%s%s]\n", i,
                  io.name, DTypeName(io.dtype), absl::StrJoin(io.sizes, ", "), io.device_label,
                  sum, lo, hi, absl::StrJoin(head, ", "), values->size() > 6 ? ", ..." : "");
  }
  return 0;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(q * v.size())) - 1;
  return v[std::min(i, v.size() - 1)];
}

// What `ferry bench` measures of one method.
struct BenchFigures {
  std::string method;
  size_t nodes = 0;
  int calls = 0;
  double load_us = 0;  // LoadMethod (verify_us, reading the program, is counted once per program)
  LoadTimings timings;
  double min = 0, median = 0, p99 = 0;
  int manifest_copies = 0;
  size_t manifest_bytes = 0;
  double copies_per_call = 0, bytes_per_call = 0;  // counted by the devices
  int constant_and_state_copies = 0;               // per call, in the manifest
  bool agree = false;
  size_t constant_bytes = 0;  // replicas this method made at load
  size_t shared_constant_bytes = 0;
  size_t shared_state_bytes = 0;
  std::vector<ArenaInfo> arenas;
  bool guarded = false;
};

absl::StatusOr<BenchFigures> Measure(const Options& options, const Runtime& rt, Method& method,
                                     double load_us, std::FILE* err) {
  InputBuffers buffers;
  FERRY_RETURN_IF_ERROR(FillInputs(options, rt, method, buffers));
  const MethodPlan& plan = method.plan();
  std::vector<Device> devices = plan.placement.devices();
  for (int i = 0; i < options.warmup; ++i) FERRY_RETURN_IF_ERROR(method.Execute());
  BenchFigures f;
  f.method = method.def().name;
  f.nodes = method.def().nodes.size();
  f.calls = std::max(options.calls, 1);
  f.load_us = load_us;
  f.timings = plan.timings;
  DeviceCounters before = TotalCounters(rt, devices);
  std::vector<double> times;
  times.reserve(f.calls);
  auto progress = Clock::now();
  for (int c = 0; c < f.calls; ++c) {
    auto start = Clock::now();
    FERRY_RETURN_IF_ERROR(method.Execute());
    times.push_back(MicrosSince(start));
    if (!options.json && MicrosSince(progress) > 1e6) {
      absl::FPrintF(err, "\rferry bench: \"%s\": %d/%d calls", f.method, c + 1, f.calls);
      progress = Clock::now();
    }
  }
  if (!options.json) std::fprintf(err, "\r");
  DeviceCounters after = TotalCounters(rt, devices);
  // Host-to-host copies (state initialization) never run per call, so device counters see every
  // per-call copy of the manifest.
  f.copies_per_call = static_cast<double>((after.h2d_copies - before.h2d_copies) +
                                          (after.d2h_copies - before.d2h_copies) +
                                          (after.d2d_copies - before.d2d_copies)) /
                      f.calls;
  f.bytes_per_call = static_cast<double>((after.h2d_bytes - before.h2d_bytes) +
                                         (after.d2h_bytes - before.d2h_bytes) +
                                         (after.d2d_bytes - before.d2d_bytes)) /
                     f.calls;
  f.manifest_copies = plan.placement.per_call_copies();
  f.manifest_bytes = plan.placement.per_call_bytes();
  f.agree = f.copies_per_call == f.manifest_copies && f.bytes_per_call == f.manifest_bytes;
  for (const CopyStep& c : plan.placement.copies) {
    const ValueKind kind = method.def().values[c.value].kind;
    f.constant_and_state_copies += c.timing == CopyTiming::kPerCall &&
                                   (kind == ValueKind::kConstant || kind == ValueKind::kState);
  }
  for (const ArenaInfo& a : plan.arenas) {
    f.constant_bytes += a.constant_bytes;
    f.shared_constant_bytes += a.shared_constant_bytes;
    f.shared_state_bytes += a.shared_state_bytes;
  }
  f.arenas = plan.arenas;
  f.min = *std::min_element(times.begin(), times.end());
  f.median = Percentile(times, 0.5);
  f.p99 = Percentile(times, 0.99);
  f.guarded = std::any_of(devices.begin(), devices.end(), [&](const Device& d) {
    const DeviceRuntime* runtime = rt.devices().Find(d);
    return runtime != nullptr && runtime->guarded();
  });
  return f;
}

std::string JsonDeviceBytes(const std::vector<std::pair<Device, size_t>>& per_device) {
  std::vector<std::string> parts;
  for (const auto& [device, bytes] : per_device) {
    parts.push_back(absl::StrFormat("\"%s\": %d", device.ToString(), bytes));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

// One method's figures as a JSON object's members (no braces); `indent` starts each line after
// the first.
std::string MethodJson(const Options& options, const BenchFigures& f, double verify_us,
                       absl::string_view indent) {
  std::string arenas;
  for (size_t i = 0; i < f.arenas.size(); ++i) {
    const ArenaInfo& a = f.arenas[i];
    absl::StrAppendFormat(&arenas,
                          "%s{\"device\": \"%s\", \"arena_bytes\": %d, \"lower_bound_bytes\": "
                          "%d, \"constant_bytes\": %d, \"shared_constant_bytes\": %d, "
                          "\"shared_state_bytes\": %d}",
                          i == 0 ? "" : ", ", a.device.ToString(), a.arena_bytes, a.lower_bound,
                          a.constant_bytes, a.shared_constant_bytes, a.shared_state_bytes);
  }
  const LoadTimings& t = f.timings;
  return absl::StrFormat(
      "\"method\": %s, \"nodes\": %d, \"calls\": %d,\n"
      "%s\"load_us\": {\"total\": %.3f, \"verify\": %.3f, \"placement\": %.3f, \"planning\": "
      "%.3f, \"materialization\": %.3f},\n"
      "%s\"latency_us\": {\"min\": %.3f, \"median\": %.3f, \"p99\": %.3f},\n"
      "%s\"copies_per_call\": {\"manifest\": %d, \"counted\": %.3f, "
      "\"of_constants_and_state\": %d},\n"
      "%s\"bytes_per_call\": {\"manifest\": %d, \"counted\": %.3f},\n"
      "%s\"counters_agree\": %s,\n"
      "%s\"constant_bytes_at_load\": %d,\n"
      "%s\"shared_constant_bytes\": %d,\n"
      "%s\"shared_state_bytes\": %d,\n"
      "%s\"sim_guard\": %s,\n"
      "%s\"arenas\": [%s]",
      JsonString(f.method), f.nodes, f.calls, indent, f.load_us + verify_us, verify_us, t.placement_us,
      t.planning_us, t.materialization_us, indent, f.min, f.median, f.p99, indent,
      f.manifest_copies, f.copies_per_call, f.constant_and_state_copies, indent, f.manifest_bytes,
      f.bytes_per_call, indent, f.agree ? "true" : "false", indent, f.constant_bytes, indent,
      f.shared_constant_bytes, indent, f.shared_state_bytes, indent,
      options.runtime.sim.guard ? "true" : "false", indent, arenas);
}

void PrintMethodTable(const Options& options, const BenchFigures& f, double verify_us,
                      std::FILE* out) {
  absl::FPrintF(out, "ferry bench: method \"%s\" of %s (%d nodes), %d calls\n", f.method,
                options.program, f.nodes, f.calls);
  if (f.guarded) {
    absl::FPrintF(out,
                  "  (devices guarded: every device scope costs mprotect calls, counted in "
                  "the latency; --no-guard times Ferry without them)\n");
  }
  const LoadTimings& t = f.timings;
  absl::FPrintF(out, "  load             %10.1f us  (verify %.1f, placement %.1f, planning %.1f, "
                     "materialization %.1f)\n",
                f.load_us + verify_us, verify_us, t.placement_us, t.planning_us,
                t.materialization_us);
  absl::FPrintF(out, "  latency          %10.2f us min, %.2f us median, %.2f us p99\n", f.min,
                f.median, f.p99);
  absl::FPrintF(out, "  copies per call  %10d in the manifest (%d of constants and state), %.2f "
                     "counted by devices\n",
                f.manifest_copies, f.constant_and_state_copies, f.copies_per_call);
  absl::FPrintF(out, "  bytes per call   %10d in the manifest, %.1f counted by devices%s\n",
                f.manifest_bytes, f.bytes_per_call, f.agree ? "" : "  (MISMATCH)");
  absl::FPrintF(out, "  constants        %10d bytes materialized at load, %d shared with the "
                     "program's other methods\n",
                f.constant_bytes, f.shared_constant_bytes);
  for (const ArenaInfo& a : f.arenas) {
    double ratio = a.lower_bound == 0 ? 1.0 : static_cast<double>(a.arena_bytes) / a.lower_bound;
    absl::FPrintF(out, "  arena %-10s %10d bytes, lower bound %d (%.3fx), constants %d\n",
                  a.device.ToString(), a.arena_bytes, a.lower_bound, ratio, a.constant_bytes);
  }
}

// `ferry bench`: the methods named (one, or every method of the program), loaded together
// (Runtime::LoadProgram) and measured one after the other; then the program's device memory.
int Bench(const Options& options, const Runtime& rt, const Program& program,
          const std::vector<std::string>& names, double verify_us, std::FILE* out,
          std::FILE* err) {
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(program);
  std::vector<std::unique_ptr<Method>> methods;
  std::vector<BenchFigures> figures;
  for (const std::string& name : names) {
    auto load_start = Clock::now();
    absl::StatusOr<std::unique_ptr<Method>> method = loaded->LoadMethod(name, options.load);
    const double load_us = MicrosSince(load_start);
    if (!method.ok()) return Fail(err, method.status());
    absl::StatusOr<BenchFigures> f = Measure(options, rt, **method, load_us, err);
    if (!f.ok()) return Fail(err, f.status());
    figures.push_back(*std::move(f));
    methods.push_back(*std::move(method));
  }
  const bool agree = std::all_of(figures.begin(), figures.end(),
                                 [](const BenchFigures& f) { return f.agree; });
  const std::string replicas = JsonDeviceBytes(loaded->replica_bytes());
  const std::string states = JsonDeviceBytes(loaded->shared_state_bytes());
  if (options.json && names.size() == 1) {
    // One method: its object, with the program's device memory beside it.
    absl::FPrintF(out,
                  "{\"program\": %s, %s,\n \"program_replica_bytes\": %s,\n "
                  "\"program_shared_state_bytes\": %s}\n",
                  JsonString(options.program), MethodJson(options, figures[0], verify_us, " "), replicas,
                  states);
  } else if (options.json) {
    std::vector<std::string> objects;
    for (const BenchFigures& f : figures) {
      objects.push_back(absl::StrCat("  {", MethodJson(options, f, 0, "   "), "}"));
    }
    size_t made = 0;
    for (const BenchFigures& f : figures) made += f.constant_bytes;
    absl::FPrintF(out,
                  "{\"program\": %s, \"verify_us\": %.3f,\n \"constant_bytes_at_load\": %d,\n"
                  " \"program_replica_bytes\": %s,\n \"program_shared_state_bytes\": %s,\n"
                  " \"counters_agree\": %s,\n \"methods\": [\n%s]}\n",
                  JsonString(options.program), verify_us, made, replicas, states, agree ? "true" : "false",
                  absl::StrJoin(objects, ",\n"));
  } else {
    for (const BenchFigures& f : figures) {
      PrintMethodTable(options, f, names.size() == 1 ? verify_us : 0, out);
    }
    if (names.size() > 1) {
      absl::FPrintF(out, "program: %d methods loaded together (verify %.1f us)\n", names.size(),
                    verify_us);
      absl::FPrintF(out, "  constant replicas  %s, made once\n",
                    DeviceBytes(loaded->replica_bytes()));
      absl::FPrintF(out, "  shared states      %s\n", DeviceBytes(loaded->shared_state_bytes()));
    }
  }
  return agree ? kExitOk : kExitError;
}

}  // namespace

const char* Version() { return FERRY_VERSION; }

namespace {

// Parsing's steps, each returning an exit code for main to return, or -1 to go on.

// `ferry`, `ferry --help`, `ferry help [COMMAND]`, `ferry --version`: answered at once.
int AnswerHelpOrVersion(int argc, const char* const* argv, std::FILE* out, std::FILE* err) {
  if (argc < 2) {
    std::fputs(Usage().c_str(), err);
    return kExitUsage;
  }
  const absl::string_view first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    if (first == "help" && argc > 2) {  // `ferry help run`
      const CommandSpec* command = FindCommand(argv[2]);
      if (command == nullptr) return UnknownCommand(argv[2], err);
      std::fputs(CommandHelp(*command).c_str(), out);
      return kExitOk;
    }
    std::fputs(Usage().c_str(), out);
    return kExitOk;
  }
  if (first == "--version") {
    absl::FPrintF(out, "ferry %s\n", Version());
    return kExitOk;
  }
  return -1;
}

// One option `arg` (known, and valid for the command) with its `value` (null for a flag).
int ApplyOption(const std::string& arg, const char* value, Options* options, std::FILE* err) {
  if (arg == "--method") {
    options->method = value;
    options->method_given = true;
  } else if (arg == "--data") {
    options->data = value;
  } else if (arg == "--skip-h2d") {
    options->load.skip_h2d_for_method_inputs = true;
  } else if (arg == "--skip-d2h") {
    options->load.skip_d2h_for_method_outputs = true;
  } else if (arg == "--strict") {
    options->load.error_on_per_call_copies = true;
  } else if (arg == "--no-guard") {
    options->runtime.sim.guard = false;
  } else if (arg == "--calls") {
    // SimpleAtoi refuses what does not fit an int, so overflow is an error, not a wrap.
    if (!absl::SimpleAtoi(value, &options->calls) || options->calls < 1) {
      std::fprintf(err, "ferry: --calls needs a positive integer, at most %d (got \"%s\")\n",
                   std::numeric_limits<int>::max(), value);
      return kExitUsage;
    }
  } else if (arg == "--warmup") {
    if (!absl::SimpleAtoi(value, &options->warmup) || options->warmup < 0) {
      std::fprintf(err, "ferry: --warmup needs a non-negative integer (got \"%s\")\n", value);
      return kExitUsage;
    }
  } else if (arg == "--tokens") {
    if (!absl::SimpleAtoi(value, &options->tokens) || options->tokens < 1) {
      std::fprintf(err, "ferry: --tokens needs a positive integer, at most %d (got \"%s\")\n",
                   std::numeric_limits<int>::max(), value);
      return kExitUsage;
    }
  } else if (arg == "--dot") {
    options->dot = true;
  } else if (arg == "--audit") {
    options->audit = true;
  } else if (arg == "--json") {
    options->json = true;
  } else if (arg == "--input") {
    const std::string spec = value;
    std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits('=', 1));
    if (parts.size() != 2 || parts[0].empty()) {
      std::fprintf(err, "ferry: --input expects NAME=V,V,... (got \"%s\")\n", spec.c_str());
      return kExitUsage;
    }
    std::vector<double> values;
    for (absl::string_view v : absl::StrSplit(parts[1], ',')) {
      double d = 0;
      if (!absl::SimpleAtod(v, &d)) {
        std::fprintf(err, "ferry: --input %s: \"%s\" is not a number\n", parts[0].c_str(),
                     std::string(v).c_str());
        return kExitUsage;
      }
      values.push_back(d);
    }
    options->inputs[parts[0]] = std::move(values);
  }
  return -1;
}

// What the options imply together, once all are read.
int FinishOptions(const CommandSpec& command, bool program_given, Options* options,
                  std::FILE* err) {
  if (options->tokens > 0) {
    if (options->calls >= 0 || !options->inputs.empty() || options->json) {
      std::fprintf(err, "ferry: --tokens makes the calls and their inputs; it does not go with %s\n",
                   options->calls >= 0 ? "--calls" : options->json ? "--json" : "--input");
      return kExitUsage;
    }
    if (!options->method_given) options->method = "decode";
    if (!program_given && !options->tokens_program.empty()) {
      options->program = options->tokens_program;
    }
  }
  if (options->program.empty()) {
    std::fputs("ferry: no PROGRAM given and no example program was built in\n", err);
    return kExitUsage;
  }
  if (options->calls < 0) options->calls = command.bit == kBench ? 1000 : 1;
  return -1;
}

}  // namespace

int ParseArgs(int argc, const char* const* argv, Options* options, std::FILE* out,
              std::FILE* err) {
  if (int code = AnswerHelpOrVersion(argc, argv, out, err); code >= 0) return code;
  const CommandSpec* command = FindCommand(argv[1]);
  if (command == nullptr) return UnknownCommand(argv[1], err);
  options->command = command->name;
  bool program_given = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(CommandHelp(*command).c_str(), out);
      return kExitOk;
    }
    if (arg.empty() || arg[0] != '-') {
      if (program_given) {
        std::fprintf(err, "ferry: unexpected argument \"%s\"\n", arg.c_str());
        return kExitUsage;
      }
      options->program = arg;
      program_given = true;
      continue;
    }
    const OptionSpec* option = FindOption(arg);
    if (option == nullptr) {
      absl::FPrintF(err, "ferry: unknown option \"%s\"\n\n%s", arg, CommandHelp(*command));
      return kExitUsage;
    }
    if ((option->commands & command->bit) == 0) {
      absl::FPrintF(err, "ferry: %s does not apply to %s, only to %s (see ferry %s --help)\n",
                    arg, command->name, CommandList(option->commands), command->name);
      return kExitUsage;
    }
    const char* value = nullptr;
    if (option->arg != nullptr) {
      if (i + 1 >= argc) {
        std::fprintf(err, "ferry: %s needs a value\n", option->name);
        return kExitUsage;
      }
      value = argv[++i];
    }
    if (int code = ApplyOption(arg, value, options, err); code >= 0) return code;
  }
  return FinishOptions(*command, program_given, options, err);
}

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

int Fail(std::FILE* err, const absl::Status& status) {
  std::fprintf(err, "ferry: %s\n", std::string(status.message()).c_str());
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

namespace {

void PrintPlannedOnly(const std::vector<std::string>& missing, std::FILE* out) {
  for (const std::string& backend : missing) {
    absl::FPrintF(out,
                  "note: backend \"%s\" is not registered: planned from what the program "
                  "declares; running the method needs it registered (Runtime::RegisterBackend)\n",
                  backend);
  }
}

// `ferry plan --audit`: one line per difference between the exporter's placement and Ferry's.
void PrintAudit(const Options& options, const Runtime& rt, const Method& method,
                std::FILE* out) {
  const std::vector<AuditFinding> findings =
      AuditExporterPlacement(method.def(), method.plan().placement,
                             options.load.device_map.value_or(rt.default_device_map()));
  absl::FPrintF(out, "audit: %d difference%s between the exporter's placement and Ferry's\n",
                findings.size(), findings.size() == 1 ? "" : "s");
  for (const AuditFinding& f : findings) {
    absl::FPrintF(out, "  %s: %s\n", AuditFindingKindName(f.kind), f.message);
  }
}

// `ferry plan` of a program with several methods and no --method: every method, loaded together
// (Runtime::LoadProgram), then what they share, once; with --dot, one graph of them side by side.
int PlanAllMethods(const Options& options, const Runtime& rt, const Program& program,
                   std::FILE* out, std::FILE* err) {
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(program);
  std::vector<std::unique_ptr<Method>> methods;
  const std::vector<std::string> names = program.method_names();
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<Method>> method = loaded->LoadMethod(name, options.load);
    if (!method.ok()) return Fail(err, method.status());
    methods.push_back(*std::move(method));
  }
  if (options.dot) {
    std::vector<const Method*> views;
    for (const auto& m : methods) views.push_back(m.get());
    std::fputs(FormatProgramDot(views).c_str(), out);
    return kExitOk;
  }
  for (size_t i = 0; i < methods.size(); ++i) {
    absl::FPrintF(out, "== method \"%s\" ==\n%s\n", names[i], FormatPlanText(*methods[i]));
    if (options.audit) PrintAudit(options, rt, *methods[i], out);
  }
  absl::FPrintF(out, "== program: %d methods loaded together ==\n", names.size());
  absl::FPrintF(out, "constant replicas, made once and shared by the methods: %s\n",
                DeviceBytes(loaded->replica_bytes()));
  absl::FPrintF(out, "shared states: %s\n", DeviceBytes(loaded->shared_state_bytes()));
  for (size_t i = 0; i < methods.size(); ++i) {
    std::vector<std::string> parts;
    for (const ArenaInfo& a : methods[i]->plan().arenas) {
      parts.push_back(absl::StrCat(a.device_label, ": arena ", a.arena_bytes, " B, replicas made ",
                                   a.constant_bytes, " B, shared ", a.shared_constant_bytes,
                                   " B, shared states ", a.shared_state_bytes, " B"));
    }
    absl::FPrintF(out, "method \"%s\": %s\n", names[i], absl::StrJoin(parts, "; "));
  }
  return 0;
}

}  // namespace

int RunCommand(const Options& options, std::FILE* out, std::FILE* err) {
  Runtime rt(options.runtime);
  auto verify_start = Clock::now();
  ProgramLoadOptions program_options;
  program_options.data_path = options.data;
  absl::StatusOr<std::unique_ptr<Program>> program = Program::Load(options.program, program_options);
  const double verify_us = MicrosSince(verify_start);
  if (!program.ok()) return Fail(err, program.status());
  std::vector<std::string> planned_only;
  if (options.command == "plan") planned_only = rt.RegisterPlanOnlyBackends(**program);
  if (options.command == "plan" && !options.method_given &&
      (*program)->method_names().size() > 1) {
    const int code = PlanAllMethods(options, rt, **program, out, err);
    if (code == kExitOk && !options.dot) PrintPlannedOnly(planned_only, out);
    return code;
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
  absl::StatusOr<std::unique_ptr<Method>> method =
      rt.LoadMethod(**program, options.method, options.load);
  if (!method.ok()) return Fail(err, method.status());
  if (options.command == "plan") {
    std::string text = options.dot ? FormatPlanDot(**method) : FormatPlanText(**method);
    std::fputs(text.c_str(), out);
    if (!options.dot) PrintPlannedOnly(planned_only, out);
    if (options.audit && !options.dot) PrintAudit(options, rt, **method, out);
    return 0;
  }
  return Run(options, rt, **method, out, err);
}

}  // namespace ferry::cli
