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

#include <memory>

#include "ferry/base/status_macros.h"

namespace ferry {
namespace internal {

absl::Status MethodLoader::Run() {
  const auto start = Clock::now();
  FERRY_RETURN_IF_ERROR(CheckTableMemory(0, 0));
  FERRY_RETURN_IF_ERROR(ResolveOps());
  FERRY_RETURN_IF_ERROR(CheckTableMemory(list_entries_, payload_bytes_));
  FERRY_RETURN_IF_ERROR(Place());
  impl_.plan_.timings.placement_us = MicrosSince(start);
  const auto materialize_start = Clock::now();
  FERRY_RETURN_IF_ERROR(ResolveLayouts());
  FERRY_RETURN_IF_ERROR(InitBackends());
  FERRY_RETURN_IF_ERROR(PlanArenas());
  FERRY_RETURN_IF_ERROR(CheckBudgets());
  FERRY_RETURN_IF_ERROR(Allocate());
  FERRY_RETURN_IF_ERROR(ResolveCopies());
  FERRY_RETURN_IF_ERROR(Materialize());
  BuildSteps();
  DescribeIo();
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
