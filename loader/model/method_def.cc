#include "ferry/loader/model/method_def.h"

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

std::optional<absl::string_view> DelegateDef::CompileSpec(absl::string_view key) const {
  for (const auto& [k, v] : compile_specs) {
    if (k == key) return absl::string_view(v);
  }
  return std::nullopt;
}

NodeDef::NodeDef(const NodeDef& other)
    : args(other.args),
      results(other.results),
      kind(other.kind),
      delegate_(other.delegate_ == nullptr ? nullptr
                                           : std::make_unique<DelegateDef>(*other.delegate_)),
      op(other.op),
      name(other.name) {}

NodeDef& NodeDef::operator=(const NodeDef& other) {
  if (this != &other) *this = NodeDef(other);
  return *this;
}

const DelegateDef& NodeDef::delegate() const {
  static const DelegateDef kNone;
  return delegate_ != nullptr ? *delegate_ : kNone;
}

DelegateDef& NodeDef::mutable_delegate() {
  if (delegate_ == nullptr) delegate_ = std::make_unique<DelegateDef>();
  return *delegate_;
}

}  // namespace ferry
