#include "ferry/memory/device.h"

#include <cctype>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/memory/device_type.h"

namespace ferry {

absl::string_view DeviceTypeName(DeviceType type) {
  const DeviceTypeInfo* info = FindDeviceType(type);
  return info == nullptr ? absl::string_view("unknown") : absl::string_view(info->name);
}

std::string Device::ToString() const {
  if (is_host()) return "host";
  return absl::StrCat(DeviceTypeName(type), ":", index);
}

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  absl::string_view type_part = s;
  absl::string_view index_part;
  bool has_index = false;
  if (size_t colon = s.find(':'); colon != std::string::npos) {
    type_part = absl::string_view(s).substr(0, colon);
    index_part = absl::string_view(s).substr(colon + 1);
    has_index = true;
  }
  const DeviceTypeInfo* info = FindDeviceTypeByName(type_part);
  if (info == nullptr) {
    std::vector<std::string> names;
    for (const DeviceTypeInfo* t : DeviceTypes()) {
      for (const std::string& alias : t->aliases) names.push_back(absl::StrCat("\"", alias, "\""));
      names.push_back(absl::StrCat("\"", t->name, "\""));
    }
    const std::string last = names.back();
    names.pop_back();
    return absl::InvalidArgumentError(
        absl::StrCat("device \"", text, "\" has unknown type \"", type_part, "\"; valid types are ",
                     absl::StrJoin(names, ", "), " and ", last));
  }
  Device device;
  device.type = info->type;
  if (has_index) {
    int32_t index = -1;
    bool digits = !index_part.empty();
    for (char c : index_part) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (!digits || !absl::SimpleAtoi(index_part, &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device \"", text, "\" has malformed index \"", index_part,
          "\"; expected a non-negative integer, as in \"cuda:0\""));
    }
    device.index = index;
  }
  if (device.is_host()) device.index = 0;
  return device;
}

}  // namespace ferry
