// ExecuTorch's elementwise ops, onto kernels/elementwise_ops.cc.
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/internal/method_importer.h"
#include "ferry/loader/executorch/ops/ops.h"
#include "ferry/loader/executorch/pte_reader.h"

namespace ferry::internal {
namespace {

// add/sub (self, other, alpha), mul/div (self, other).
template <const char* kOp, bool kAlpha>
absl::Status ImportBinary(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  if constexpr (kAlpha) FERRY_RETURN_IF_ERROR(m.RequireOne(args[2], "alpha"));
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId b, m.ReadTensor(args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode(kOp, {a, b}, r);
  return absl::OkStatus();
}

// add/sub.Scalar_out (self, other, alpha), mul/div.Scalar_out (self, other): Ferry's binary ops
// with a number operand.
template <const char* kOp, bool kAlpha>
absl::Status ImportBinaryScalar(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  if constexpr (kAlpha) FERRY_RETURN_IF_ERROR(m.RequireOne(args[2], "alpha"));
  return m.MapTensorNumber(kOp, args[0], args[1], "other", out);
}

// pow.Tensor_Scalar_out(self, exponent).
absl::Status ImportPowTensorScalar(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  return m.MapTensorNumber("pow", args[0], args[1], "exponent", out);
}

// full_like.out(self, fill_value, memory_format): a tensor of self's shape and out's dtype, every
// element fill_value: a copy of self (cast to out's dtype when it differs) filled in place. The
// memory format is not read: results are row-major.
absl::Status FullLike(MethodImporter& m, int32_t self, Scalar fill, absl::string_view fill_name,
                      int32_t out) {
  FERRY_ASSIGN_OR_RETURN(TensorMeta from, m.MetaOf(self));
  FERRY_ASSIGN_OR_RETURN(TensorMeta to, m.MetaOf(out));
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(self));
  to.dim_order.clear();
  const ValueId base = m.NewIntermediate(out, to, "full_like's tensor");
  if (from.dtype == to.dtype) {
    m.AddNode("clone", {a}, base);
  } else {
    const ValueId dtype = m.AddScalar(Scalar::Int(static_cast<int64_t>(to.dtype)),
                                      absl::StrCat("instruction ", m.instruction(), " dtype"));
    m.AddNode("to_dtype", {a, dtype}, base);
  }
  const ValueId v = m.AddScalar(std::move(fill), fill_name);
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("fill_", {base, v}, r);
  return absl::OkStatus();
}

absl::Status ImportFullLike(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(Scalar fill, m.NumberValue(args[1], "fill_value"));
  return FullLike(m, args[0], std::move(fill), absl::StrCat("value ", args[1]), out);
}

// zeros_like.out(self, memory_format) and ones_like.out: full_like with 0 or 1.
template <int kFill>
absl::Status ImportFilledLike(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  return FullLike(m, args[0], Scalar::Int(kFill), kFill == 0 ? "zero" : "one", out);
}

// A unary op of one tensor (self): relu, neg, exp and the like.
template <const char* kOp>
absl::Status ImportUnary(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  return m.MapUnary(kOp, args[0], out);
}

// gelu(self, approximate): the erf form ("none") or the tanh approximation ("tanh").
absl::Status ImportGelu(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  const EtValue& approximate = m.value(args[1]);
  if (approximate.kind != EtValueKind::kString) {
    return m.Invalid(absl::StrCat("approximate is a value of kind ",
                                  EtValueKindName(approximate.kind),
                                  ", not a string (\"none\" or \"tanh\")"));
  }
  if (approximate.string_value == "tanh") return m.MapUnary("gelu_tanh", args[0], out);
  if (approximate.string_value != "none") {
    return m.Unimplemented(absl::StrCat("approximate is \"",
                                        absl::CHexEscape(approximate.string_value),
                                        "\"; only \"none\" and \"tanh\" are supported"));
  }
  return m.MapUnary("gelu", args[0], out);
}

// clamp(self, min, max) with optional bounds (None: unbounded on that side, at least one given),
// and hardtanh(self, min_val, max_val): Ferry's clamp with both bounds.
template <bool kOptional>
absl::Status ImportClamp(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(TensorMeta meta, m.MetaOf(args[0]));
  const bool is_float = meta.dtype == DType::kFloat32;
  Scalar bounds[2];
  int given = 0;
  for (int i = 0; i < 2; ++i) {
    const int32_t v = args[1 + i];
    const char* what = kOptional ? (i == 0 ? "min" : "max") : (i == 0 ? "min_val" : "max_val");
    if (kOptional && m.value(v).kind == EtValueKind::kNull) {
      const double inf = i == 0 ? -std::numeric_limits<double>::infinity()
                                : std::numeric_limits<double>::infinity();
      const int64_t limit =
          i == 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
      bounds[i] = is_float ? Scalar::Double(inf) : Scalar::Int(limit);
      continue;
    }
    FERRY_ASSIGN_OR_RETURN(bounds[i], m.NumberValue(v, what));
    ++given;
  }
  if (given == 0) return m.Invalid("min and max are both None; clamp needs at least one");
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  const ValueId lo = m.AddScalar(bounds[0], absl::StrCat("value ", args[1]));
  const ValueId hi = m.AddScalar(bounds[1], absl::StrCat("value ", args[2]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("clamp", {a, lo, hi}, r);
  return absl::OkStatus();
}

// copy(self, src, non_blocking) and copy_: src broadcast into (a copy of) self.
absl::Status ImportCopy(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId target, m.WriteTarget(args[0], out));
  FERRY_ASSIGN_OR_RETURN(ValueId src, m.ReadTensor(args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("copy_", {target, src}, r);
  return absl::OkStatus();
}

constexpr char kAdd[] = "add";
constexpr char kSub[] = "sub";
constexpr char kMul[] = "mul";
constexpr char kDiv[] = "div";
constexpr char kRelu[] = "relu";
constexpr char kNeg[] = "neg";
constexpr char kAbs[] = "abs";
constexpr char kExp[] = "exp";
constexpr char kLog[] = "log";
constexpr char kSin[] = "sin";
constexpr char kCos[] = "cos";
constexpr char kTanh[] = "tanh";
constexpr char kSigmoid[] = "sigmoid";
constexpr char kSilu[] = "silu";
constexpr char kSqrt[] = "sqrt";
constexpr char kRsqrt[] = "rsqrt";
constexpr char kFloor[] = "floor";
constexpr char kCeil[] = "ceil";
constexpr char kHardswish[] = "hardswish";
constexpr char kHardsigmoid[] = "hardsigmoid";

// leaky_relu(self, negative_slope) and elu(self, alpha, scale, input_scale): Ferry's op of the
// same name with the numbers as they are.
template <const char* kOp>
absl::Status ImportWithNumbers(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  ValueIds node_args = {a};
  for (size_t i = 1; i < args.size(); ++i) {
    FERRY_ASSIGN_OR_RETURN(Scalar n, m.NumberValue(args[i], absl::StrCat("argument ", i)));
    node_args.push_back(m.AddScalar(n, absl::StrCat("value ", args[i])));
  }
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode(kOp, std::move(node_args), r);
  return absl::OkStatus();
}

constexpr char kLeakyRelu[] = "leaky_relu";
constexpr char kElu[] = "elu";

}  // namespace

absl::Span<const EtOpMapping> ElementwiseEtOps() {
  static constexpr EtOpMapping kOps[] = {
      {"aten::add.out", 3, &ImportBinary<kAdd, true>},
      {"aten::sub.out", 3, &ImportBinary<kSub, true>},
      {"aten::mul.out", 2, &ImportBinary<kMul, false>},
      {"aten::div.out", 2, &ImportBinary<kDiv, false>},
      {"aten::add.Scalar_out", 3, &ImportBinaryScalar<kAdd, true>},
      {"aten::sub.Scalar_out", 3, &ImportBinaryScalar<kSub, true>},
      {"aten::mul.Scalar_out", 2, &ImportBinaryScalar<kMul, false>},
      {"aten::div.Scalar_out", 2, &ImportBinaryScalar<kDiv, false>},
      {"aten::pow.Tensor_Scalar_out", 2, &ImportPowTensorScalar},
      {"aten::full_like.out", 3, &ImportFullLike},
      {"aten::zeros_like.out", 2, &ImportFilledLike<0>},
      {"aten::ones_like.out", 2, &ImportFilledLike<1>},
      {"aten::relu.out", 1, &ImportUnary<kRelu>},
      {"aten::neg.out", 1, &ImportUnary<kNeg>},
      {"aten::abs.out", 1, &ImportUnary<kAbs>},
      {"aten::exp.out", 1, &ImportUnary<kExp>},
      {"aten::log.out", 1, &ImportUnary<kLog>},
      {"aten::sin.out", 1, &ImportUnary<kSin>},
      {"aten::cos.out", 1, &ImportUnary<kCos>},
      {"aten::tanh.out", 1, &ImportUnary<kTanh>},
      {"aten::sigmoid.out", 1, &ImportUnary<kSigmoid>},
      {"aten::silu.out", 1, &ImportUnary<kSilu>},
      {"aten::sqrt.out", 1, &ImportUnary<kSqrt>},
      {"aten::rsqrt.out", 1, &ImportUnary<kRsqrt>},
      {"aten::floor.out", 1, &ImportUnary<kFloor>},
      {"aten::ceil.out", 1, &ImportUnary<kCeil>},
      {"aten::gelu.out", 2, &ImportGelu},
      {"aten::hardswish.out", 1, &ImportUnary<kHardswish>},
      {"aten::hardsigmoid.out", 1, &ImportUnary<kHardsigmoid>},
      {"aten::leaky_relu.out", 2, &ImportWithNumbers<kLeakyRelu>},
      {"aten::elu.out", 4, &ImportWithNumbers<kElu>},
      {"aten::clamp.out", 3, &ImportClamp<true>},
      {"aten::hardtanh.out", 3, &ImportClamp<false>},
      {"aten::copy.out", 3, &ImportCopy},
      {"aten::copy_", 3, &ImportCopy, /*in_place=*/true},
  };
  return kOps;
}

}  // namespace ferry::internal
