// `ferry bench`: the methods named, loaded together and measured one after the other, as a table
// or JSON.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/runtime/cli/internal.h"

namespace ferry::cli {
namespace {

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
  // --profile: the measured calls' steps by total time.
  std::vector<ProfileRow> profile;
  double profiled_call_us = 0;
};

absl::StatusOr<BenchFigures> Measure(const Options& options, const Runtime& rt, Method& method,
                                     double load_us, TraceRecorder& trace, std::FILE* err) {
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
  StepProfile profile;
  auto progress = Clock::now();
  for (int c = 0; c < f.calls; ++c) {
    auto start = Clock::now();
    FERRY_RETURN_IF_ERROR(method.Execute());
    times.push_back(MicrosSince(start));
    if (!options.trace_path.empty()) trace.AddCall(method);
    if (options.profile) profile.Add(method);
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
  if (options.profile) {
    f.profile = profile.Rows();
    f.profiled_call_us = profile.call_us();
  }
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

// ",\n  \"profile\": {...}" with --profile, else "".
std::string ProfileJson(const BenchFigures& f, absl::string_view indent) {
  if (f.profile.empty()) return "";
  std::vector<std::string> rows;
  for (const ProfileRow& r : f.profile) {
    rows.push_back(absl::StrFormat(
        "%s  {\"step\": %s, \"kind\": \"%s\", \"device\": %s, \"count\": %d, \"total_us\": %.3f, "
        "\"mean_us\": %.3f, \"share\": %.4f}",
        indent, JsonString(r.name), r.kind, JsonString(r.device), r.count, r.total_us, r.mean_us,
        r.share));
  }
  return absl::StrFormat(",\n%s\"profile\": {\"calls\": %d, \"call_us\": %.3f, \"steps\": [\n%s]}",
                         indent, f.calls, f.profiled_call_us, absl::StrJoin(rows, ",\n"));
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
      "%s\"arenas\": [%s]%s",
      JsonString(f.method), f.nodes, f.calls, indent, f.load_us + verify_us, verify_us,
      t.placement_us, t.planning_us, t.materialization_us, indent, f.min, f.median, f.p99, indent,
      f.manifest_copies, f.copies_per_call, f.constant_and_state_copies, indent, f.manifest_bytes,
      f.bytes_per_call, indent, f.agree ? "true" : "false", indent, f.constant_bytes, indent,
      f.shared_constant_bytes, indent, f.shared_state_bytes, indent,
      options.runtime.sim.guard ? "true" : "false", indent, arenas, ProfileJson(f, indent));
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
  absl::FPrintF(out,
                "  load             %10.1f us  (verify %.1f, placement %.1f, planning %.1f, "
                "materialization %.1f)\n",
                f.load_us + verify_us, verify_us, t.placement_us, t.planning_us,
                t.materialization_us);
  absl::FPrintF(out, "  latency          %10.2f us min, %.2f us median, %.2f us p99\n", f.min,
                f.median, f.p99);
  absl::FPrintF(out,
                "  copies per call  %10d in the manifest (%d of constants and state), %.2f "
                "counted by devices\n",
                f.manifest_copies, f.constant_and_state_copies, f.copies_per_call);
  absl::FPrintF(out, "  bytes per call   %10d in the manifest, %.1f counted by devices%s\n",
                f.manifest_bytes, f.bytes_per_call, f.agree ? "" : "  (MISMATCH)");
  absl::FPrintF(out,
                "  constants        %10d bytes materialized at load, %d shared with the "
                "program's other methods\n",
                f.constant_bytes, f.shared_constant_bytes);
  for (const ArenaInfo& a : f.arenas) {
    double ratio = a.lower_bound == 0 ? 1.0 : static_cast<double>(a.arena_bytes) / a.lower_bound;
    absl::FPrintF(out, "  arena %-10s %10d bytes, lower bound %d (%.3fx), constants %d\n",
                  a.device.ToString(), a.arena_bytes, a.lower_bound, ratio, a.constant_bytes);
  }
  if (f.profile.empty()) return;
  absl::FPrintF(out,
                "  profile: %d calls, %.1f us in their steps; each step by total time (the clock "
                "is read around every step, so the calls run a little slower than above)\n",
                f.calls, f.profiled_call_us);
  size_t width = 6;
  for (const ProfileRow& r : f.profile) width = std::max(width, r.device.size());
  absl::FPrintF(out, "    %10s %7s %7s %10s  %-*s  %s\n", "total us", "share", "count", "mean us",
                width, "device", "step");
  for (const ProfileRow& r : f.profile) {
    absl::FPrintF(out, "    %10.1f %6.1f%% %7d %10.3f  %-*s  %s\n", r.total_us, 100 * r.share,
                  r.count, r.mean_us, width, r.device, r.name);
  }
}

}  // namespace

// `ferry bench`: the methods named (one, or every method of the program), loaded together
// (Runtime::LoadProgram) and measured one after the other; then the program's device memory.
int Bench(const Options& options, const Runtime& rt, const Program& program,
          const std::vector<std::string>& names, double verify_us, std::FILE* out, std::FILE* err) {
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(program);
  std::vector<std::unique_ptr<Method>> methods;
  std::vector<BenchFigures> figures;
  TraceRecorder trace;
  for (const std::string& name : names) {
    auto load_start = Clock::now();
    absl::StatusOr<std::unique_ptr<Method>> method = loaded->LoadMethod(name, options.load);
    const double load_us = MicrosSince(load_start);
    if (!method.ok()) return Fail(err, method.status());
    trace.AddLoad(**method);
    absl::StatusOr<BenchFigures> f = Measure(options, rt, **method, load_us, trace, err);
    if (!f.ok()) return Fail(err, f.status());
    figures.push_back(*std::move(f));
    methods.push_back(*std::move(method));
  }
  const bool agree =
      std::all_of(figures.begin(), figures.end(), [](const BenchFigures& f) { return f.agree; });
  if (!options.trace_path.empty()) {
    if (absl::Status s = WriteTrace(options, trace, err); !s.ok()) return Fail(err, s);
  }
  const std::string replicas = JsonDeviceBytes(loaded->replica_bytes());
  const std::string states = JsonDeviceBytes(loaded->shared_state_bytes());
  if (options.json && names.size() == 1) {
    // One method: its object, with the program's device memory beside it.
    absl::FPrintF(out,
                  "{\"program\": %s, %s,\n \"program_replica_bytes\": %s,\n "
                  "\"program_shared_state_bytes\": %s}\n",
                  JsonString(options.program), MethodJson(options, figures[0], verify_us, " "),
                  replicas, states);
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
                  JsonString(options.program), verify_us, made, replicas, states,
                  agree ? "true" : "false", absl::StrJoin(objects, ",\n"));
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

}  // namespace ferry::cli
