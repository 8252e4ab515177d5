// Load phases 2 and 3: the placement rules (loader/plan/placement.h), then one TensorRef per
// planned buffer in that buffer's own layout.

#include "ferry/base/status_macros.h"
#include "ferry/runtime/internal/method_loader.h"

namespace ferry {
namespace internal {

absl::Status MethodLoader::Place() {
  popt_.skip_h2d_for_method_inputs = options_.skip_h2d_for_method_inputs;
  popt_.skip_d2h_for_method_outputs = options_.skip_d2h_for_method_outputs;
  popt_.error_on_per_call_copies = options_.error_on_per_call_copies;
  popt_.device_map = options_.device_map.value_or(rt_.default_device_map());
  for (const Device& d : rt_.devices().devices()) {
    if (!d.is_host()) popt_.present_devices.push_back(d);
  }
  FERRY_ASSIGN_OR_RETURN(impl_.plan_.placement, PlaceMethod(pin_, popt_));
  std::vector<std::pair<int32_t, NodeEffects>>().swap(pin_.effects);  // placement's alone
  for (const auto& [declared, used] : plan().mapped_devices) label_map_[declared] = used;
  for (size_t n = 0; HasDelegates() && n < m_.nodes.size(); ++n) {
    if (backends_[n] != nullptr && !backends_[n]->SupportsDevice(plan().nodes[n].device.type)) {
      return absl::UnimplementedError(
          absl::StrCat(NodeContext(n), ": backend \"", m_.nodes[n].delegate().backend,
                       "\" does not run on ", DeviceLabel(plan().nodes[n].device, label_map_)));
    }
  }
  return absl::OkStatus();
}

absl::Status MethodLoader::ResolveLayouts() {
  const PlacementPlan& p = plan();
  const size_t nb = p.buffers.size();
  // Made in order, each once: no fill first (the table is the largest of a load).
  impl_.refs_.clear();
  impl_.refs_.reserve(nb);
  impl_.buffer_runtime_.assign(nb, nullptr);
  impl_.alias_offset_.assign(nb, 0);
  // Runs of buffers on one device (most of them) look its runtime up once.
  const Device* last_device = nullptr;
  DeviceRuntime* runtime = nullptr;
  size_t device_index = 0;  // into devices_
  for (size_t b = 0; b < nb; ++b) {
    const PlannedBuffer& buf = p.buffers[b];
    if (last_device == nullptr || buf.device != *last_device) {
      runtime = rt_.devices().Find(buf.device);
      if (runtime == nullptr) {
        return absl::InternalError(
            absl::StrCat(mctx_, ": device ", buf.device.ToString(), " has no runtime"));
      }
      last_device = &buf.device;
      device_index = NoteDevice(buf.device);
    }
    ++buffers_on_[device_index];
    impl_.buffer_runtime_[b] = runtime;
    if (buf.kind == BufferKind::kProgramData || buf.kind == BufferKind::kAlias) {
      data_or_alias_buffers_.push_back(static_cast<int32_t>(b));
    }
    if (buf.kind == BufferKind::kAlias) {
      if (buf.value < 0 || static_cast<size_t>(buf.value) >= natural_set_.size() ||
          !natural_set_[buf.value]) {
        return absl::InternalError(absl::StrCat(mctx_, ": planned buffer ", b,
                                                " is a view of value ", buf.value,
                                                ", which has no layout"));
      }
      TensorRef& ref = impl_.refs_.emplace_back();
      impl_.alias_offset_[b] =
          NaturalLayout(buf.value, ref) * static_cast<int64_t>(ref.element_size());
    } else if (buf.dim_order.empty() && m_.values[buf.value].meta.dim_order.empty()) {
      m_.values[buf.value].meta.FillRef(impl_.refs_.emplace_back());
    } else {
      TensorMeta meta = m_.values[buf.value].meta;
      meta.dim_order = buf.dim_order;
      meta.FillRef(impl_.refs_.emplace_back());
    }
  }
  // Delegates are the only nodes off the host.
  for (size_t n = 0; HasDelegates() && n < m_.nodes.size(); ++n) {
    if (backends_[n] != nullptr) NoteDevice(p.nodes[n].device);
  }
  // Per buffer, the buffer whose memory it is, its byte offset there, and the base it shares
  // memory and layout with. A plan makes every alias after its base, so one forward pass finds
  // them all (walking each alias's chain would cost a chain of N in-place writes N^2).
  memory_root_.resize(nb);
  root_offset_.resize(nb);
  same_layout_root_.resize(nb);
  for (size_t b = 0; b < nb; ++b) {
    const PlannedBuffer& buf = p.buffers[b];
    memory_root_[b] = same_layout_root_[b] = static_cast<int32_t>(b);
    root_offset_[b] = 0;
    if (buf.kind != BufferKind::kAlias) continue;
    const int32_t base = buf.alias_of;
    if (base < 0 || static_cast<size_t>(base) >= b) {
      return absl::InternalError(absl::StrCat(mctx_, ": planned buffer ", b, " aliases buffer ",
                                              base, ", which is not made before it"));
    }
    memory_root_[b] = memory_root_[base];
    root_offset_[b] = root_offset_[base] + impl_.alias_offset_[b];
    if (impl_.alias_offset_[b] == 0 && impl_.refs_[b].strides == impl_.refs_[base].strides &&
        impl_.refs_[b].sizes == impl_.refs_[base].sizes) {
      same_layout_root_[b] = same_layout_root_[base];
    }
  }
  // The all-host layouts are done with: their memory goes back for the phases after this one.
  absl::flat_hash_map<ValueId, InferredResult>().swap(odd_layouts_);
  LargeTable<uint8_t>().swap(natural_set_);
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ferry
