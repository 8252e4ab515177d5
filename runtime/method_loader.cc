// Method loading, in phases. MethodImpl::Load runs them in order; each phase reads what the
// earlier ones decided and adds its own part of the loaded method. The phases share the state of
// one MethodLoader (runtime/internal/method_loader.h); each is defined in runtime/load/:
//
//   0. CheckTableMemory  the load's own tables (about 1 KiB per node) against     resolve_ops.cc
//                        host memory: per value and node first, then with the
//                        argument lists ResolveOps counts
//   1. ResolveOps        ops and backends by name; every value's layout in an     resolve_ops.cc
//                        all-host run
//   2. Place             the placement rules (loader/plan/placement.h):           place.cc
//                        devices, copies, buffers
//   3. ResolveLayouts    one TensorRef per planned buffer, in its own layout      place.cc
//   4. InitBackends      one delegate instance per delegate node, its contract    init_backends.cc
//                        checked
//   5. PlanArenas        per device: the arena's offsets and the constant         plan_arenas.cc
//                        region's size
//   6. CheckBudgets      every device's total against its capacity and the        check_budgets.cc
//                        caller's limits
//   7. Allocate          arenas (touched) and constant regions; pointers into     allocate.cc
//                        them
//   8. ResolveCopies     the copy manifest as executable copies                   materialize.cc
//   9. Materialize       load-time copies: constant replicas, state initial       materialize.cc
//                        data (a replica the program already holds for another
//                        method is shared, not made again)
//  10. BuildSteps        the step list Execute runs, with its synchronization     build_steps.cc
//  11. DescribeIo        the caller-facing description of inputs and outputs      build_steps.cc
//
// Nothing is allocated before phase 7 except what backends take in Init for their payloads, so
// a program whose declared sizes do not fit is refused before any of its memory is touched.
// Every resource acquired is owned by the MethodImpl under construction, which the caller
// destroys on error.
#include "ferry/runtime/internal/method_loader.h"

#include <algorithm>
#include <memory>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"

namespace ferry {
namespace internal {

absl::Status MethodLoader::Run() {
  const auto start = Clock::now();
  // With record_trace, each phase's span; the clock is read only then.
  auto phase = [&](const char* name, auto&& run) -> absl::Status {
    auto call = [&]() -> absl::Status {
      if constexpr (std::is_void_v<decltype(run())>) {
        run();
        return absl::OkStatus();
      } else {
        return run();
      }
    };
    if (!options_.record_trace) return call();
    LoadEvent e;
    e.name = absl::StrCat("phase: ", name);
    e.span.start_ns = NowNs();
    absl::Status s = call();
    e.span.end_ns = NowNs();
    impl_.plan_.load_events.push_back(std::move(e));
    return s;
  };
  FERRY_RETURN_IF_ERROR(phase("CheckTableMemory", [&] { return CheckTableMemory(0, 0); }));
  FERRY_RETURN_IF_ERROR(phase("ResolveOps", [&] { return ResolveOps(); }));
  FERRY_RETURN_IF_ERROR(phase("CheckTableMemory (arguments)",
                              [&] { return CheckTableMemory(list_entries_, payload_bytes_); }));
  FERRY_RETURN_IF_ERROR(phase("Place", [&] { return Place(); }));
  impl_.plan_.timings.placement_us = MicrosSince(start);
  const auto materialize_start = Clock::now();
  FERRY_RETURN_IF_ERROR(phase("ResolveLayouts", [&] { return ResolveLayouts(); }));
  FERRY_RETURN_IF_ERROR(phase("InitBackends", [&] { return InitBackends(); }));
  FERRY_RETURN_IF_ERROR(phase("PlanArenas", [&] { return PlanArenas(); }));
  FERRY_RETURN_IF_ERROR(phase("CheckBudgets", [&] { return CheckBudgets(); }));
  FERRY_RETURN_IF_ERROR(
      phase("Allocate (arenas and constant regions)", [&] { return Allocate(); }));
  FERRY_RETURN_IF_ERROR(phase("ResolveCopies", [&] { return ResolveCopies(); }));
  FERRY_RETURN_IF_ERROR(phase("Materialize (load-time copies)", [&] { return Materialize(); }));
  FERRY_RETURN_IF_ERROR(phase("BuildSteps", [&] { BuildSteps(); }));
  FERRY_RETURN_IF_ERROR(phase("DescribeIo", [&] { DescribeIo(); }));
  if (options_.record_trace) RecordTraceSteps();
  // A non-tensor input holds its traced value from load on (setting it only checks).
  impl_.input_set_.assign(m_.inputs.size(), false);
  for (size_t i = 0; i < m_.inputs.size(); ++i) {
    impl_.input_set_[i] = !m_.values[m_.inputs[i]].is_tensor();
  }
  impl_.input_ranges_.assign(m_.inputs.size(), CallerRange{});
  impl_.output_ranges_.assign(m_.outputs.size(), CallerRange{});
  impl_.range_scratch_.reserve(m_.inputs.size() + m_.outputs.size());
  impl_.plan_.timings.materialization_us = MicrosSince(materialize_start) - planning_us_;
  return absl::OkStatus();
}

void MethodLoader::RecordTraceSteps() {
  const PlacementPlan& p = plan();
  auto describe = [&](const Step& step) {
    TraceStep t;
    t.node = step.node;
    switch (step.kind) {
      case Step::Kind::kHost:
      case Step::Kind::kDelegate:
        t.kind = TraceStep::Kind::kNode;
        t.delegate = step.kind == Step::Kind::kDelegate;
        t.device = p.nodes[step.node].device;
        break;
      case Step::Kind::kCopy: {
        const CopyStep& c = p.copies[step.index];
        t.kind = TraceStep::Kind::kCopy;
        t.copy = step.index;
        t.device = c.direction == CopyDirection::kDeviceToHost ? c.src_device : c.dst_device;
        break;
      }
      case Step::Kind::kSync:
        t.kind = TraceStep::Kind::kSync;
        t.device = step.runtime->device();
        break;
    }
    return t;
  };
  impl_.trace_steps_.reserve(impl_.steps_.size() + impl_.final_syncs_.size());
  for (size_t i = 0; i < impl_.steps_.size(); ++i) {
    impl_.trace_steps_.push_back(describe(impl_.steps_[i]));
  }
  for (const Step& s : impl_.final_syncs_) impl_.trace_steps_.push_back(describe(s));
  impl_.trace_spans_.assign(impl_.trace_steps_.size(), TraceSpan{});

  // Device timers for the copies and delegate calls on devices that have them: marker 0 for the
  // call's start, then two per step.
  const size_t n = impl_.trace_steps_.size();
  impl_.step_clock_.assign(n, -1);
  impl_.step_marker_.assign(n, 0);
  std::vector<std::pair<Device, uint32_t>> markers;  // device, markers so far (with marker 0)
  for (size_t i = 0; i < impl_.steps_.size(); ++i) {
    const TraceStep& t = impl_.trace_steps_[i];
    if (t.kind == TraceStep::Kind::kSync || t.device.is_host()) continue;
    auto it = std::find_if(markers.begin(), markers.end(),
                           [&](const auto& m) { return m.first == t.device; });
    if (it == markers.end()) it = markers.insert(markers.end(), {t.device, 1});
    impl_.step_clock_[i] = static_cast<int32_t>(it - markers.begin());
    impl_.step_marker_[i] = it->second;
    it->second += 2;
  }
  std::vector<int32_t> clock_of(markers.size(), -1);
  for (size_t d = 0; d < markers.size(); ++d) {
    DeviceRuntime* runtime = rt_.devices().Find(markers[d].first);
    if (runtime == nullptr) continue;
    absl::StatusOr<std::unique_ptr<DeviceTimer>> timer = runtime->CreateTimer(markers[d].second);
    // No timer (a device in the host's order, or one that could not make one): host times.
    if (!timer.ok() || *timer == nullptr) continue;
    clock_of[d] = static_cast<int32_t>(impl_.device_clocks_.size());
    impl_.device_clocks_.push_back({*std::move(timer)});
  }
  for (int32_t& c : impl_.step_clock_) {
    if (c >= 0) c = clock_of[c];
  }
}

absl::StatusOr<std::unique_ptr<MethodImpl>> MethodImpl::Load(const Runtime& rt, const MethodDef& m,
                                                             const LoadOptions& options,
                                                             ProgramResidency* program) {
  std::unique_ptr<MethodImpl> impl(new MethodImpl());
  impl->runtime_ = &rt;
  impl->def_ = &m;
  MethodLoader loader(rt, m, options, program, *impl);
  FERRY_RETURN_IF_ERROR(loader.Run());
  return impl;
}

}  // namespace internal
}  // namespace ferry
