#include "ferry/memory/device_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "ferry/memory/device_type.h"

namespace ferry {

std::unique_ptr<DeviceRegistry> DeviceRegistry::CreateDefault(
    const DeviceRegistryOptions& options) {
  auto registry = std::make_unique<DeviceRegistry>();
  for (const DeviceTypeInfo* type : DeviceTypes()) {
    if (type->discover) type->discover(*registry, options);
  }
  return registry;
}

DeviceRuntime* DeviceRegistry::Find(const Device& device) const {
  auto it = runtimes_.find(device);
  return it == runtimes_.end() ? nullptr : it->second.get();
}

absl::Status DeviceRegistry::Add(std::unique_ptr<DeviceRuntime> runtime) {
  if (runtime == nullptr) return absl::InvalidArgumentError("DeviceRegistry::Add: null runtime");
  const Device device = runtime->device();
  if (runtimes_.contains(device)) {
    return absl::AlreadyExistsError(
        absl::StrCat("device ", device.ToString(), " is already present in the registry"));
  }
  if (!device.is_host() && !runtime->ReportAllocationsTo(&device_span_)) {
    all_report_ranges_ = false;
  }
  runtimes_.emplace(device, std::move(runtime));
  non_host_.clear();
  for (const auto& [d, r] : runtimes_) {
    if (!d.is_host()) non_host_.push_back(r.get());
  }
  return absl::OkStatus();
}

std::vector<Device> DeviceRegistry::devices() const {
  std::vector<Device> out;
  out.reserve(runtimes_.size());
  for (const auto& [device, runtime] : runtimes_) out.push_back(device);
  return out;
}

bool DeviceRegistry::Has(DeviceType type) const {
  for (const auto& [device, runtime] : runtimes_) {
    if (device.type == type) return true;
  }
  return false;
}

}  // namespace ferry
