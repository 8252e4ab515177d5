// A timeline of loads and calls as Chrome trace-event JSON, and a per-step profile, from what a
// method records with LoadOptions::record_trace (Method::trace_steps, Method::last_trace,
// MethodPlan::load_events).
//
//   LoadOptions options;
//   options.record_trace = true;
//   FERRY_ASSIGN_OR_RETURN(auto method, rt.LoadMethod(*program, "forward", options));
//   TraceRecorder trace;
//   trace.AddLoad(*method);
//   for (...) { FERRY_RETURN_IF_ERROR(method->Execute()); trace.AddCall(*method); }
//   FERRY_RETURN_IF_ERROR(trace.WriteFile("trace.json"));  // open in Perfetto or chrome://tracing
//
// The trace: one process per method ("method \"forward\""); in it a lane "load" (each load phase,
// and each load-time copy with its value, bytes and reason), a lane "calls" (one event per call),
// and one lane per device the method uses ("host", "sim:0", or "cuda:0 (as sim:0)" where the
// device map sent it elsewhere): a complete event per node executed (name: the node's; args:
// node index, op or backend), per copy (name: direction and value, e.g. "h2d \"x\""; args:
// value, bytes, source and destination devices, timing, reason) and per synchronization. A copy
// is on the lane of its device side (the destination of h2d and d2d, the source of d2h).
// Times are the host's steady clock. A copy or delegate call on a device with timers (CUDA's
// events, DeviceRuntime::CreateTimer) is timed on the device and placed on the host's clock at
// its call's start (args "clock": "device"); on other devices a step's span is from the host's
// call to its return, so an asynchronous copy or kernel shows its launch and a synchronization
// the wait (otherData.clock says so).
//
// A method is known by its address: each Method added must outlive the recorder's (and a
// StepProfile's) use.
// Memory: events are kept until written; AddCall stops adding once `max_events` are held
// (otherData.truncated then says how many calls were left out).
// Thread safety: none; one recorder per thread.
#ifndef FERRY_RUNTIME_TRACE_H_
#define FERRY_RUNTIME_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "ferry/runtime/method.h"

namespace ferry {

class TraceRecorder {
 public:
  explicit TraceRecorder(size_t max_events = size_t{1} << 21) : max_events_(max_events) {}

  // The load's events of `method` (none without record_trace).
  void AddLoad(const Method& method);
  // The steps of `method`'s last Execute (none without record_trace).
  void AddCall(const Method& method);

  size_t num_events() const { return events_.size(); }
  size_t calls_left_out() const { return calls_left_out_; }

  // The trace as JSON: {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}.
  std::string ToJson() const;
  // Writes ToJson() to `path`; an error names the file.
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Event {
    int32_t pid = 0;
    int32_t tid = 0;
    std::string name;
    const char* category = "";
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    std::string args;  // the body of a JSON object, without braces
  };
  struct Process {
    int32_t pid = 0;
    int64_t calls = 0;
    absl::flat_hash_map<std::string, int32_t> lanes;  // lane name -> tid
  };
  Process& ProcessOf(const Method& method);
  int32_t Lane(Process& process, const std::string& name);

  size_t max_events_;
  absl::flat_hash_map<const Method*, Process> processes_;
  std::vector<std::pair<int32_t, std::string>> process_names_;              // pid, name
  std::vector<std::pair<std::pair<int32_t, int32_t>, std::string>> lanes_;  // (pid, tid), name
  std::vector<Event> events_;
  size_t calls_left_out_ = 0;
};

// Where a call's time goes, step by step, over many calls (ferry bench --profile).
struct ProfileRow {
  std::string name;    // "node 3 (matmul)", "copy 1 h2d \"x\"", "synchronize sim:0"
  std::string kind;    // "node", "delegate", "copy", "sync"
  std::string device;  // the step's lane
  int64_t count = 0;
  double total_us = 0;
  double mean_us = 0;
  double share = 0;  // of the calls' total time, 0..1
};

class StepProfile {
 public:
  // Adds `method`'s last call (its steps must be those of earlier calls: one method per
  // profile).
  void Add(const Method& method);
  int64_t calls() const { return calls_; }
  // The total of the calls' spans (first step's start to last step's end), microseconds.
  double call_us() const { return call_ns_ / 1e3; }
  // One row per step that ran, by total time, largest first.
  std::vector<ProfileRow> Rows() const;

 private:
  const Method* method_ = nullptr;
  std::vector<int64_t> total_ns_;
  std::vector<int64_t> counts_;
  int64_t calls_ = 0;
  double call_ns_ = 0;
};

}  // namespace ferry

#endif  // FERRY_RUNTIME_TRACE_H_
