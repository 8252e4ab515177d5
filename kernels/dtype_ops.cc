// Host ops that produce or consume other dtypes than their arguments': eq, ne, lt, le, gt and ge
// (comparisons with a tensor or a number, giving bool), where (a selection by a bool condition),
// to_dtype (a cast), and quantize and dequantize (float32 to an integer dtype by a scale and zero
// point, and back).
//
// They take every dtype (base/tensor.h DType); float16 and bfloat16 are computed in float.
// Results are row-major contiguous.
#include <algorithm>
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

// ---- comparisons ----------------------------------------------------------------------------

// eq|ne|lt|le|gt|ge(t self, t other | number) -> bool, elementwise. With a number: a
// floating-point tensor compares in its own dtype (the number rounded to it, as PyTorch does: a
// Python scalar does not promote a tensor); an integer or bool tensor compares with an int or bool
// exactly and with a double as a double. With a tensor: both of one dtype, broadcast together.
struct Eq {
  static constexpr const char* kName = "eq";
  template <typename A>
  static bool Apply(A a, A b) {
    return a == b;
  }
};
struct Ne {
  static constexpr const char* kName = "ne";
  template <typename A>
  static bool Apply(A a, A b) {
    return a != b;
  }
};
struct Lt {
  static constexpr const char* kName = "lt";
  template <typename A>
  static bool Apply(A a, A b) {
    return a < b;
  }
};
struct Le {
  static constexpr const char* kName = "le";
  template <typename A>
  static bool Apply(A a, A b) {
    return a <= b;
  }
};
struct Gt {
  static constexpr const char* kName = "gt";
  template <typename A>
  static bool Apply(A a, A b) {
    return a > b;
  }
};
struct Ge {
  static constexpr const char* kName = "ge";
  template <typename A>
  static bool Apply(A a, A b) {
    return a >= b;
  }
};

template <typename Cmp>
absl::Status CompareInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = Cmp::kName;
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, AnyTensorArg(op, args, 0));
  if (args[1].tensor == nullptr) {
    FERRY_RETURN_IF_ERROR(NumberArg(op, args, 1).status());
    results[0].layout = ContiguousLayout(DType::kBool, Sizes(*a));
    results[0].view_offset = 0;
    return absl::OkStatus();
  }
  FERRY_ASSIGN_OR_RETURN(const TensorRef* b, AnyTensorArg(op, args, 1));
  if (b->dtype != a->dtype) {
    return absl::UnimplementedError(absl::StrCat(op, ": argument 1 has dtype ", DTypeName(b->dtype),
                                                 " and argument 0 ", DTypeName(a->dtype),
                                                 "; only tensors of one dtype are compared"));
  }
  std::vector<int64_t> sizes;
  if (!BroadcastShapes(Sizes(*a), Sizes(*b), &sizes)) {
    return OpError(op, "argument 1 has shape ", ShapeString(*b), ", which does not broadcast with ",
                   ShapeString(*a));
  }
  results[0].layout = ContiguousLayout(DType::kBool, sizes);
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// x compared with the number s under the rules above.
template <typename Cmp, typename T>
bool CompareNumber(T x, const Scalar& s) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return Cmp::Apply(x, static_cast<T>(s.AsDouble()));
  } else if constexpr (std::is_same_v<T, HalfElem>) {
    return Cmp::Apply(Widen(x), Float16ToFloat(FloatToFloat16(static_cast<float>(s.AsDouble()))));
  } else if constexpr (std::is_same_v<T, BF16Elem>) {
    return Cmp::Apply(Widen(x), BFloat16ToFloat(FloatToBFloat16(static_cast<float>(s.AsDouble()))));
  } else {
    if (s.kind == Scalar::Kind::kDouble) return Cmp::Apply(static_cast<double>(Widen(x)), s.d);
    const int64_t v = s.kind == Scalar::Kind::kInt ? s.i : static_cast<int64_t>(s.b);
    return Cmp::Apply(static_cast<int64_t>(Widen(x)), v);
  }
}

template <typename Cmp>
absl::Status CompareKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& a = *args[0].tensor;
  const TensorRef& out = *results[0];
  uint8_t* o = out.data_as<uint8_t>();
  if (args[1].tensor == nullptr) {
    const Scalar& s = *args[1].scalar;
    Dispatch(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* x = a.data_as<const T>();
      ForEachOffset<2>(out.rank, out.sizes.data(), {out.strides.data(), a.strides.data()},
                       [&](const std::array<int64_t, 2>& off) {
                         o[off[0]] = CompareNumber<Cmp, T>(x[off[1]], s) ? 1 : 0;
                       });
    });
    return absl::OkStatus();
  }
  const TensorRef& b = *args[1].tensor;
  int64_t as[kMaxRank];
  int64_t bs[kMaxRank];
  BroadcastStrides(a, out.rank, out.sizes.data(), as);
  BroadcastStrides(b, out.rank, out.sizes.data(), bs);
  Dispatch(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.data_as<const T>();
    const T* y = b.data_as<const T>();
    ForEachOffset<3>(out.rank, out.sizes.data(), {out.strides.data(), as, bs},
                     [&](const std::array<int64_t, 3>& off) {
                       o[off[0]] = Cmp::Apply(Widen(x[off[1]]), Widen(y[off[2]])) ? 1 : 0;
                     });
  });
  return absl::OkStatus();
}

template <typename Cmp>
absl::Status RegisterCompare(OpRegistry& registry) {
  return registry.Register(
      MakeSchema(Cmp::kName, 2, 2, 1, &CompareInfer<Cmp>, &CompareKernel<Cmp>));
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

// ---- quantize, dequantize --------------------------------------------------------------------

// quantize(t x, scale, zero_point, int qmin, int qmax, int dtype): x (float32) to the integer
// DType numbered `dtype` (int8, uint8, int16, uint16 or int32) as ExecuTorch's
// quantize_per_tensor: clamp(zero_point + nearbyint(float(1 / float(scale)) * x), qmin, qmax).
// dequantize(t q, scale, zero_point, int qmin, int qmax): q (one of those dtypes) to float32 as
// (q - zero_point) * float(scale); qmin and qmax are checked against q's dtype, not applied.
// scale is a number or a one-element float32 or float64 tensor, zero_point a number or a
// one-element int64 or int32 tensor (ExecuTorch's .Tensor overloads); a scale that is not
// positive and finite is refused, at load for a number and when the call runs for a tensor.

bool IsQuantizedDType(DType d) {
  return d == DType::kInt8 || d == DType::kUInt8 || d == DType::kInt16 || d == DType::kUInt16 ||
         d == DType::kInt32;
}

void QuantRange(DType d, int64_t* lo, int64_t* hi) {
  Dispatch(d, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      *lo = std::numeric_limits<T>::min();
      *hi = std::numeric_limits<T>::max();
    }
  });
}

// Argument i (scale or zero_point): a number, or a tensor of one element of `dtypes`.
absl::Status CheckQuantParam(absl::string_view op, absl::Span<const OpArg> args, int i,
                             const char* what, DType d1, DType d2) {
  if (args[i].scalar != nullptr) {
    FERRY_ASSIGN_OR_RETURN(const Scalar* s, NumberArg(op, args, i));
    if (i == 1 && !(s->AsDouble() > 0 && std::isfinite(s->AsDouble()))) {
      return OpError(op, "argument 1 (scale) is ", s->AsDouble(), ", not positive and finite");
    }
    if (i == 2 && s->kind == Scalar::Kind::kDouble) {
      return OpError(op, "argument 2 (zero_point) is ", s->d, ", not an int");
    }
    return absl::OkStatus();
  }
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, i));
  if ((t->dtype != d1 && t->dtype != d2) || t->numel() != 1) {
    return OpError(op, "argument ", i, " (", what, ") is a ", DTypeName(t->dtype),
                   " tensor of shape ", ShapeString(*t), ", expected a number or one ",
                   DTypeName(d1), " or ", DTypeName(d2), " element");
  }
  return absl::OkStatus();
}

// qmin and qmax (arguments 3 and 4) inside the range of `d`, qmin <= qmax.
absl::Status CheckQuantRange(absl::string_view op, absl::Span<const OpArg> args, DType d) {
  FERRY_ASSIGN_OR_RETURN(const int64_t qmin, IntArg(op, args, 3));
  FERRY_ASSIGN_OR_RETURN(const int64_t qmax, IntArg(op, args, 4));
  int64_t lo = 0, hi = 0;
  QuantRange(d, &lo, &hi);
  if (qmin < lo || qmax > hi || qmin > qmax) {
    return OpError(op, "quant_min and quant_max are [", qmin, ", ", qmax, "], not inside ",
                   DTypeName(d), "'s [", lo, ", ", hi, "] in order");
  }
  return absl::OkStatus();
}

absl::Status QuantizeInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "quantize";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 6, 6, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, AnyTensorArg(op, args, 0));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *x, DType::kFloat32));
  FERRY_RETURN_IF_ERROR(CheckQuantParam(op, args, 1, "scale", DType::kFloat32, DType::kFloat64));
  FERRY_RETURN_IF_ERROR(CheckQuantParam(op, args, 2, "zero_point", DType::kInt64, DType::kInt32));
  FERRY_ASSIGN_OR_RETURN(const int64_t code, IntArg(op, args, 5));
  const DType d = static_cast<DType>(code);
  if (code < 0 || code > 255 || !IsKnownDType(d) || !IsQuantizedDType(d)) {
    return OpError(op, "argument 5 (", code,
                   ") names no dtype quantize writes (int8, uint8, int16, uint16, int32)");
  }
  FERRY_RETURN_IF_ERROR(CheckQuantRange(op, args, d));
  results[0].layout = ContiguousLayout(d, Sizes(*x));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status DequantizeInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "dequantize";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 5, 5, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* q, AnyTensorArg(op, args, 0));
  if (!IsQuantizedDType(q->dtype)) {
    return OpError(op, "argument 0 has dtype ", DTypeName(q->dtype),
                   ", expected int8, uint8, int16, uint16 or int32");
  }
  FERRY_RETURN_IF_ERROR(CheckQuantParam(op, args, 1, "scale", DType::kFloat32, DType::kFloat64));
  FERRY_RETURN_IF_ERROR(CheckQuantParam(op, args, 2, "zero_point", DType::kInt64, DType::kInt32));
  FERRY_RETURN_IF_ERROR(CheckQuantRange(op, args, q->dtype));
  results[0].layout = ContiguousLayout(DType::kFloat32, Sizes(*q));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// The scale and zero point of a call, from numbers or one-element tensors.
absl::Status QuantParams(absl::string_view op, absl::Span<const OpArg> args, double* scale,
                         int64_t* zero_point) {
  if (args[1].scalar != nullptr) {
    *scale = args[1].scalar->AsDouble();
  } else {
    const TensorRef& t = *args[1].tensor;
    *scale = t.dtype == DType::kFloat64 ? *t.data_as<const double>() : *t.data_as<const float>();
    if (!(*scale > 0 && std::isfinite(*scale))) {
      return OpError(op, "the scale tensor holds ", *scale, ", not positive and finite");
    }
  }
  if (args[2].scalar != nullptr) {
    *zero_point = ScalarAs<int64_t>(*args[2].scalar);
  } else {
    const TensorRef& t = *args[2].tensor;
    *zero_point =
        t.dtype == DType::kInt64 ? *t.data_as<const int64_t>() : *t.data_as<const int32_t>();
  }
  return absl::OkStatus();
}

absl::Status QuantizeKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  double scale = 1;
  int64_t zero_point = 0;
  FERRY_RETURN_IF_ERROR(QuantParams("quantize", args, &scale, &zero_point));
  const TensorRef& x = *args[0].tensor;
  const TensorRef& out = *results[0];
  const int64_t qmin = ScalarAs<int64_t>(*args[3].scalar);
  const int64_t qmax = ScalarAs<int64_t>(*args[4].scalar);
  const float inv_scale = 1.0f / static_cast<float>(scale);
  const int32_t zp = static_cast<int32_t>(zero_point);
  const double lo = static_cast<double>(qmin), hi = static_cast<double>(qmax);
  const float* xd = x.data_as<const float>();
  Dispatch(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      T* o = out.data_as<T>();
      ForEachOffset<2>(
          out.rank, out.sizes.data(), {out.strides.data(), x.strides.data()},
          [&](const std::array<int64_t, 2>& off) {
            // In double, so that no value overflows before the clamp; NaN
            // gives quant_min, as ExecuTorch's cast does on x86-64.
            const double v = zp + static_cast<double>(std::nearbyint(inv_scale * xd[off[1]]));
            o[off[0]] = static_cast<T>(v != v ? qmin : static_cast<int64_t>(std::clamp(v, lo, hi)));
          });
    }
  });
  return absl::OkStatus();
}

absl::Status DequantizeKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  double scale = 1;
  int64_t zero_point = 0;
  FERRY_RETURN_IF_ERROR(QuantParams("dequantize", args, &scale, &zero_point));
  const TensorRef& q = *args[0].tensor;
  const TensorRef& out = *results[0];
  const float s = static_cast<float>(scale);
  const int32_t zp = static_cast<int32_t>(zero_point);
  float* o = out.data_as<float>();
  Dispatch(q.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      const T* x = q.data_as<const T>();
      ForEachOffset<2>(out.rank, out.sizes.data(), {out.strides.data(), q.strides.data()},
                       [&](const std::array<int64_t, 2>& off) {
                         o[off[0]] = static_cast<float>(static_cast<int64_t>(x[off[1]]) - zp) * s;
                       });
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterDTypeOps(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(RegisterCompare<Eq>(registry));
  FERRY_RETURN_IF_ERROR(RegisterCompare<Ne>(registry));
  FERRY_RETURN_IF_ERROR(RegisterCompare<Lt>(registry));
  FERRY_RETURN_IF_ERROR(RegisterCompare<Le>(registry));
  FERRY_RETURN_IF_ERROR(RegisterCompare<Gt>(registry));
  FERRY_RETURN_IF_ERROR(RegisterCompare<Ge>(registry));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("where", 3, 3, 1, &WhereInfer, &WhereKernel)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("quantize", 6, 6, 1, &QuantizeInfer, &QuantizeKernel)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("dequantize", 5, 5, 1, &DequantizeInfer, &DequantizeKernel)));
  return registry.Register(MakeSchema("to_dtype", 2, 2, 1, &ToDTypeInfer, &ToDTypeKernel));
}

}  // namespace ferry::internal
