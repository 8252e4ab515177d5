#include "ferry/memory/device_type.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

constexpr size_t kMaxTypes = 256;  // DeviceType is 8 bits

bool ValidName(absl::string_view name) {
  if (name.empty() || !absl::ascii_islower(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '_') return false;
  }
  return true;
}

// Registered types by value. Slots are written once, under `mu`, and read without it; `count` is
// published after its slot.
class TypeTable {
 public:
  TypeTable() {
    // The built-in enumerators are these types' values: register them in that order.
    for (DeviceTypeInfo info : {HostDeviceType(), SimDeviceType(), CudaDeviceType()}) {
      Register(std::move(info)).IgnoreError();
    }
  }

  const DeviceTypeInfo* Find(DeviceType type) const {
    const size_t i = static_cast<size_t>(type);
    return i < count_.load(std::memory_order_acquire) ? slots_[i].get() : nullptr;
  }

  const DeviceTypeInfo* FindByName(absl::string_view name) const {
    const size_t n = count_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) {
      const DeviceTypeInfo& info = *slots_[i];
      if (info.name == name) return &info;
      for (const std::string& alias : info.aliases) {
        if (alias == name) return &info;
      }
    }
    return nullptr;
  }

  std::vector<const DeviceTypeInfo*> All() const {
    const size_t n = count_.load(std::memory_order_acquire);
    std::vector<const DeviceTypeInfo*> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(slots_[i].get());
    return out;
  }

  absl::StatusOr<DeviceType> Register(DeviceTypeInfo info) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<absl::string_view> names = {info.name};
    names.insert(names.end(), info.aliases.begin(), info.aliases.end());
    for (absl::string_view name : names) {
      if (!ValidName(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device type name \"", name,
            "\" is malformed: use lower case letters, digits and '_', starting with a letter"));
      }
      if (const DeviceTypeInfo* taken = FindByName(name)) {
        return absl::AlreadyExistsError(absl::StrCat("device type name \"", name,
                                                     "\" is taken by the type \"", taken->name,
                                                     "\""));
      }
    }
    const size_t i = count_.load(std::memory_order_relaxed);
    if (i == kMaxTypes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no device type value left for \"", info.name, "\" (", kMaxTypes,
                       " types are registered)"));
    }
    info.type = static_cast<DeviceType>(i);
    slots_[i] = std::make_unique<const DeviceTypeInfo>(std::move(info));
    count_.store(i + 1, std::memory_order_release);
    return slots_[i]->type;
  }

 private:
  std::mutex mu_;
  std::array<std::unique_ptr<const DeviceTypeInfo>, kMaxTypes> slots_;
  std::atomic<size_t> count_{0};
};

TypeTable& Table() {
  static TypeTable* table = new TypeTable();  // never destroyed: lookups may run at exit
  return *table;
}

}  // namespace

const DeviceTypeInfo* FindDeviceType(DeviceType type) { return Table().Find(type); }

const DeviceTypeInfo* FindDeviceTypeByName(absl::string_view name) {
  return Table().FindByName(name);
}

std::vector<const DeviceTypeInfo*> DeviceTypes() { return Table().All(); }

absl::StatusOr<DeviceType> RegisterDeviceType(DeviceTypeInfo info) {
  return Table().Register(std::move(info));
}

}  // namespace ferry
