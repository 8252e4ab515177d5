#include "ferry/loader/method_graph.h"

namespace ferry {

const char* ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInput:
      return "input";
    case ValueKind::kConstant:
      return "constant";
    case ValueKind::kState:
      return "state";
    case ValueKind::kIntermediate:
      return "intermediate";
    case ValueKind::kScalar:
      return "scalar";
  }
  return "unknown";
}

std::optional<absl::string_view> NodeDef::CompileSpec(absl::string_view key) const {
  for (const auto& [k, v] : compile_specs) {
    if (k == key) return absl::string_view(v);
  }
  return std::nullopt;
}

}  // namespace ferry
