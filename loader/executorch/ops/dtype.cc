// ExecuTorch's casts, comparisons and selection, onto kernels/dtype_ops.cc.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/internal/method_importer.h"
#include "ferry/loader/executorch/ops/ops.h"

namespace ferry::internal {
namespace {

constexpr int64_t kEtFloat = 6;  // ExecuTorch's ScalarType for float32

// Element i of an int64 constant as float32.
void Int64ToFloat(const uint8_t* from, size_t i, uint8_t* to) {
  int64_t x;
  std::memcpy(&x, from + i * sizeof(x), sizeof(x));
  const float y = static_cast<float>(x);
  std::memcpy(to + i * sizeof(y), &y, sizeof(y));
}

// Element i of a float32 constant as int64: PyTorch truncates toward zero; out-of-range values
// are undefined there, clamped here, and NaN is 0.
void FloatToInt64(const uint8_t* from, size_t i, uint8_t* to) {
  float x;
  std::memcpy(&x, from + i * sizeof(x), sizeof(x));
  int64_t y = 0;
  if (x >= 9.2233715e18f) {
    y = std::numeric_limits<int64_t>::max();
  } else if (x <= -9.2233715e18f) {
    y = std::numeric_limits<int64_t>::min();
  } else if (x == x) {
    y = static_cast<int64_t>(x);
  }
  std::memcpy(to + i * sizeof(y), &y, sizeof(y));
}

// _to_dim_order_copy(self, non_blocking, dim_order) and _clone_dim_order (the same without a
// dtype change): a copy, a cast, or a layout change.
absl::Status ImportDimOrderCopy(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  if (m.value(args[2]).kind != EtValueKind::kNull) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> order, m.IntList(args[2], "dim_order"));
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i] != static_cast<int64_t>(i)) {
        return m.Unimplemented(absl::StrCat("dim_order (", absl::StrJoin(order, ", "),
                                            ") is a layout change; only row-major is supported"));
      }
    }
  }
  FERRY_ASSIGN_OR_RETURN(TensorMeta from, m.MetaOf(args[0]));
  FERRY_ASSIGN_OR_RETURN(TensorMeta to, m.MetaOf(out));
  if (from.dtype == to.dtype) return m.MapUnary("clone", args[0], out);
  if (!from.dim_order.empty() || from.sizes != to.sizes) {
    return m.Unimplemented(absl::StrCat("a cast from ", DTypeName(from.dtype), " to ",
                                        DTypeName(to.dtype),
                                        " that also changes the layout or shape is not supported"));
  }
  MethodImporter::ElementCast fold = nullptr;
  if (from.dtype == DType::kInt64 && to.dtype == DType::kFloat32) fold = &Int64ToFloat;
  if (from.dtype == DType::kFloat32 && to.dtype == DType::kInt64) fold = &FloatToInt64;
  if (fold != nullptr && m.IsUnwrittenConstant(args[0])) {
    // A constant: cast once, here, into a new constant.
    m.FoldConstantCast(args[0], out, std::move(to), fold);
    return absl::OkStatus();
  }
  // A cast at run time.
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  const ValueId code = m.AddScalar(Scalar::Int(static_cast<int64_t>(to.dtype)),
                                   absl::StrCat("dtype ", DTypeName(to.dtype)));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("to_dtype", {a, code}, r);
  return absl::OkStatus();
}

// eq.Scalar(self, other).
// eq|ne|lt|le|gt|ge.Scalar(self, other) and .Tensor(self, other).
template <const char* kOp>
absl::Status ImportCompareScalar(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  return m.MapTensorNumber(kOp, args[0], args[1], "other", out);
}

template <const char* kOp>
absl::Status ImportCompareTensor(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId b, m.ReadTensor(args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode(kOp, {a, b}, r);
  return absl::OkStatus();
}

constexpr char kEq[] = "eq";
constexpr char kNe[] = "ne";
constexpr char kLt[] = "lt";
constexpr char kLe[] = "le";
constexpr char kGt[] = "gt";
constexpr char kGe[] = "ge";

// where.self(condition, self, other).
absl::Status ImportWhere(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId c, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId b, m.ReadTensor(args[2]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("where", {c, a, b}, r);
  return absl::OkStatus();
}

// quantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype) and
// dequantize_per_tensor(..., dtype, out_dtype?), with scale and zero_point numbers (.out) or
// one-element tensors (.Tensor_out): `dtype` is the quantized side's, which must be `out`'s
// (quantize) or the input's (dequantize); out_dtype must be None or float32.
template <bool kQuantize>
absl::Status ImportQuantizePerTensor(MethodImporter& m, absl::Span<const int32_t> args,
                                     int32_t out) {
  FERRY_ASSIGN_OR_RETURN(int64_t dtype, m.IntValue(args[5], "dtype"));
  FERRY_ASSIGN_OR_RETURN(TensorMeta quantized, m.MetaOf(kQuantize ? out : args[0]));
  const std::string dtype_name = EtScalarTypeName(static_cast<int8_t>(dtype));
  if (dtype < 0 || dtype > 127 || dtype_name != DTypeName(quantized.dtype)) {
    return m.Invalid(absl::StrCat("dtype is ", dtype_name, ", but ", kQuantize ? "out" : "input",
                                  " is ", DTypeName(quantized.dtype)));
  }
  if (!kQuantize && m.value(args[6]).kind != EtValueKind::kNull) {
    FERRY_ASSIGN_OR_RETURN(int64_t out_dtype, m.IntValue(args[6], "out_dtype"));
    if (out_dtype != kEtFloat) {
      return m.Unimplemented(absl::StrCat("out_dtype is ",
                                          EtScalarTypeName(static_cast<int8_t>(out_dtype)),
                                          "; only float32 is supported"));
    }
  }
  FERRY_ASSIGN_OR_RETURN(ValueId x, m.ReadTensor(args[0]));
  ValueIds node_args = {x};
  const char* what[] = {"scale", "zero_point"};
  for (int i = 1; i <= 2; ++i) {
    if (m.value(args[i]).kind == EtValueKind::kTensor) {
      FERRY_ASSIGN_OR_RETURN(ValueId t, m.ReadTensor(args[i]));
      node_args.push_back(t);
    } else {
      FERRY_ASSIGN_OR_RETURN(Scalar s, m.NumberValue(args[i], what[i - 1]));
      node_args.push_back(m.AddScalar(s, absl::StrCat("value ", args[i])));
    }
  }
  for (int i = 3; i <= 4; ++i) {
    FERRY_ASSIGN_OR_RETURN(int64_t bound, m.IntValue(args[i], i == 3 ? "quant_min" : "quant_max"));
    node_args.push_back(m.AddScalar(Scalar::Int(bound), absl::StrCat("value ", args[i])));
  }
  if (kQuantize) {
    node_args.push_back(m.AddScalar(Scalar::Int(static_cast<int64_t>(quantized.dtype)),
                                    absl::StrCat("dtype ", DTypeName(quantized.dtype))));
  }
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode(kQuantize ? "quantize" : "dequantize", std::move(node_args), r);
  return absl::OkStatus();
}

}  // namespace

absl::Span<const EtOpMapping> DTypeEtOps() {
  static constexpr EtOpMapping kOps[] = {
      {"dim_order_ops::_to_dim_order_copy.out", 3, &ImportDimOrderCopy},
      {"dim_order_ops::_clone_dim_order.out", 3, &ImportDimOrderCopy},
      {"aten::eq.Scalar_out", 2, &ImportCompareScalar<kEq>},
      {"aten::ne.Scalar_out", 2, &ImportCompareScalar<kNe>},
      {"aten::lt.Scalar_out", 2, &ImportCompareScalar<kLt>},
      {"aten::le.Scalar_out", 2, &ImportCompareScalar<kLe>},
      {"aten::gt.Scalar_out", 2, &ImportCompareScalar<kGt>},
      {"aten::ge.Scalar_out", 2, &ImportCompareScalar<kGe>},
      {"aten::eq.Tensor_out", 2, &ImportCompareTensor<kEq>},
      {"aten::ne.Tensor_out", 2, &ImportCompareTensor<kNe>},
      {"aten::lt.Tensor_out", 2, &ImportCompareTensor<kLt>},
      {"aten::le.Tensor_out", 2, &ImportCompareTensor<kLe>},
      {"aten::gt.Tensor_out", 2, &ImportCompareTensor<kGt>},
      {"aten::ge.Tensor_out", 2, &ImportCompareTensor<kGe>},
      {"aten::where.self_out", 3, &ImportWhere},
      {"quantized_decomposed::quantize_per_tensor.out", 6, &ImportQuantizePerTensor<true>},
      {"quantized_decomposed::quantize_per_tensor.Tensor_out", 6, &ImportQuantizePerTensor<true>},
      {"quantized_decomposed::dequantize_per_tensor.out", 7, &ImportQuantizePerTensor<false>},
      {"quantized_decomposed::dequantize_per_tensor.Tensor_out", 7,
       &ImportQuantizePerTensor<false>},
  };
  return kOps;
}

}  // namespace ferry::internal
