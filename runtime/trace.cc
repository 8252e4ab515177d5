#include "ferry/runtime/trace.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/base/text.h"

namespace ferry {
namespace {

std::string Json(absl::string_view text) { return JsonQuoted(text); }

// The device as the plan declares it ("cuda:0 (as sim:0)" when mapped), else its name.
std::string DeviceLabel(const Method& method, const Device& device) {
  for (const ArenaInfo& a : method.plan().arenas) {
    if (a.device == device) return a.device_label;
  }
  return device.ToString();
}

std::string StepName(const Method& method, const TraceStep& step) {
  const MethodDef& def = method.def();
  switch (step.kind) {
    case TraceStep::Kind::kNode:
      return absl::StrCat("node ", step.node, " (", def.nodes[step.node].name, ")");
    case TraceStep::Kind::kCopy: {
      const CopyStep& c = method.plan().placement.copies[step.copy];
      return absl::StrCat("copy ", step.copy, " ", CopyDirectionName(c.direction), " \"",
                          def.values[c.value].name, "\"");
    }
    case TraceStep::Kind::kSync:
      return absl::StrCat("synchronize ", step.device.ToString());
  }
  return "step";
}

const char* StepKind(const TraceStep& step) {
  switch (step.kind) {
    case TraceStep::Kind::kNode:
      return step.delegate ? "delegate" : "node";
    case TraceStep::Kind::kCopy:
      return "copy";
    case TraceStep::Kind::kSync:
      return "sync";
  }
  return "step";
}

std::string CopyArgs(const Method& method, int32_t index) {
  const CopyStep& c = method.plan().placement.copies[index];
  return absl::StrCat("\"copy\": ", index, ", \"direction\": \"", CopyDirectionName(c.direction),
                      "\", \"value\": ", Json(method.def().values[c.value].name),
                      ", \"bytes\": ", c.bytes,
                      ", \"from\": ", Json(DeviceLabel(method, c.src_device)),
                      ", \"to\": ", Json(DeviceLabel(method, c.dst_device)), ", \"timing\": \"",
                      CopyTimingName(c.timing), "\", \"reason\": ", Json(c.reason));
}

}  // namespace

TraceRecorder::Process& TraceRecorder::ProcessOf(const Method& method) {
  auto [it, added] = processes_.try_emplace(&method);
  if (added) {
    it->second.pid = static_cast<int32_t>(processes_.size());
    process_names_.emplace_back(it->second.pid, absl::StrCat("method \"", method.def().name, "\""));
    // The lanes in a fixed order: load, calls, then the method's devices, host first.
    Lane(it->second, "load");
    Lane(it->second, "calls");
    for (const ArenaInfo& a : method.plan().arenas) Lane(it->second, a.device_label);
  }
  return it->second;
}

int32_t TraceRecorder::Lane(Process& process, const std::string& name) {
  auto [it, added] = process.lanes.try_emplace(name, static_cast<int32_t>(process.lanes.size()));
  if (added) lanes_.push_back({{process.pid, it->second}, name});
  return it->second;
}

void TraceRecorder::AddLoad(const Method& method) {
  const std::vector<LoadEvent>& load = method.plan().load_events;
  if (load.empty()) return;
  Process& process = ProcessOf(method);
  const int32_t lane = Lane(process, "load");
  for (const LoadEvent& e : load) {
    Event event;
    event.pid = process.pid;
    event.tid = lane;
    event.name = e.name;
    event.category = e.copy >= 0 ? "load copy" : "load phase";
    event.start_ns = e.span.start_ns;
    event.end_ns = e.span.end_ns;
    if (e.copy >= 0) event.args = CopyArgs(method, e.copy);
    events_.push_back(std::move(event));
  }
}

void TraceRecorder::AddCall(const Method& method) {
  const absl::Span<const TraceSpan> spans = method.last_trace();
  if (spans.empty()) return;
  if (events_.size() + spans.size() + 1 > max_events_) {
    ++calls_left_out_;
    return;
  }
  Process& process = ProcessOf(method);
  const absl::Span<const TraceStep> steps = method.trace_steps();
  Event call;
  call.pid = process.pid;
  call.tid = Lane(process, "calls");
  call.name = absl::StrCat("call ", process.calls);
  call.category = "call";
  call.start_ns = spans.front().start_ns;
  call.end_ns = spans.back().end_ns;
  for (const TraceSpan& span : spans) {  // device-timed steps may lie outside the host's span
    call.start_ns = std::min(call.start_ns, span.start_ns);
    call.end_ns = std::max(call.end_ns, span.end_ns);
  }
  call.args = absl::StrCat("\"call\": ", process.calls, ", \"steps\": ", spans.size());
  events_.push_back(std::move(call));
  for (size_t i = 0; i < spans.size(); ++i) {
    const TraceStep& step = steps[i];
    Event event;
    event.pid = process.pid;
    event.tid = Lane(process, DeviceLabel(method, step.device));
    event.name = StepName(method, step);
    event.category = StepKind(step);
    event.start_ns = spans[i].start_ns;
    event.end_ns = spans[i].end_ns;
    if (step.kind == TraceStep::Kind::kCopy) {
      event.args = CopyArgs(method, step.copy);
    } else if (step.kind == TraceStep::Kind::kNode) {
      const NodeDef& node = method.def().nodes[step.node];
      event.args =
          absl::StrCat("\"node\": ", step.node, ", ",
                       node.kind == NodeKind::kDelegate ? "\"backend\": " : "\"op\": ",
                       Json(node.kind == NodeKind::kDelegate ? node.delegate().backend : node.op));
    }
    absl::StrAppend(&event.args, event.args.empty() ? "" : ", ", "\"call\": ", process.calls,
                    ", \"clock\": \"", spans[i].device_clock ? "device" : "host", "\"");
    events_.push_back(std::move(event));
  }
  ++process.calls;
}

std::string TraceRecorder::ToJson() const {
  int64_t origin = 0;
  if (!events_.empty()) {
    origin = std::min_element(events_.begin(), events_.end(), [](const Event& a, const Event& b) {
               return a.start_ns < b.start_ns;
             })->start_ns;
  }
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  auto next = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const auto& [pid, name] : process_names_) {
    next();
    absl::StrAppend(&out, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": ", pid,
                    ", \"args\": {\"name\": ", Json(name), "}}");
  }
  for (const auto& [ids, name] : lanes_) {
    next();
    absl::StrAppend(&out, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": ", ids.first,
                    ", \"tid\": ", ids.second, ", \"args\": {\"name\": ", Json(name), "}}");
    next();
    absl::StrAppend(&out, "{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": ", ids.first,
                    ", \"tid\": ", ids.second, ", \"args\": {\"sort_index\": ", ids.second, "}}");
  }
  for (const Event& e : events_) {
    next();
    absl::StrAppendFormat(&out,
                          "{\"ph\": \"X\", \"name\": %s, \"cat\": \"%s\", \"pid\": %d, \"tid\": "
                          "%d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {%s}}",
                          Json(e.name), e.category, e.pid, e.tid, (e.start_ns - origin) / 1e3,
                          std::max<int64_t>(e.end_ns - e.start_ns, 0) / 1e3, e.args);
  }
  absl::StrAppend(
      &out,
      "\n], \"displayTimeUnit\": \"ns\", \"otherData\": {\"producer\": \"ferry\", \"clock\": "
      "\"host steady clock; a copy or delegate call on a device with timers (CUDA events; args "
      "clock: device) is timed on the device, placed on the host clock at its call's start; "
      "other device steps span the host's call (an asynchronous copy or kernel shows its "
      "launch, a synchronization its wait)\", \"events\": ",
      events_.size(), ", \"truncated\": ", calls_left_out_ > 0 ? "true" : "false",
      ", \"calls_left_out\": ", calls_left_out_, "}}\n");
  return out;
}

absl::Status TraceRecorder::WriteFile(const std::string& path) const {
  const std::string json = ToJson();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write the trace to \"", path, "\""));
  }
  const size_t written = std::fwrite(json.data(), 1, json.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (written != json.size() || !closed) {
    return absl::DataLossError(absl::StrCat("writing the trace to \"", path, "\" failed"));
  }
  return absl::OkStatus();
}

void StepProfile::Add(const Method& method) {
  const absl::Span<const TraceSpan> spans = method.last_trace();
  if (spans.empty()) return;
  if (method_ == nullptr) {
    method_ = &method;
    total_ns_.assign(method.trace_steps().size(), 0);
    counts_.assign(method.trace_steps().size(), 0);
  }
  for (size_t i = 0; i < spans.size() && i < total_ns_.size(); ++i) {
    total_ns_[i] += spans[i].end_ns - spans[i].start_ns;
    ++counts_[i];
  }
  call_ns_ += static_cast<double>(spans.back().end_ns - spans.front().start_ns);
  ++calls_;
}

std::vector<ProfileRow> StepProfile::Rows() const {
  std::vector<ProfileRow> rows;
  if (method_ == nullptr) return rows;
  const absl::Span<const TraceStep> steps = method_->trace_steps();
  for (size_t i = 0; i < total_ns_.size(); ++i) {
    if (counts_[i] == 0) continue;
    ProfileRow r;
    r.name = StepName(*method_, steps[i]);
    r.kind = StepKind(steps[i]);
    r.device = DeviceLabel(*method_, steps[i].device);
    r.count = counts_[i];
    r.total_us = static_cast<double>(total_ns_[i]) / 1e3;
    r.mean_us = r.total_us / static_cast<double>(r.count);
    r.share = call_ns_ > 0 ? static_cast<double>(total_ns_[i]) / call_ns_ : 0;
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) {
    return a.total_us > b.total_us;
  });
  return rows;
}

}  // namespace ferry
