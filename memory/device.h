// Devices: where memory lives and where work runs.
//
// A Device is a plain value {type, index}. The built-in types are the host, a simulated device
// ("sim:N", real host memory in its own guarded mapping, used wherever no GPU is present) and a
// CUDA device ("cuda:N"); types are plug-ins (memory/device_type.h), and an application can
// register more.
//
//   FERRY_ASSIGN_OR_RETURN(Device d, ParseDevice(" CUDA:1 "));   // {kCuda, 1}
//   d.ToString();                                                // "cuda:1"
//
// Thread safety: Device is a value type. Nothing here allocates except ToString.
#ifndef FERRY_MEMORY_DEVICE_H_
#define FERRY_MEMORY_DEVICE_H_

#include <compare>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"

namespace ferry {

// The built-in types' values. Other values are handed out by RegisterDeviceType
// (memory/device_type.h): the enum names types, it is not where they are added.
enum class DeviceType : uint8_t { kHost = 0, kSim = 1, kCuda = 2 };

// The registered type's name ("host", "sim", "cuda"); "unknown" for an unregistered value.
absl::string_view DeviceTypeName(DeviceType type);

struct Device {
  DeviceType type = DeviceType::kHost;
  int32_t index = 0;

  static constexpr Device Host() { return Device{DeviceType::kHost, 0}; }
  static constexpr Device Sim(int32_t index) { return Device{DeviceType::kSim, index}; }
  static constexpr Device Cuda(int32_t index) { return Device{DeviceType::kCuda, index}; }

  constexpr bool is_host() const { return type == DeviceType::kHost; }

  // "host", "sim:0", "cuda:1".
  std::string ToString() const;

  friend constexpr auto operator<=>(const Device&, const Device&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const Device& d) {
    return H::combine(std::move(h), static_cast<uint8_t>(d.type), d.index);
  }
};

// Parses a device string per docs/placement.md P2: `type[:index]`, case-insensitive, surrounding
// spaces ignored, index 0 when absent. `type` is a registered type's name or alias ("cpu" and
// "host" both name the host). Returns InvalidArgument naming the string and listing the valid
// names ("cpu", "host", "sim", "cuda" and any registered since) for an unknown type, and naming
// the string for a malformed or negative index.
absl::StatusOr<Device> ParseDevice(absl::string_view text);

}  // namespace ferry

#endif  // FERRY_MEMORY_DEVICE_H_
