#include "ferry/loader/model/checks.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"

namespace ferry {

namespace {

// The checks of one method, in the order VerifyMethodDef documents; each returns the first
// failure, prefixed with the method's name.
class MethodChecker {
 public:
  explicit MethodChecker(const MethodDef& method)
      : m_(method), num_values_(method.values.size()), defs_(method.values.size()) {}

  absl::Status Run() {
    if (m_.name.empty()) return absl::InvalidArgumentError("a method has no name");
    FERRY_RETURN_IF_ERROR(CheckValues());
    FERRY_RETURN_IF_ERROR(CheckInputs());
    FERRY_RETURN_IF_ERROR(CheckNodes());
    FERRY_RETURN_IF_ERROR(CheckOutputs());
    return CheckExporterRecords();
  }

 private:
  absl::Status Fail(absl::string_view where, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("method \"", absl::CHexEscape(m_.name), "\": ", where, ": ", what));
  }
  bool InRange(int64_t id) const { return id >= 0 && static_cast<size_t>(id) < num_values_; }
  std::string OutOfRange(int64_t id) const {
    return absl::StrCat("value ", id, ", but the method has ", num_values_, " values");
  }
  std::string ValueLabel(size_t v) const {
    return absl::StrCat("value ", v, " (\"", absl::CHexEscape(m_.values[v].name), "\")");
  }
  std::string NodeLabel(size_t n) const {
    return absl::StrCat("node ", n, " (", absl::CHexEscape(m_.nodes[n].name), ")");
  }

  // The tensor's byte size, once its dtype, rank, sizes and dim order pass.
  absl::StatusOr<size_t> CheckTensor(size_t v, const TensorMeta& meta) const {
    if (!IsKnownDType(meta.dtype)) {
      return Fail(ValueLabel(v), absl::StrCat("dtype ", static_cast<int>(meta.dtype),
                                              " is not a known dtype"));
    }
    if (meta.rank() > kMaxRank) {
      return Fail(ValueLabel(v),
                  absl::StrCat("rank ", meta.rank(), " exceeds the maximum rank ", kMaxRank));
    }
    const std::optional<size_t> bytes = CheckedByteSize(meta.dtype, meta.sizes);
    if (!bytes.has_value()) {
      return Fail(ValueLabel(v), absl::StrCat("sizes [", absl::StrJoin(meta.sizes, ", "),
                                              "] are negative or their byte size overflows"));
    }
    if (!IsDimOrder(absl::MakeConstSpan(meta.dim_order), meta.sizes.size())) {
      return Fail(ValueLabel(v), absl::StrCat("dim order (", absl::StrJoin(meta.dim_order, ", "),
                                              ") is not a permutation of its ", meta.rank(),
                                              " dimensions"));
    }
    return *bytes;
  }

  absl::Status CheckValues() {
    for (size_t v = 0; v < num_values_; ++v) {
      const ValueDef& value = m_.values[v];
      if (value.name.empty()) return Fail(absl::StrCat("value ", v), "has no name");
      switch (value.kind) {
        case ValueKind::kInput:
          ++input_values_;
          [[fallthrough]];
        case ValueKind::kConstant:
        case ValueKind::kState:
        case ValueKind::kScalar:
          defs_.DefineAtStart(v);
          break;
        case ValueKind::kIntermediate:
          break;
        default:
          return Fail(ValueLabel(v), absl::StrCat("kind ", static_cast<int>(value.kind),
                                                  " is not a value kind"));
      }
      if (value.shared && value.kind != ValueKind::kState) {
        return Fail(ValueLabel(v), "is marked shared, which only a state can be");
      }
      const bool has_data = value.kind == ValueKind::kConstant || value.kind == ValueKind::kState;
      if (!has_data && !value.data.empty()) {
        return Fail(ValueLabel(v), absl::StrCat("is ", ValueKindName(value.kind), " but holds ",
                                                value.data.size(), " bytes of data"));
      }
      if (!value.is_tensor()) continue;
      FERRY_ASSIGN_OR_RETURN(const size_t bytes, CheckTensor(v, value.meta));
      if (has_data && value.data.size() != bytes) {
        return Fail(ValueLabel(v), absl::StrCat("holds ", value.data.size(), " bytes of data, ",
                                                "expected ", bytes, " for ",
                                                value.meta.ToString()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckInputs() const {
    std::vector<bool> listed(num_values_, false);
    for (size_t i = 0; i < m_.inputs.size(); ++i) {
      const ValueId id = m_.inputs[i];
      const std::string where = absl::StrCat("input ", i);
      if (!InRange(id)) return Fail(where, absl::StrCat("is ", OutOfRange(id)));
      if (m_.values[id].kind != ValueKind::kInput && m_.values[id].kind != ValueKind::kScalar) {
        return Fail(where,
                    absl::StrCat("is ", ValueLabel(id), ", ", ValueKindName(m_.values[id].kind),
                                 "; method inputs must be input or scalar values"));
      }
      if (listed[id]) return Fail(where, absl::StrCat("lists ", ValueLabel(id), " again"));
      listed[id] = true;
    }
    if (m_.inputs.size() == input_values_) return absl::OkStatus();
    for (size_t v = 0; v < num_values_; ++v) {
      if (m_.values[v].kind == ValueKind::kInput && !listed[v]) {
        return Fail(ValueLabel(v), "an input value that is not listed in the method's inputs");
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckDelegate(size_t n, const NodeDef& node) const {
    const DelegateDef& d = node.delegate();
    if (d.backend.empty()) return Fail(NodeLabel(n), "the delegate call has no backend name");
    if (!d.arg_dim_orders.empty() && d.arg_dim_orders.size() != node.args.size()) {
      return Fail(NodeLabel(n), absl::StrCat("has ", d.arg_dim_orders.size(),
                                             " argument dim orders for ", node.args.size(),
                                             " arguments"));
    }
    for (size_t a = 0; a < d.arg_dim_orders.size(); ++a) {
      const std::vector<int32_t>& order = d.arg_dim_orders[a];
      if (order.empty()) continue;
      const ValueDef& arg = m_.values[node.args[a]];
      if (!arg.is_tensor()) {
        return Fail(NodeLabel(n), absl::StrCat("argument ", a, " is a scalar but has a dim order"));
      }
      if (!IsDimOrder(absl::MakeConstSpan(order), arg.meta.sizes.size())) {
        return Fail(NodeLabel(n), absl::StrCat("the dim order (", absl::StrJoin(order, ", "),
                                               ") of argument ", a, " is not a permutation of its ",
                                               arg.meta.rank(), " dimensions"));
      }
    }
    std::vector<bool> written(node.args.size(), false);
    for (int32_t a : d.written_args) {
      if (a < 0 || static_cast<size_t>(a) >= node.args.size()) {
        return Fail(NodeLabel(n), absl::StrCat("written argument ", a, " is not one of its ",
                                               node.args.size(), " arguments"));
      }
      if (written[a]) {
        return Fail(NodeLabel(n), absl::StrCat("argument ", a, " is listed as written twice"));
      }
      written[a] = true;
      if (!m_.values[node.args[a]].is_tensor()) {
        return Fail(NodeLabel(n), absl::StrCat("written argument ", a, " is a scalar"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckNodes() {
    for (size_t n = 0; n < m_.nodes.size(); ++n) {
      const NodeDef& node = m_.nodes[n];
      if (node.name.empty()) return Fail(absl::StrCat("node ", n), "has no name");
      if (node.kind == NodeKind::kHostOp) {
        if (node.op.empty()) return Fail(NodeLabel(n), "the host op has no op name");
      } else if (node.kind != NodeKind::kDelegate) {
        return Fail(NodeLabel(n), absl::StrCat("kind ", static_cast<int>(node.kind),
                                               " is neither a host op nor a delegate call"));
      }
      for (size_t a = 0; a < node.args.size(); ++a) {
        const ValueId id = node.args[a];
        if (!InRange(id)) return Fail(NodeLabel(n), absl::StrCat("argument ", a, " is ",
                                                                 OutOfRange(id)));
        if (!defs_.IsDefined(id)) {
          return Fail(NodeLabel(n), absl::StrCat("argument ", a, " is ", ValueLabel(id),
                                                 ", an intermediate that no earlier node "
                                                 "produces"));
        }
      }
      for (size_t r = 0; r < node.results.size(); ++r) {
        const ValueId id = node.results[r];
        if (!InRange(id)) return Fail(NodeLabel(n), absl::StrCat("result ", r, " is ",
                                                                 OutOfRange(id)));
        const int32_t earlier = defs_.producer(id);
        switch (defs_.Produce(id, static_cast<int32_t>(n))) {
          case DefinitionTracker::ProduceResult::kOk:
            break;
          case DefinitionTracker::ProduceResult::kNotIntermediate:
            return Fail(NodeLabel(n), absl::StrCat("result ", r, " is ", ValueLabel(id), ", ",
                                                   ValueKindName(m_.values[id].kind),
                                                   "; results must be intermediates"));
          case DefinitionTracker::ProduceResult::kAlreadyProduced:
            return Fail(NodeLabel(n), absl::StrCat("result ", r, " is ", ValueLabel(id),
                                                   ", which ", NodeLabel(earlier),
                                                   " already produces"));
        }
      }
      if (node.kind == NodeKind::kDelegate) FERRY_RETURN_IF_ERROR(CheckDelegate(n, node));
    }
    return absl::OkStatus();
  }

  absl::Status CheckOutputs() const {
    for (size_t o = 0; o < m_.outputs.size(); ++o) {
      const ValueId id = m_.outputs[o];
      const std::string where = absl::StrCat("output ", o);
      if (!InRange(id)) return Fail(where, absl::StrCat("is ", OutOfRange(id)));
      if (!defs_.IsDefined(id)) {
        return Fail(where, absl::StrCat("is ", ValueLabel(id),
                                        ", an intermediate that no node produces"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckExporterRecords() const {
    if (!m_.node_instructions.empty() && m_.node_instructions.size() != m_.nodes.size()) {
      return Fail("the exporter's records",
                  absl::StrCat("name the instructions of ", m_.node_instructions.size(),
                               " nodes, but the method has ", m_.nodes.size()));
    }
    auto check = [&](absl::string_view what, size_t i, ValueId id) -> absl::Status {
      if (InRange(id)) return absl::OkStatus();
      return Fail(absl::StrCat("the exporter's ", what, " ", i), absl::StrCat("is ", OutOfRange(id)));
    };
    for (size_t i = 0; i < m_.exporter_copies.size(); ++i) {
      FERRY_RETURN_IF_ERROR(check("copy", i, m_.exporter_copies[i].value));
    }
    for (size_t i = 0; i < m_.exporter_devices.size(); ++i) {
      FERRY_RETURN_IF_ERROR(check("device annotation", i, m_.exporter_devices[i].value));
    }
    for (size_t i = 0; i < m_.exporter_allocations.size(); ++i) {
      FERRY_RETURN_IF_ERROR(check("allocation", i, m_.exporter_allocations[i].value));
    }
    return absl::OkStatus();
  }

  const MethodDef& m_;
  const size_t num_values_;
  DefinitionTracker defs_;
  size_t input_values_ = 0;
};

}  // namespace

absl::Status VerifyMethodDef(const MethodDef& method) { return MethodChecker(method).Run(); }

absl::Status VerifyReaderOutput(absl::Span<const MethodDef> methods, absl::string_view reader) {
  for (const MethodDef& method : methods) {
    if (absl::Status s = VerifyMethodDef(method); !s.ok()) {
      return absl::InternalError(absl::StrCat("the ", reader,
                                              " built an invalid method (a bug in Ferry): ",
                                              s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace ferry
