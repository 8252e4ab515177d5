// Host ops that produce or consume other dtypes than their arguments': eq (a comparison with a
// number, giving bool), where (a selection by a bool condition) and to_dtype (a cast).
//
// They take every dtype (base/tensor.h DType); float16 and bfloat16 are computed in float.
// Results are row-major contiguous.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "ferry/base/float16.h"
#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_ops.h"
#include "ferry/kernels/internal/op_util.h"

namespace ferry::internal {
namespace {

// Element types with their own meaning over a C++ storage type: bool (one byte, 0 or 1), and the
// 16-bit floats (their bits).
struct BoolElem {
  uint8_t v;
};
struct HalfElem {
  uint16_t bits;
};
struct BF16Elem {
  uint16_t bits;
};

// Calls f(T{}) with T the element type of `dtype`.
template <typename F>
void Dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f(float{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kBool:
      return f(BoolElem{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt8:
      return f(int8_t{});
    case DType::kUInt8:
      return f(uint8_t{});
    case DType::kInt16:
      return f(int16_t{});
    case DType::kUInt16:
      return f(uint16_t{});
    case DType::kFloat16:
      return f(HalfElem{});
    case DType::kBFloat16:
      return f(BF16Elem{});
    case DType::kFloat64:
      return f(double{});
  }
}

// An element as the number it holds: bool as 0 or 1, the 16-bit floats as float.
template <typename T>
auto Widen(T x) {
  if constexpr (std::is_same_v<T, BoolElem>) {
    return static_cast<uint8_t>(x.v != 0 ? 1 : 0);
  } else if constexpr (std::is_same_v<T, HalfElem>) {
    return Float16ToFloat(x.bits);
  } else if constexpr (std::is_same_v<T, BF16Elem>) {
    return BFloat16ToFloat(x.bits);
  } else {
    return x;
  }
}

// ---- eq -------------------------------------------------------------------------------------

// eq(t self, number other) -> bool: self == other elementwise. A float32 tensor compares in
// float32 (other rounded to float32, as PyTorch does); an integer or bool tensor compares with an
// int or bool exactly and with a double as a double.
absl::Status EqInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "eq";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, AnyTensorArg(op, args, 0));
  FERRY_RETURN_IF_ERROR(NumberArg(op, args, 1).status());
  results[0].layout = ContiguousLayout(DType::kBool, Sizes(*a));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// A floating-point tensor compares in its own dtype (the number rounded to it, as PyTorch does:
// a Python scalar does not promote a tensor).
template <typename T>
bool Equals(T x, const Scalar& s) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return x == static_cast<T>(s.AsDouble());
  } else if constexpr (std::is_same_v<T, HalfElem>) {
    return Widen(x) == Float16ToFloat(FloatToFloat16(static_cast<float>(s.AsDouble())));
  } else if constexpr (std::is_same_v<T, BF16Elem>) {
    return Widen(x) == BFloat16ToFloat(FloatToBFloat16(static_cast<float>(s.AsDouble())));
  } else {
    if (s.kind == Scalar::Kind::kDouble) return static_cast<double>(Widen(x)) == s.d;
    const int64_t v = s.kind == Scalar::Kind::kInt ? s.i : static_cast<int64_t>(s.b);
    return static_cast<int64_t>(Widen(x)) == v;
  }
}

absl::Status EqKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& a = *args[0].tensor;
  const Scalar& s = *args[1].scalar;
  const TensorRef& out = *results[0];
  uint8_t* o = out.data_as<uint8_t>();
  Dispatch(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.data_as<const T>();
    ForEachOffset<2>(out.rank, out.sizes.data(), {out.strides.data(), a.strides.data()},
                     [&](const std::array<int64_t, 2>& off) {
                       o[off[0]] = Equals<T>(x[off[1]], s) ? 1 : 0;
                     });
  });
  return absl::OkStatus();
}

// ---- where ----------------------------------------------------------------------------------

// where(t condition, t self, t other): condition ? self : other, the three broadcast together;
// condition bool, self and other of one dtype, which the result has.
absl::Status WhereInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "where";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 3, 3, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* cond, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, AnyTensorArg(op, args, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* b, AnyTensorArg(op, args, 2));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *cond, DType::kBool));
  FERRY_RETURN_IF_ERROR(CheckSameDType(op, 2, *b, 1, *a));
  std::vector<int64_t> ab;
  if (!BroadcastShapes(Sizes(*a), Sizes(*b), &ab)) {
    return OpError(op, "argument 2 has shape ", ShapeString(*b), ", which does not broadcast with ",
                   ShapeString(*a));
  }
  std::vector<int64_t> sizes;
  if (!BroadcastShapes(Sizes(*cond), ab, &sizes)) {
    return OpError(op, "argument 0 has shape ", ShapeString(*cond),
                   ", which does not broadcast with ", ShapeString(ab));
  }
  results[0].layout = ContiguousLayout(a->dtype, sizes);
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status WhereKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& cond = *args[0].tensor;
  const TensorRef& a = *args[1].tensor;
  const TensorRef& b = *args[2].tensor;
  const TensorRef& out = *results[0];
  int64_t cs[kMaxRank];
  int64_t as[kMaxRank];
  int64_t bs[kMaxRank];
  BroadcastStrides(cond, out.rank, out.sizes.data(), cs);
  BroadcastStrides(a, out.rank, out.sizes.data(), as);
  BroadcastStrides(b, out.rank, out.sizes.data(), bs);
  const uint8_t* c = cond.data_as<const uint8_t>();
  Dispatch(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data_as<T>();
    const T* x = a.data_as<const T>();
    const T* y = b.data_as<const T>();
    ForEachOffset<4>(out.rank, out.sizes.data(), {out.strides.data(), cs, as, bs},
                     [&](const std::array<int64_t, 4>& off) {
                       o[off[0]] = c[off[1]] != 0 ? x[off[2]] : y[off[3]];
                     });
  });
  return absl::OkStatus();
}

// ---- to_dtype -------------------------------------------------------------------------------

// to_dtype(t self, int dtype): self converted to the DType numbered `dtype` (base/tensor.h).
// To bool: nonzero (NaN included) is true. Float to integer: truncation toward zero, clamped to
// the integer's range, NaN to 0 (PyTorch leaves the last two undefined). An integer to a narrower
// one wraps, as in PyTorch. To float16 and bfloat16: through float, rounded to nearest even.
absl::Status ToDTypeInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "to_dtype";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(int64_t code, IntArg(op, args, 1));
  if (code < 0 || code > 255 || !IsKnownDType(static_cast<DType>(code))) {
    return OpError(op, "argument 1 (", code, ") names no dtype");
  }
  results[0].layout = ContiguousLayout(static_cast<DType>(code), Sizes(*a));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// `w` (a widened element: a C++ number) as an element of type To.
template <typename To, typename W>
To Narrow(W w) {
  if constexpr (std::is_same_v<To, BoolElem>) {
    return BoolElem{static_cast<uint8_t>(w != W{0} ? 1 : 0)};
  } else if constexpr (std::is_same_v<To, HalfElem>) {
    return HalfElem{FloatToFloat16(static_cast<float>(w))};
  } else if constexpr (std::is_same_v<To, BF16Elem>) {
    return BF16Elem{FloatToBFloat16(static_cast<float>(w))};
  } else if constexpr (std::is_floating_point_v<W> && std::is_integral_v<To>) {
    // Compared as doubles: int64's max rounds up to 2^63, which is already out of range.
    constexpr double kHigh = static_cast<double>(std::numeric_limits<To>::max());
    constexpr double kLow = static_cast<double>(std::numeric_limits<To>::min());
    const double v = static_cast<double>(w);
    if (v != v) return 0;
    if (v >= kHigh) return std::numeric_limits<To>::max();
    if (v <= kLow) return std::numeric_limits<To>::min();
    return static_cast<To>(v);
  } else if constexpr (std::is_integral_v<W> && std::is_integral_v<To>) {
    // Two's complement wrap, through the unsigned type of To's width.
    using U = std::make_unsigned_t<To>;
    return static_cast<To>(static_cast<U>(static_cast<uint64_t>(static_cast<int64_t>(w))));
  } else {
    return static_cast<To>(w);
  }
}

template <typename To, typename From>
To Convert(From x) {
  return Narrow<To>(Widen(x));
}

absl::Status ToDTypeKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& a = *args[0].tensor;
  const TensorRef& out = *results[0];
  Dispatch(out.dtype, [&](auto to_tag) {
    using To = decltype(to_tag);
    To* o = out.data_as<To>();
    Dispatch(a.dtype, [&](auto from_tag) {
      using From = decltype(from_tag);
      const From* x = a.data_as<const From>();
      ForEachOffset<2>(out.rank, out.sizes.data(), {out.strides.data(), a.strides.data()},
                       [&](const std::array<int64_t, 2>& off) {
                         o[off[0]] = Convert<To, From>(x[off[1]]);
                       });
    });
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterDTypeOps(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema("eq", 2, 2, 1, &EqInfer, &EqKernel)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("where", 3, 3, 1, &WhereInfer, &WhereKernel)));
  return registry.Register(MakeSchema("to_dtype", 2, 2, 1, &ToDTypeInfer, &ToDTypeKernel));
}

}  // namespace ferry::internal
