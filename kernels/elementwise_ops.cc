// Elementwise host ops: binary arithmetic with broadcasting, unary activations, clamp, pow, fill_
// and copy_.
//
// Every kernel has a fast path for contiguous operands of the result's shape (one flat loop, no
// index math) and a strided path for everything else (broadcast views, transposes, slices and
// strided results). In-place forms share the functional kernels: their result aliases argument 0
// with argument 0's layout, so the same loop writes argument 0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_ops.h"
#include "ferry/kernels/internal/op_util.h"
#include "ferry/kernels/internal/simd_loops.h"

namespace ferry::internal {
namespace {

// int64 arithmetic wraps (two's complement) instead of overflowing into undefined behaviour.
inline int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t WrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Contiguous float32 tensors of at least this many elements run the loops built for the CPU's
// SIMD level (kernels/internal/simd_loops.h); shorter ones the inline loop, which costs no call.
constexpr int64_t kSimdMinElements = 256;

// Ops with SIMD loops name them: kLoop (tensor operands) and kScalarLoop.
template <typename Op>
concept HasSimdLoop = requires { Op::kLoop; };
template <typename Op>
concept HasSimdScalarLoop = requires { Op::kScalarLoop; };

// ---- Binary ---------------------------------------------------------------------------------

struct Add {
  static constexpr const char* kName = "add";
  static constexpr bool kIntOk = true;
  static float Apply(float a, float b) { return a + b; }
  static int64_t Apply(int64_t a, int64_t b) { return WrapAdd(a, b); }
  static constexpr auto kLoop = &FloatLoops::add;
  static constexpr auto kScalarLoop = &FloatLoops::add_scalar;
};
struct Sub {
  static constexpr const char* kName = "sub";
  static constexpr bool kIntOk = true;
  static float Apply(float a, float b) { return a - b; }
  static int64_t Apply(int64_t a, int64_t b) { return WrapSub(a, b); }
  static constexpr auto kLoop = &FloatLoops::sub;
  static constexpr auto kScalarLoop = &FloatLoops::sub_scalar;
};
struct Mul {
  static constexpr const char* kName = "mul";
  static constexpr bool kIntOk = true;
  static float Apply(float a, float b) { return a * b; }
  static int64_t Apply(int64_t a, int64_t b) { return WrapMul(a, b); }
  static constexpr auto kLoop = &FloatLoops::mul;
  static constexpr auto kScalarLoop = &FloatLoops::mul_scalar;
};
struct Div {
  static constexpr const char* kName = "div";
  static constexpr bool kIntOk = false;
  static float Apply(float a, float b) { return a / b; }
  static int64_t Apply(int64_t a, int64_t b) { return 0; }  // never instantiated at run time
  static constexpr auto kLoop = &FloatLoops::div;
  static constexpr auto kScalarLoop = &FloatLoops::div_scalar;
};
// NaN propagates, as in PyTorch.
struct Maximum {
  static constexpr const char* kName = "maximum";
  static constexpr bool kIntOk = true;
  static float Apply(float a, float b) { return (a > b || a != a) ? a : b; }
  static int64_t Apply(int64_t a, int64_t b) { return a > b ? a : b; }
};
struct Minimum {
  static constexpr const char* kName = "minimum";
  static constexpr bool kIntOk = true;
  static float Apply(float a, float b) { return (a < b || a != a) ? a : b; }
  static int64_t Apply(int64_t a, int64_t b) { return a < b ? a : b; }
};

// Built once per op: infer runs per node at load, and names the op only on error.
template <typename Op, bool kInPlace>
absl::string_view OpName() {
  static const std::string* const name =
      new std::string(kInPlace ? absl::StrCat(Op::kName, "_") : std::string(Op::kName));
  return *name;
}

template <typename Op, bool kInPlace>
absl::Status BinaryInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  const absl::string_view op = OpName<Op, kInPlace>();
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, TensorArg(op, args, 0));
  if (!Op::kIntOk) FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *a, DType::kFloat32));
  int64_t out_sizes[kMaxRank];
  int out_rank = a->rank;
  std::copy(a->sizes.begin(), a->sizes.begin() + a->rank, out_sizes);
  if (args[1].tensor != nullptr) {
    FERRY_ASSIGN_OR_RETURN(const TensorRef* b, TensorArg(op, args, 1));
    FERRY_RETURN_IF_ERROR(CheckSameDType(op, 1, *b, 0, *a));
    if (kInPlace) {
      if (!BroadcastsTo(Sizes(*b), Sizes(*a))) {
        return OpError(op, "argument 1 has shape ", ShapeString(*b),
                       ", which does not broadcast to ", ShapeString(*a));
      }
    } else if (!BroadcastShapes(Sizes(*a), Sizes(*b), out_sizes, &out_rank)) {
      return OpError(op, "argument 1 has shape ", ShapeString(*b),
                     ", which does not broadcast with ", ShapeString(*a));
    }
  } else if (args[1].scalar != nullptr) {
    FERRY_ASSIGN_OR_RETURN(const Scalar* s, NumberArg(op, args, 1));
    FERRY_RETURN_IF_ERROR(CheckNumberFits(op, 1, *s, a->dtype));
  } else {
    return OpError(op, "argument 1 must be a tensor or a number");
  }
  if (kInPlace) {
    results[0] = ViewResult(*a);
  } else {
    results[0].layout = ContiguousLayout(a->dtype, absl::MakeConstSpan(out_sizes, out_rank));
    results[0].view_offset = 0;
  }
  return absl::OkStatus();
}

// The strided paths live out of line so that the fast paths compile to a small function with
// few saved registers: at 16 elements the call overhead is most of the cost.
template <typename Op, typename T>
[[gnu::noinline]] void BinaryScalarStrided(const TensorRef& out, const TensorRef& a, T s) {
  T* o = out.data_as<T>();
  const T* x = a.data_as<const T>();
  int64_t a_strides[kMaxRank];
  BroadcastStrides(a, out.rank, out.sizes.data(), a_strides);
  ForEachOffset<2>(out.rank, out.sizes.data(), {out.strides.data(), a_strides},
                   [&](const std::array<int64_t, 2>& off) { o[off[0]] = Op::Apply(x[off[1]], s); });
}

template <typename Op, typename T>
[[gnu::noinline]] void BinaryStrided(const TensorRef& out, const TensorRef& a, const TensorRef& b) {
  T* o = out.data_as<T>();
  const T* x = a.data_as<const T>();
  const T* y = b.data_as<const T>();
  int64_t a_strides[kMaxRank];
  int64_t b_strides[kMaxRank];
  BroadcastStrides(a, out.rank, out.sizes.data(), a_strides);
  BroadcastStrides(b, out.rank, out.sizes.data(), b_strides);
  ForEachOffset<3>(
      out.rank, out.sizes.data(), {out.strides.data(), a_strides, b_strides},
      [&](const std::array<int64_t, 3>& off) { o[off[0]] = Op::Apply(x[off[1]], y[off[2]]); });
}

template <typename Op, typename T>
void BinaryLoop(const TensorRef& out, const TensorRef& a, const OpArg& rhs) {
  T* o = out.data_as<T>();
  const T* x = a.data_as<const T>();
  const int64_t n = ContiguousNumel(out);
  const bool fast = n >= 0 && ContiguousNumel(a) == n;
  if (rhs.scalar != nullptr) {
    const T s = ScalarAs<T>(*rhs.scalar);
    if (!fast) return BinaryScalarStrided<Op, T>(out, a, s);
    if constexpr (std::is_same_v<T, float> && HasSimdScalarLoop<Op>) {
      if (n >= kSimdMinElements) return (Loops().*Op::kScalarLoop)(o, x, s, n);
    }
    for (int64_t i = 0; i < n; ++i) o[i] = Op::Apply(x[i], s);
    return;
  }
  const TensorRef& b = *rhs.tensor;
  if (!fast || ContiguousNumel(b) != n) return BinaryStrided<Op, T>(out, a, b);
  const T* y = b.data_as<const T>();
  if constexpr (std::is_same_v<T, float> && HasSimdLoop<Op>) {
    if (n >= kSimdMinElements) return (Loops().*Op::kLoop)(o, x, y, n);
  }
  for (int64_t i = 0; i < n; ++i) o[i] = Op::Apply(x[i], y[i]);
}

template <typename Op>
absl::Status BinaryKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  if (out.dtype == DType::kFloat32) {
    BinaryLoop<Op, float>(out, *args[0].tensor, args[1]);
  } else if constexpr (Op::kIntOk) {
    BinaryLoop<Op, int64_t>(out, *args[0].tensor, args[1]);
  }
  return absl::OkStatus();
}

template <typename Op>
absl::Status RegisterBinary(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema(std::string(OpName<Op, false>()), 2, 2, 1,
                                                     &BinaryInfer<Op, false>, &BinaryKernel<Op>)));
  return registry.Register(MakeSchema(std::string(OpName<Op, true>()), 2, 2, 1,
                                      &BinaryInfer<Op, true>, &BinaryKernel<Op>,
                                      /*written_args=*/{0}, /*view_of=*/{0}));
}

// ---- Unary ----------------------------------------------------------------------------------

struct Relu {
  static constexpr const char* kName = "relu";
  static constexpr bool kIntOk = true;
  // NaN stays NaN (the comparison is false).
  static float Apply(float a) { return a < 0.0f ? 0.0f : a; }
  static int64_t Apply(int64_t a) { return a < 0 ? 0 : a; }
  static constexpr auto kLoop = &FloatLoops::relu;
};
struct Neg {
  static constexpr const char* kName = "neg";
  static constexpr bool kIntOk = true;
  static float Apply(float a) { return -a; }
  static int64_t Apply(int64_t a) { return WrapSub(0, a); }
};
struct Abs {
  static constexpr const char* kName = "abs";
  static constexpr bool kIntOk = true;
  static float Apply(float a) { return std::fabs(a); }
  static int64_t Apply(int64_t a) { return a < 0 ? WrapSub(0, a) : a; }
};

#define FERRY_FLOAT_UNARY(Type, name, expr)      \
  struct Type {                                  \
    static constexpr const char* kName = name;   \
    static constexpr bool kIntOk = false;        \
    static float Apply(float x) { return expr; } \
    static int64_t Apply(int64_t) { return 0; }  \
  }

FERRY_FLOAT_UNARY(Exp, "exp", std::exp(x));
FERRY_FLOAT_UNARY(Log, "log", std::log(x));
FERRY_FLOAT_UNARY(Sin, "sin", std::sin(x));
FERRY_FLOAT_UNARY(Cos, "cos", std::cos(x));
FERRY_FLOAT_UNARY(Tanh, "tanh", std::tanh(x));
FERRY_FLOAT_UNARY(Sigmoid, "sigmoid", 1.0f / (1.0f + std::exp(-x)));
FERRY_FLOAT_UNARY(Silu, "silu", x / (1.0f + std::exp(-x)));
// The exact (erf) form, PyTorch's default.
struct Gelu {
  static constexpr const char* kName = "gelu";
  static constexpr bool kIntOk = false;
  static float Apply(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
  static int64_t Apply(int64_t) { return 0; }
  // Dense tensors: through the level's exp and a fit of erfc (kernels/internal/simd_loops.h).
  static constexpr auto kLoop = &FloatLoops::gelu;
};
// approximate="tanh": 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
struct GeluTanh {
  static constexpr const char* kName = "gelu_tanh";
  static constexpr bool kIntOk = false;
  static float Apply(float x) {
    return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  }
  static int64_t Apply(int64_t) { return 0; }
  // Dense tensors: through the level's exp (kernels/internal/simd_loops.h).
  static constexpr auto kLoop = &FloatLoops::gelu_tanh;
};
// ATen's: x * relu6(x + 3) / 6 and relu6(x + 3) / 6; NaN stays NaN.
FERRY_FLOAT_UNARY(Hardswish, "hardswish",
                  x != x ? x : x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f);
FERRY_FLOAT_UNARY(Hardsigmoid, "hardsigmoid",
                  x != x ? x : std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f);
FERRY_FLOAT_UNARY(Sqrt, "sqrt", std::sqrt(x));
FERRY_FLOAT_UNARY(Rsqrt, "rsqrt", 1.0f / std::sqrt(x));
FERRY_FLOAT_UNARY(Floor, "floor", std::floor(x));
FERRY_FLOAT_UNARY(Ceil, "ceil", std::ceil(x));

#undef FERRY_FLOAT_UNARY

template <typename Op, bool kInPlace>
absl::Status UnaryInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  const absl::string_view op = OpName<Op, kInPlace>();
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 1, 1, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, TensorArg(op, args, 0));
  if (!Op::kIntOk) FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *a, DType::kFloat32));
  if (kInPlace) {
    results[0] = ViewResult(*a);
  } else {
    results[0].layout = ContiguousLayout(a->dtype, Sizes(*a));
    results[0].view_offset = 0;
  }
  return absl::OkStatus();
}

template <typename Op, typename T>
[[gnu::noinline]] void UnaryStrided(const TensorRef& out, const TensorRef& a) {
  T* o = out.data_as<T>();
  const T* x = a.data_as<const T>();
  ForEachOffset<2>(out.rank, out.sizes.data(), {out.strides.data(), a.strides.data()},
                   [&](const std::array<int64_t, 2>& off) { o[off[0]] = Op::Apply(x[off[1]]); });
}

template <typename Op, typename T>
void UnaryLoop(const TensorRef& out, const TensorRef& a) {
  const int64_t n = ContiguousNumel(out);
  if (n < 0 || ContiguousNumel(a) != n) return UnaryStrided<Op, T>(out, a);
  T* o = out.data_as<T>();
  const T* x = a.data_as<const T>();
  if constexpr (std::is_same_v<T, float> && HasSimdLoop<Op>) {
    if (n >= kSimdMinElements) return (Loops().*Op::kLoop)(o, x, n);
  }
  for (int64_t i = 0; i < n; ++i) o[i] = Op::Apply(x[i]);
}

template <typename Op>
absl::Status UnaryKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  if (out.dtype == DType::kFloat32) {
    UnaryLoop<Op, float>(out, *args[0].tensor);
  } else if constexpr (Op::kIntOk) {
    UnaryLoop<Op, int64_t>(out, *args[0].tensor);
  }
  return absl::OkStatus();
}

template <typename Op>
absl::Status RegisterUnary(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema(std::string(OpName<Op, false>()), 1, 1, 1,
                                                     &UnaryInfer<Op, false>, &UnaryKernel<Op>)));
  return registry.Register(MakeSchema(std::string(OpName<Op, true>()), 1, 1, 1,
                                      &UnaryInfer<Op, true>, &UnaryKernel<Op>, /*written_args=*/{0},
                                      /*view_of=*/{0}));
}

// ---- clamp ----------------------------------------------------------------------------------

// out = f(a) elementwise, out and a of one shape: a flat loop when both are contiguous.
template <typename T, typename F>
void MapLoop(const TensorRef& out, const TensorRef& a, F f) {
  T* o = out.data_as<T>();
  const T* x = a.data_as<const T>();
  const int64_t n = ContiguousNumel(out);
  if (n >= 0 && ContiguousNumel(a) == n) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    return;
  }
  ForEachOffset<2>(out.rank, out.sizes.data(), {out.strides.data(), a.strides.data()},
                   [&](const std::array<int64_t, 2>& off) { o[off[0]] = f(x[off[1]]); });
}

// clamp(t a, number min, number max): float32, and int64 with whole-number bounds.
absl::Status ClampInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "clamp";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 3, 3, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, TensorArg(op, args, 0));
  for (int i = 1; i <= 2; ++i) {
    FERRY_ASSIGN_OR_RETURN(const Scalar* bound, NumberArg(op, args, i));
    if (a->dtype == DType::kInt64 && bound->kind == Scalar::Kind::kDouble &&
        bound->d != std::trunc(bound->d)) {
      return absl::UnimplementedError(absl::StrCat(
          op, ": argument ", i, " (", bound->d,
          ") is not a whole number; an int64 tensor is clamped to whole-number bounds"));
    }
    FERRY_RETURN_IF_ERROR(CheckNumberFits(op, i, *bound, a->dtype));
  }
  results[0].layout = ContiguousLayout(a->dtype, Sizes(*a));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// ATen's clamp: NaN stays NaN, and min > max gives max everywhere.
template <typename T>
T ClampOne(T x, T lo, T hi) {
  const T r = x < lo ? lo : x;
  return r > hi ? hi : r;
}

template <typename T>
void ClampLoop(const TensorRef& out, const TensorRef& a, T lo, T hi) {
  MapLoop<T>(out, a, [lo, hi](T x) { return ClampOne(x, lo, hi); });
}

absl::Status ClampKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  if (out.dtype == DType::kFloat32) {
    ClampLoop<float>(out, *args[0].tensor, ScalarAs<float>(*args[1].scalar),
                     ScalarAs<float>(*args[2].scalar));
  } else {
    ClampLoop<int64_t>(out, *args[0].tensor, ScalarAs<int64_t>(*args[1].scalar),
                       ScalarAs<int64_t>(*args[2].scalar));
  }
  return absl::OkStatus();
}

// ---- leaky_relu, elu ------------------------------------------------------------------------

// leaky_relu(t x, number negative_slope): x > 0 ? x : x * negative_slope.
// elu(t x, number alpha, number scale, number input_scale): x > 0 ? x * scale
// : (exp(x * input_scale) - 1) * alpha * scale, as ATen computes it. Both float32.
template <int kNumbers>
absl::Status FloatWithNumbersInfer(absl::string_view op, absl::Span<const OpArg> args,
                                   absl::Span<InferredResult> results) {
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 1 + kNumbers, 1 + kNumbers, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, TensorArg(op, args, 0));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *a, DType::kFloat32));
  for (int i = 1; i <= kNumbers; ++i) FERRY_RETURN_IF_ERROR(NumberArg(op, args, i).status());
  results[0].layout = ContiguousLayout(DType::kFloat32, Sizes(*a));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status LeakyReluInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  return FloatWithNumbersInfer<1>("leaky_relu", args, results);
}

absl::Status LeakyReluKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const float slope = ScalarAs<float>(*args[1].scalar);
  MapLoop<float>(*results[0], *args[0].tensor,
                 [slope](float x) { return x > 0.0f ? x : x * slope; });
  return absl::OkStatus();
}

absl::Status EluInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  return FloatWithNumbersInfer<3>("elu", args, results);
}

absl::Status EluKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const float negcoef = ScalarAs<float>(*args[1].scalar) * ScalarAs<float>(*args[2].scalar);
  const float poscoef = ScalarAs<float>(*args[2].scalar);
  const float input_scale = ScalarAs<float>(*args[3].scalar);
  MapLoop<float>(*results[0], *args[0].tensor, [=](float x) {
    return x > 0.0f ? x * poscoef : std::expm1(x * input_scale) * negcoef;
  });
  return absl::OkStatus();
}

// ---- pow ------------------------------------------------------------------------------------

// pow(t a, number exponent): float32 to a float32 power; int64 to a non-negative int power (ATen
// refuses negative ones for integers), wrapping on overflow.
absl::Status PowInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "pow";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, TensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const Scalar* e, NumberArg(op, args, 1));
  if (a->dtype == DType::kInt64) {
    if (e->kind == Scalar::Kind::kDouble) {
      return absl::UnimplementedError(absl::StrCat(
          op, ": an int64 tensor to a floating-point power (", e->d,
          ") has a float32 result in ATen; only int powers of int64 tensors are supported"));
    }
    if (ScalarAs<int64_t>(*e) < 0) {
      return OpError(op, "an int64 tensor to the negative power ", ScalarAs<int64_t>(*e),
                     ": integers to negative integer powers are not allowed");
    }
  }
  results[0].layout = ContiguousLayout(a->dtype, Sizes(*a));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

int64_t PowInt(int64_t base, int64_t exponent) {
  uint64_t result = 1;
  uint64_t b = static_cast<uint64_t>(base);
  for (uint64_t e = static_cast<uint64_t>(exponent); e != 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}

absl::Status PowKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  if (out.dtype == DType::kFloat32) {
    const float e = ScalarAs<float>(*args[1].scalar);
    if (e == 2.0f) {
      MapLoop<float>(out, *args[0].tensor, [](float x) { return x * x; });
    } else {
      MapLoop<float>(out, *args[0].tensor, [e](float x) { return std::pow(x, e); });
    }
  } else {
    const int64_t e = ScalarAs<int64_t>(*args[1].scalar);
    MapLoop<int64_t>(out, *args[0].tensor, [e](int64_t x) { return PowInt(x, e); });
  }
  return absl::OkStatus();
}

// ---- fill_, copy_ ---------------------------------------------------------------------------

absl::Status FillInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "fill_";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, TensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const Scalar* s, NumberArg(op, args, 1));
  FERRY_RETURN_IF_ERROR(CheckNumberFits(op, 1, *s, a->dtype));
  results[0] = ViewResult(*a);
  return absl::OkStatus();
}

template <typename T>
void FillLoop(const TensorRef& out, T value) {
  T* o = out.data_as<T>();
  if (IsContiguousFast(out)) {
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = value;
    return;
  }
  ForEachOffset<1>(out.rank, out.sizes.data(), {out.strides.data()},
                   [&](const std::array<int64_t, 1>& off) { o[off[0]] = value; });
}

absl::Status FillKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  if (out.dtype == DType::kFloat32) {
    FillLoop<float>(out, ScalarAs<float>(*args[1].scalar));
  } else {
    FillLoop<int64_t>(out, ScalarAs<int64_t>(*args[1].scalar));
  }
  return absl::OkStatus();
}

absl::Status CopyInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "copy_";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* dst, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* src, AnyTensorArg(op, args, 1));
  FERRY_RETURN_IF_ERROR(CheckSameDType(op, 1, *src, 0, *dst));
  if (!BroadcastsTo(Sizes(*src), Sizes(*dst))) {
    return OpError(op, "argument 1 has shape ", ShapeString(*src), ", which does not broadcast to ",
                   ShapeString(*dst));
  }
  results[0] = ViewResult(*dst);
  return absl::OkStatus();
}

absl::Status CopyKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  BroadcastCopy(*results[0], *args[1].tensor);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterElementwiseOps(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(RegisterBinary<Add>(registry));
  FERRY_RETURN_IF_ERROR(RegisterBinary<Sub>(registry));
  FERRY_RETURN_IF_ERROR(RegisterBinary<Mul>(registry));
  FERRY_RETURN_IF_ERROR(RegisterBinary<Div>(registry));
  FERRY_RETURN_IF_ERROR(RegisterBinary<Maximum>(registry));
  FERRY_RETURN_IF_ERROR(RegisterBinary<Minimum>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Relu>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Neg>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Abs>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Exp>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Log>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Sin>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Cos>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Tanh>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Sigmoid>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Silu>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Gelu>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<GeluTanh>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Hardswish>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Hardsigmoid>(registry));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("leaky_relu", 2, 2, 1, &LeakyReluInfer, &LeakyReluKernel)));
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema("elu", 4, 4, 1, &EluInfer, &EluKernel)));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Sqrt>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Rsqrt>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Floor>(registry));
  FERRY_RETURN_IF_ERROR(RegisterUnary<Ceil>(registry));
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema("clamp", 3, 3, 1, &ClampInfer, &ClampKernel)));
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema("pow", 2, 2, 1, &PowInfer, &PowKernel)));
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema("fill_", 2, 2, 1, &FillInfer, &FillKernel,
                                                     /*written_args=*/{0}, /*view_of=*/{0})));
  return registry.Register(
      MakeSchema("copy_", 2, 2, 1, &CopyInfer, &CopyKernel, /*written_args=*/{0}, /*view_of=*/{0}));
}

}  // namespace ferry::internal
