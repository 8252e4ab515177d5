// Load phase 5: per device, the arena's offsets from buffer lifetimes, the constant region's
// size, and the shared states and replicas the program already holds.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "ferry/base/status_macros.h"
#include "ferry/runtime/internal/method_loader.h"

namespace ferry {
namespace internal {

absl::Status MethodLoader::PlanSharedState(int32_t b, DeviceMemory& dm) {
  const PlannedBuffer& buf = plan().buffers[b];
  const ValueDef& value = m_.values[buf.value];
  std::shared_ptr<SharedState> state = program_->states.Find(value.name);
  if (state == nullptr) {
    state = std::make_shared<SharedState>();
    state->method = m_.name;
    state->device = buf.device;
    state->dtype = value.meta.dtype;
    state->sizes = value.meta.sizes;
    state->dim_order = buf.dim_order;
    state->bytes = buf.bytes;
    dm.new_state_bytes = SaturatingAdd(dm.new_state_bytes, buf.bytes);
    dm.shared_state_bytes = SaturatingAdd(dm.shared_state_bytes, buf.bytes);
    states_made_.emplace_back(b, std::move(state));
    return absl::OkStatus();
  }
  const std::string what = absl::StrCat(mctx_, ": shared state \"", value.name, "\"");
  if (state->device != buf.device) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " lives on ", DeviceLabel(buf.device, label_map_),
                     " where this method writes or reads it, but method \"", state->method,
                     "\" placed it on ", state->device.ToString(),
                     "; a shared state has one home device, so every method must place it there"));
  }
  if (state->dtype != value.meta.dtype || state->sizes != value.meta.sizes ||
      state->dim_order != buf.dim_order) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", SpecString(value.meta.dtype, value.meta.sizes), " here but ",
        SpecString(state->dtype, state->sizes), " in method \"", state->method,
        "\" (or in another layout); methods that share a state must declare it alike"));
  }
  dm.shared_state_bytes = SaturatingAdd(dm.shared_state_bytes, buf.bytes);
  reused_buffer_[b] = true;  // its content is the program's: no initial copy
  states_reused_.emplace_back(b, std::move(state));
  return absl::OkStatus();
}

std::optional<ReplicaKey> MethodLoader::ReplicaKeyOf(
    int32_t b, const std::vector<int32_t>& load_copy_into) const {
  const PlacementPlan& p = plan();
  if (replicas_ == nullptr || load_copy_into[b] < 0) return std::nullopt;
  const CopyStep& c = p.copies[load_copy_into[b]];
  // Only replicas of program data are shared: follow the source's views to the constant.
  const int32_t root = memory_root_[c.src_buffer];
  const int64_t offset = root_offset_[c.src_buffer];
  if (p.buffers[root].kind != BufferKind::kProgramData) return std::nullopt;
  const TensorRef& src = impl_.refs_[c.src_buffer];
  ReplicaKey key;
  key.source = m_.values[p.buffers[root].value].data.data() + offset;
  key.dtype = src.dtype;
  key.rank = src.rank;
  key.sizes = src.sizes;
  key.strides = src.strides;
  key.device = p.buffers[b].device;
  key.dim_order = p.buffers[b].dim_order;
  key.bytes = p.buffers[b].bytes;
  key.converts = c.converts_layout;
  return key;
}

absl::Status MethodLoader::PlanArenas() {
  const PlacementPlan& p = plan();
  const size_t nn = m_.nodes.size();
  // Schedule positions of nodes, for delegates' scratch: a method of host ops has none.
  const bool any_delegate = HasDelegates();
  std::vector<int32_t> node_position;
  if (any_delegate) {
    node_position.assign(nn, 0);
    for (size_t s = 0; s < p.schedule.size(); ++s) {
      if (p.schedule[s].kind == ScheduleStep::Kind::kNode) {
        node_position[p.schedule[s].index] = static_cast<int32_t>(s);
      }
    }
  }
  const int32_t end = static_cast<int32_t>(p.schedule.size());
  // The host, then the plan's other devices sorted (PlacementPlan::devices, gathered by
  // ResolveLayouts without another walk of the buffers and nodes).
  std::vector<Device> devices = {Device::Host()};
  std::vector<Device> others = devices_;
  others.erase(std::remove(others.begin(), others.end(), Device::Host()), others.end());
  std::sort(others.begin(), others.end());
  devices.insert(devices.end(), others.begin(), others.end());
  // The host side of every copy to a device that has pinned host memory lives there, so the
  // copies run asynchronously on the device's stream instead of being staged.
  DeviceRuntime* pinning = nullptr;
  for (const Device& d : devices) {
    DeviceRuntime* runtime = rt_.devices().Find(d);
    if (pinning == nullptr && runtime->has_pinned_host_memory()) pinning = runtime;
  }
  // The load-time copy that makes each replica, to tell what it is made from.
  std::vector<int32_t> load_copy_into;  // only replicas (made by load copies) look it up
  if (!p.load_copies.empty()) load_copy_into.assign(p.buffers.size(), -1);
  for (int32_t i : p.load_copies) load_copy_into[p.copies[i].dst_buffer] = i;
  reused_buffer_.assign(p.buffers.size(), false);
  for (const Device& device : devices) {
    const auto device_planning_start = Clock::now();
    DeviceMemory& dm = memory_.emplace_back();
    dm.device = device;
    dm.runtime = rt_.devices().Find(device);
    size_t shared_bytes = 0;  // replicas the program already holds here
    // At most every buffer of the device: ResolveLayouts counted them.
    const size_t device_buffers = BuffersOn(device);
    dm.requests.reserve(device_buffers);
    dm.owners.reserve(device_buffers);
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const PlannedBuffer& buf = p.buffers[b];
      if (buf.device != device || buf.bytes == 0) continue;
      if (buf.kind == BufferKind::kState && program_ != nullptr && m_.values[buf.value].shared) {
        FERRY_RETURN_IF_ERROR(PlanSharedState(static_cast<int32_t>(b), dm));
        continue;
      }
      if (buf.kind == BufferKind::kArena || buf.kind == BufferKind::kState) {
        BufferRequest req;
        req.size = buf.bytes;
        req.alignment = kArenaAlignment;
        req.first_use = buf.first_step >= 0 ? buf.first_step : 0;
        req.last_use = buf.last_step >= 0 ? buf.last_step : end;
        dm.requests.push_back(req);
        dm.owners.push_back(static_cast<int32_t>(b));
      } else if (buf.kind == BufferKind::kConstantReplica) {
        std::optional<ReplicaKey> key = ReplicaKeyOf(static_cast<int32_t>(b), load_copy_into);
        if (key.has_value()) {
          if (std::shared_ptr<void> replica = replicas_->Find(*key)) {
            reused_.emplace_back(static_cast<int32_t>(b), std::move(replica));
            reused_buffer_[b] = true;
            shared_bytes += buf.bytes;
            continue;
          }
          to_share_.emplace_back(static_cast<int32_t>(b), *std::move(key));
        }
        size_t offset = 0;
        if (!RoundUp(dm.constant_bytes, kArenaAlignment, &offset) ||
            __builtin_add_overflow(offset, buf.bytes, &dm.constant_bytes)) {
          return absl::ResourceExhaustedError(absl::StrCat(mctx_, ": the constant replicas on ",
                                                           device.ToString(), " overflow size_t"));
        }
        dm.replicas.emplace_back(static_cast<int32_t>(b), offset);
      }
    }
    for (size_t n = 0; any_delegate && n < nn; ++n) {
      if (instance_of_node_[n] < 0 || p.nodes[n].device != device) continue;
      const size_t bytes = impl_.instances_[instance_of_node_[n]]->scratch_bytes();
      if (bytes == 0) continue;
      dm.requests.push_back({bytes, kArenaAlignment, node_position[n], node_position[n]});
      dm.owners.push_back(-(instance_of_node_[n] + 1));
    }
    FERRY_ASSIGN_OR_RETURN(dm.plan, PlanMemory(dm.requests));
    dm.pinned = device.is_host() && pinning != nullptr && dm.plan.arena_size > 0;
    planning_us_ += MicrosSince(device_planning_start);
    ArenaInfo info;
    info.device = device;
    info.device_label = DeviceLabel(device, label_map_);
    info.arena_bytes = dm.plan.arena_size;
    info.lower_bound = dm.plan.lower_bound;
    info.constant_bytes = dm.constant_bytes;
    info.shared_constant_bytes = shared_bytes;
    info.shared_state_bytes = dm.shared_state_bytes;
    impl_.plan_.arenas.push_back(info);
  }
  pinning_ = pinning;
  impl_.plan_.timings.planning_us = planning_us_;
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ferry
