// Load phase 7: arenas (touched at load, never during a call) and constant regions, and the
// pointers into them.

#include <cstring>
#include <memory>
#include <utility>

#include "ferry/base/sanitizers.h"
#include "ferry/base/status_macros.h"
#include "ferry/runtime/internal/method_loader.h"

namespace ferry {
namespace internal {

absl::Status MethodLoader::Allocate() {
  scratch_.assign(impl_.instances_.size(), nullptr);
  for (const DeviceMemory& dm : memory_) {
    char* base = nullptr;
    if (dm.pinned) {
      FERRY_ASSIGN_OR_RETURN(void* pinned, pinning_->AllocatePinnedHost(dm.plan.arena_size));
      impl_.pinned_arenas_.emplace_back(pinning_, pinned);
      std::memset(pinned, 0, dm.plan.arena_size);
      base = static_cast<char*>(pinned);
    } else {
      FERRY_ASSIGN_OR_RETURN(
          DeviceBuffer arena,
          DeviceBuffer::Allocate(*dm.runtime, dm.plan.arena_size, kArenaAlignment));
      FERRY_RETURN_IF_ERROR(arena.Touch());
      base = static_cast<char*>(arena.data());
      impl_.arenas_.push_back(std::move(arena));
      if (kAddressSanitizer && dm.runtime->uses_host_memory()) {
        // Under ASan, a kernel that reads or writes past its value into the arena's gaps or the
        // value's alignment slack is reported (DeviceBuffer unpoisons the arena when freed).
        PoisonMemory(base, dm.plan.arena_size);
        for (size_t i = 0; i < dm.requests.size(); ++i) {
          UnpoisonMemory(base + dm.plan.offsets[i], dm.requests[i].size);
        }
      }
    }
    for (size_t i = 0; i < dm.requests.size(); ++i) {
      if (dm.owners[i] >= 0) {
        impl_.refs_[dm.owners[i]].data = base + dm.plan.offsets[i];
      } else {
        scratch_[-dm.owners[i] - 1] = base + dm.plan.offsets[i];
      }
    }
    FERRY_ASSIGN_OR_RETURN(DeviceBuffer constants,
                           DeviceBuffer::Allocate(*dm.runtime, dm.constant_bytes, kArenaAlignment));
    auto region = std::make_shared<DeviceBuffer>(std::move(constants));
    char* cbase = static_cast<char*>(region->data());
    for (const auto& [b, offset] : dm.replicas) {
      impl_.refs_[b].data = cbase + offset;
      region_of_buffer_[b] = region;
    }
    impl_.constant_regions_.push_back(std::move(region));
  }
  for (auto& [b, replica] : reused_) {
    impl_.refs_[b].data = replica.get();
    impl_.shared_replicas_.push_back(std::move(replica));
  }
  for (auto& [b, state] : states_made_) {
    DeviceRuntime* runtime = impl_.buffer_runtime_[b];
    FERRY_ASSIGN_OR_RETURN(state->buffer,
                           DeviceBuffer::Allocate(*runtime, state->bytes, kArenaAlignment));
    impl_.refs_[b].data = state->buffer.data();
    impl_.shared_states_.push_back(state);
  }
  for (auto& [b, state] : states_reused_) {
    impl_.refs_[b].data = state->buffer.data();
    impl_.shared_states_.push_back(std::move(state));
  }
  const PlacementPlan& p = plan();
  for (const int32_t b : data_or_alias_buffers_) {  // in buffer order: bases before their views
    const PlannedBuffer& buf = p.buffers[b];
    if (buf.kind == BufferKind::kProgramData) {
      impl_.refs_[b].data = const_cast<uint8_t*>(m_.values[buf.value].data.data());
    } else if (buf.kind == BufferKind::kAlias && impl_.refs_[buf.alias_of].data != nullptr) {
      // Views of constants are needed at load (their replicas are made from them).
      impl_.refs_[b].data =
          static_cast<char*>(impl_.refs_[buf.alias_of].data) + impl_.alias_offset_[b];
    }
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ferry
