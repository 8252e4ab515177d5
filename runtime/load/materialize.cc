// Load phases 8 and 9: the copy manifest as executable copies, then the load-time copies
// (constant replicas, state initial data).

#include "ferry/base/status_macros.h"
#include "ferry/runtime/internal/method_loader.h"

namespace ferry {
namespace internal {

absl::Status MethodLoader::ResolveCopies() {
  const PlacementPlan& p = plan();
  impl_.copies_.resize(p.copies.size());
  for (size_t i = 0; i < p.copies.size(); ++i) {
    const CopyStep& c = p.copies[i];
    CopyExec& e = impl_.copies_[i];
    e.direction = c.direction;
    e.src_runtime = impl_.buffer_runtime_[c.src_buffer];
    e.dst_runtime = impl_.buffer_runtime_[c.dst_buffer];
    e.src = &impl_.refs_[c.src_buffer];
    e.dst = &impl_.refs_[c.dst_buffer];
    e.bytes = c.bytes;
    e.copy = static_cast<int32_t>(i);
    const PlannedBuffer& src = p.buffers[c.src_buffer];
    const PlannedBuffer& dst = p.buffers[c.dst_buffer];
    const bool same_layout =
        src.kind != BufferKind::kAlias
            ? src.dim_order == dst.dim_order
            : (pin_.LayoutOf(src.value).dense &&
               CanonicalDimOrder(pin_.LayoutOf(src.value).dim_order) == dst.dim_order);
    e.strided = c.converts_layout || !same_layout;
    if (!e.strided) continue;
    const TensorRef& s = *e.src;
    std::vector<int32_t> order = dst.dim_order;
    if (order.empty()) {
      for (int32_t d = 0; d < s.rank; ++d) order.push_back(d);
    }
    e.rank = s.rank;
    for (int32_t d = 0; d < s.rank; ++d) {
      e.sizes[d] = s.sizes[order[d]];
      e.strides[d] = s.strides[order[d]];
    }
    if (c.direction != CopyDirection::kHostToDevice && c.direction != CopyDirection::kHostToHost) {
      return absl::InternalError(absl::StrCat(mctx_, ": copy ", i, " (", c.reason,
                                              ") needs a layout conversion off the host"));
    }
  }
  return absl::OkStatus();
}

absl::Status MethodLoader::Materialize() {
  const PlacementPlan& p = plan();
  // Program data that calls read on the host too (a constant some host op reads in place) keeps
  // its pages, so that no call faults them back in; the rest may be dropped once copied.
  std::vector<bool> read_per_call;
  if (m_.mapping != nullptr && !p.load_copies.empty()) {
    read_per_call.assign(p.buffers.size(), false);
    auto mark = [&](int32_t b) {
      if (b >= 0) read_per_call[memory_root_[b]] = true;
    };
    for (const NodePlacement& placed : p.nodes) {
      for (int32_t b : placed.arg_buffers) mark(b);
    }
    for (const CopyStep& c : p.copies) {
      if (c.timing == CopyTiming::kPerCall) mark(c.src_buffer);
    }
    for (int32_t b : p.output_buffers) mark(b);
  }
  for (int32_t i : p.load_copies) {
    // A replica the program already holds is made.
    if (reused_buffer_[p.copies[i].dst_buffer]) continue;
    const int32_t src = p.copies[i].src_buffer;
    const bool droppable = m_.mapping != nullptr &&
                           p.buffers[src].kind == BufferKind::kProgramData && !read_per_call[src];
    const int64_t start = options_.record_trace ? NowNs() : 0;
    absl::Status s = RunLoadCopy(impl_.copies_[i], droppable ? m_.mapping : nullptr);
    if (options_.record_trace) {
      const CopyStep& c = p.copies[i];
      LoadEvent e;
      e.name = absl::StrCat("copy ", CopyDirectionName(c.direction), " \"", m_.values[c.value].name,
                            "\"");
      e.span = {start, NowNs()};
      e.device = c.direction == CopyDirection::kDeviceToHost ? c.src_device : c.dst_device;
      e.copy = i;
      impl_.plan_.load_events.push_back(std::move(e));
    }
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(mctx_, ": load-time copy ", i, " (",
                                                 p.copies[i].reason, "): ", s.message()));
    }
  }
  for (const DeviceMemory& dm : memory_) FERRY_RETURN_IF_ERROR(dm.runtime->Synchronize());
  // Made: later methods of the program may share them (each keeps its region alive).
  for (const auto& [b, key] : to_share_) {
    auto region = region_of_buffer_.find(b);
    if (region == region_of_buffer_.end()) {
      return absl::InternalError(
          absl::StrCat(mctx_, ": replica buffer ", b, " to share has no constant region"));
    }
    replicas_->Add(key, std::shared_ptr<void>(region->second, impl_.refs_[b].data));
  }
  for (const auto& [b, state] : states_made_) {
    program_->states.Add(m_.values[plan().buffers[b].value].name, state);
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ferry
