// ExecuTorch's matrix ops and softmax, onto kernels/linalg_ops.cc.
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/internal/method_importer.h"
#include "ferry/loader/executorch/ops/ops.h"

namespace ferry::internal {
namespace {

// mm(self, mat2), and bmm once its shapes are checked.
absl::Status ImportMm(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId b, m.ReadTensor(args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("matmul", {a, b}, r);
  return absl::OkStatus();
}

// bmm(self, mat2): [b, n, k] @ [b, k, m]. Ferry's matmul broadcasts batches, ATen's bmm does
// not: the shapes are checked here, so a program ATen would refuse is refused too.
absl::Status ImportBmm(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(TensorMeta a_meta, m.MetaOf(args[0]));
  FERRY_ASSIGN_OR_RETURN(TensorMeta b_meta, m.MetaOf(args[1]));
  const auto& a = a_meta.sizes;
  const auto& b = b_meta.sizes;
  if (a.size() != 3 || b.size() != 3 || a[0] != b[0] || a[2] != b[1]) {
    return m.Invalid(absl::StrCat("self is [", absl::StrJoin(a, ", "), "] and mat2 [",
                                  absl::StrJoin(b, ", "),
                                  "]; bmm takes [b, n, k] and [b, k, m] of one batch size b"));
  }
  return ImportMm(m, args, out);
}

// addmm(self, mat1, mat2, beta, alpha) = self + mat1 @ mat2: matmul, then add.
absl::Status ImportAddmm(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_RETURN_IF_ERROR(m.RequireOne(args[3], "beta"));
  FERRY_RETURN_IF_ERROR(m.RequireOne(args[4], "alpha"));
  FERRY_ASSIGN_OR_RETURN(ValueId bias, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId m1, m.ReadTensor(args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId m2, m.ReadTensor(args[2]));
  FERRY_ASSIGN_OR_RETURN(TensorMeta meta, m.MetaOf(out));
  const ValueId product = m.NewIntermediate(out, meta, "mat1 @ mat2");
  m.AddNode("matmul", {m1, m2}, product);
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("add", {product, bias}, r);
  return absl::OkStatus();
}

// linear(input, weight, bias or None).
absl::Status ImportLinear(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId x, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId w, m.ReadTensor(args[1]));
  ValueIds node_args = {x, w};
  if (m.value(args[2]).kind != EtValueKind::kNull) {
    FERRY_ASSIGN_OR_RETURN(ValueId b, m.ReadTensor(args[2]));
    node_args.push_back(b);
  }
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("linear", std::move(node_args), r);
  return absl::OkStatus();
}

// _softmax(self, dim, half_to_float) and _log_softmax: half_to_float must be false.
template <const char* kOp>
absl::Status ImportSoftmax(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(int64_t dim, m.IntValue(args[1], "dim"));
  FERRY_ASSIGN_OR_RETURN(bool half_to_float, m.BoolValue(args[2], "half_to_float"));
  if (half_to_float) {
    return m.Unimplemented("half_to_float is true; only half_to_float = false is supported");
  }
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  const ValueId d = m.AddScalar(Scalar::Int(dim), absl::StrCat("value ", args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode(kOp, {a, d}, r);
  return absl::OkStatus();
}

constexpr char kSoftmax[] = "softmax";
constexpr char kLogSoftmax[] = "log_softmax";

}  // namespace

absl::Span<const EtOpMapping> LinalgEtOps() {
  static constexpr EtOpMapping kOps[] = {
      {"aten::mm.out", 2, &ImportMm},
      {"aten::bmm.out", 2, &ImportBmm},
      {"aten::addmm.out", 5, &ImportAddmm},
      {"aten::linear.out", 3, &ImportLinear},
      {"aten::_softmax.out", 3, &ImportSoftmax<kSoftmax>},
      {"aten::_log_softmax.out", 3, &ImportSoftmax<kLogSoftmax>},
  };
  return kOps;
}

}  // namespace ferry::internal
