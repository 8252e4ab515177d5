// Load phase 6: every device's planned total against its capacity and the caller's limits,
// before anything is allocated.

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/runtime/internal/method_loader.h"

namespace ferry {
namespace internal {

absl::Status MethodLoader::BudgetError(const DeviceMemory& dm, size_t need, size_t have,
                                       absl::string_view what, bool host_memory) const {
  // The largest values planned there, so the caller knows what to shrink.
  std::vector<std::pair<size_t, int32_t>> largest;
  const PlacementPlan& p = plan();
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const PlannedBuffer& buf = p.buffers[b];
    if (buf.bytes == 0) continue;
    const bool there =
        host_memory ? rt_.devices().Find(buf.device)->uses_host_memory() : buf.device == dm.device;
    if (there) largest.emplace_back(buf.bytes, static_cast<int32_t>(b));
  }
  const size_t shown = std::min<size_t>(largest.size(), 3);
  std::partial_sort(largest.begin(), largest.begin() + shown, largest.end(),
                    [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::string> names;
  for (size_t i = 0; i < shown; ++i) {
    const PlannedBuffer& buf = p.buffers[largest[i].second];
    names.push_back(absl::StrCat("\"", m_.values[buf.value].name, "\" (", BufferKindName(buf.kind),
                                 " on ", buf.device.ToString(), ") ",
                                 FormatBytes(largest[i].first)));
  }
  const std::string where =
      host_memory ? "host memory (the host and the devices whose memory is host memory, together)"
                  : DeviceLabel(dm.device, label_map_);
  std::string parts;
  if (!host_memory) {
    parts = absl::StrCat(" (arena ", FormatBytes(dm.plan.arena_size), ", constant replicas ",
                         FormatBytes(dm.constant_bytes), ")");
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      mctx_, " does not fit in ", where, ": it needs ", FormatBytes(need), parts, ", but ", what,
      " ", FormatBytes(have), "; the largest values: ", absl::StrJoin(names, ", "),
      ". Nothing was allocated."));
}

absl::Status MethodLoader::CheckBudgets() {
  size_t host_memory_need = 0;  // the host's and sim devices' totals: all of it host RAM
  for (size_t d = 0; d < memory_.size(); ++d) {
    const DeviceMemory& dm = memory_[d];
    ArenaInfo& info = impl_.plan_.arenas[d];
    const size_t need = dm.total();
    info.available_bytes = dm.runtime->available_bytes();
    if (auto it = options_.memory_limits.find(dm.device); it != options_.memory_limits.end()) {
      info.limit_bytes = it->second;
    }
    if (need == 0) continue;
    if (need > info.limit_bytes) {
      return BudgetError(dm, need, info.limit_bytes, "LoadOptions::memory_limits allows", false);
    }
    const size_t available = info.available_bytes;
    if (need > available) {
      return BudgetError(dm, need, available, "the device has available", false);
    }
    // Near the limit: loading works, but the next method or a neighbour's growth may not.
    const size_t bound = std::min(info.limit_bytes, available);
    if (need > bound / 10 * 8) {
      Diagnostic diag;
      diag.severity = Diagnostic::Severity::kWarning;
      diag.message = absl::StrFormat(
          "%s takes %s on %s, %.0f%% of the %s %s", mctx_, FormatBytes(need),
          DeviceLabel(dm.device, label_map_), 100.0 * static_cast<double>(need) / bound,
          FormatBytes(bound), bound == available ? "available there" : "its memory limit allows");
      diag.devices = {dm.device};
      diag.bytes = need;
      impl_.plan_.placement.diagnostics.push_back(std::move(diag));
    }
    if (dm.runtime->uses_host_memory() || dm.pinned) {
      host_memory_need = SaturatingAdd(host_memory_need, need);
    }
  }
  // The host's entry (the first) asked the host already.
  const size_t available = !memory_.empty() && memory_.front().device.is_host()
                               ? impl_.plan_.arenas.front().available_bytes
                               : rt_.devices().Find(Device::Host())->available_bytes();
  if (host_memory_need > available) {
    return BudgetError(memory_.front(), host_memory_need, available, "the host has available",
                       true);
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ferry
