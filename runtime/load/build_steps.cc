// Load phases 10 and 11: the step list Execute runs, with the synchronization it needs, and the
// caller-facing description of inputs and outputs.

#include <algorithm>

#include "ferry/runtime/internal/method_loader.h"

namespace ferry {
namespace internal {

void MethodLoader::BuildSteps() {
  const PlacementPlan& p = plan();
  std::vector<DeviceRuntime*> pending;
  auto add_pending = [&](DeviceRuntime* r) {
    if (r != nullptr && !r->device().is_host() &&
        std::find(pending.begin(), pending.end(), r) == pending.end()) {
      pending.push_back(r);
    }
  };
  auto sync_all = [&](auto& out, int32_t node) {
    for (DeviceRuntime* r : pending) {
      Step s;
      s.kind = Step::Kind::kSync;
      s.runtime = r;
      s.node = node;
      out.push_back(s);
    }
    pending.clear();
  };
  std::vector<OpArg> args;          // scratch, reused per node
  std::vector<ViewFixup> views;     // scratch
  std::vector<TensorRef*> results;  // scratch
  impl_.steps_.reserve(p.schedule.size());
  impl_.host_tables_.Reserve(host_steps_, host_args_, host_results_);
  for (const ScheduleStep& ss : p.schedule) {
    if (ss.kind == ScheduleStep::Kind::kCopy) {
      const CopyExec& e = impl_.copies_[ss.index];
      if (e.direction == CopyDirection::kDeviceToDevice && e.src_runtime != e.dst_runtime &&
          std::find(pending.begin(), pending.end(), e.src_runtime) != pending.end()) {
        Step s;
        s.kind = Step::Kind::kSync;
        s.runtime = e.src_runtime;
        impl_.steps_.push_back(s);
      }
      Step s;
      s.kind = Step::Kind::kCopy;
      s.index = ss.index;
      s.node = p.copies[ss.index].node;
      impl_.steps_.push_back(s);
      add_pending(e.src_runtime);
      add_pending(e.dst_runtime);
      continue;
    }
    const int32_t n = ss.index;
    const NodeDef& node = m_.nodes[n];  // for scalar arguments and delegates only
    const NodePlacement& placed = p.nodes[n];
    if (placed.device.is_host()) sync_all(impl_.steps_, n);
    Step::Kind kind;
    int32_t index;
    if (schemas_[n] != nullptr) {
      // The placement has a buffer (or -1, a scalar) per argument and per result, so that the
      // node itself is read only for scalars: on a large method its table is out of cache.
      const size_t num_args = placed.arg_buffers.size();
      args.assign(num_args, OpArg{});
      for (size_t a = 0; a < num_args; ++a) {
        if (placed.arg_buffers[a] >= 0) {
          args[a].tensor = &impl_.refs_[placed.arg_buffers[a]];
        } else {
          args[a].scalar = &m_.values[node.args[a]].scalar;
        }
      }
      results.clear();
      views.clear();
      for (const int32_t b : placed.result_buffers) {
        results.push_back(&impl_.refs_[b]);
        if (memory_root_[b] != b) {  // an alias (its memory is its base's)
          views.push_back(
              {&impl_.refs_[b], &impl_.refs_[p.buffers[b].alias_of], impl_.alias_offset_[b]});
        }
      }
      kind = Step::Kind::kHost;
      index = static_cast<int32_t>(impl_.host_tables_.Add(*schemas_[n], args, results, views));
    } else {
      DelegateExec d;
      d.instance = impl_.instances_[instance_of_node_[n]].get();
      d.scope = placed.device.is_host() ? nullptr : rt_.devices().Find(placed.device);
      d.args_begin = impl_.delegate_refs_.size();
      for (size_t a = 0; a < node.args.size(); ++a) {
        impl_.delegate_refs_.push_back(
            placed.arg_buffers[a] >= 0 ? &impl_.refs_[placed.arg_buffers[a]] : nullptr);
      }
      d.num_args = node.args.size();
      d.results_begin = impl_.delegate_refs_.size();
      for (int32_t b : placed.result_buffers) impl_.delegate_refs_.push_back(&impl_.refs_[b]);
      d.num_results = placed.result_buffers.size();
      d.scratch = scratch_[instance_of_node_[n]];
      kind = Step::Kind::kDelegate;
      index = static_cast<int32_t>(impl_.delegates_.size());
      impl_.delegates_.push_back(d);
      add_pending(d.scope);
    }
    // Filled in place (see HostStepTables::Add).
    Step& s = impl_.steps_.emplace_back();
    s.kind = kind;
    s.node = n;
    s.index = index;
  }
  sync_all(impl_.final_syncs_, -1);
  impl_.host_tables_.Finalize();
}

void MethodLoader::DescribeIo() {
  const PlacementPlan& p = plan();
  auto describe = [&](ValueId v, const Device& device) {
    const ValueDef& value = m_.values[v];
    return IoInfo{value.name,
                  value.meta.dtype,
                  {value.meta.sizes.begin(), value.meta.sizes.end()},
                  value.is_tensor() ? value.meta.ByteSize().value_or(0) : 0,
                  device,
                  DeviceLabel(device, label_map_),
                  value.is_tensor() ? nullptr : &value.scalar};
  };
  for (size_t i = 0; i < m_.inputs.size(); ++i) {
    impl_.plan_.inputs.push_back(describe(m_.inputs[i], p.input_device(i)));
  }
  for (size_t i = 0; i < m_.outputs.size(); ++i) {
    impl_.plan_.outputs.push_back(describe(m_.outputs[i], p.output_device(i)));
  }
  // An in-place result returned as an output shares its base's memory and layout: a caller's
  // buffer bound to the output replaces the base's memory. Found here, not per SetOutputBuffer.
  impl_.output_targets_.reserve(m_.outputs.size());
  for (int32_t b : p.output_buffers) {
    impl_.output_targets_.push_back(b < 0 ? -1 : same_layout_root_[b]);
  }
}

}  // namespace internal
}  // namespace ferry
