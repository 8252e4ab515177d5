// CUDA kernels of the elementwise family (kernels/elementwise_ops.cc on the host): binary and unary
// ops with broadcasting and their in-place forms, clamp, fill_, copy_ and the broadcast copy other
// families build on.
#include "ferry/kernels/cuda/internal/cuda_common.cuh"
#include <string>

namespace ferry::cuda_kernels {
namespace {

// ---- Elementwise functors -------------------------------------------------------------------

// int64 arithmetic wraps (two's complement), as on the host.
__device__ __forceinline__ int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
__device__ __forceinline__ int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
__device__ __forceinline__ int64_t WrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

struct Add {
  static constexpr const char* kName = "add";
  static constexpr bool kIntOk = true;
  __device__ static float Apply(float a, float b) { return a + b; }
  __device__ static int64_t Apply(int64_t a, int64_t b) { return WrapAdd(a, b); }
};
struct Sub {
  static constexpr const char* kName = "sub";
  static constexpr bool kIntOk = true;
  __device__ static float Apply(float a, float b) { return a - b; }
  __device__ static int64_t Apply(int64_t a, int64_t b) { return WrapSub(a, b); }
};
struct Mul {
  static constexpr const char* kName = "mul";
  static constexpr bool kIntOk = true;
  __device__ static float Apply(float a, float b) { return a * b; }
  __device__ static int64_t Apply(int64_t a, int64_t b) { return WrapMul(a, b); }
};
struct Div {
  static constexpr const char* kName = "div";
  static constexpr bool kIntOk = false;
  __device__ static float Apply(float a, float b) { return a / b; }
};
// NaN propagates, as in PyTorch.
struct Maximum {
  static constexpr const char* kName = "maximum";
  static constexpr bool kIntOk = true;
  __device__ static float Apply(float a, float b) { return (a > b || a != a) ? a : b; }
  __device__ static int64_t Apply(int64_t a, int64_t b) { return a > b ? a : b; }
};
struct Minimum {
  static constexpr const char* kName = "minimum";
  static constexpr bool kIntOk = true;
  __device__ static float Apply(float a, float b) { return (a < b || a != a) ? a : b; }
  __device__ static int64_t Apply(int64_t a, int64_t b) { return a < b ? a : b; }
};

struct Relu {
  static constexpr const char* kName = "relu";
  static constexpr bool kIntOk = true;
  // NaN stays NaN (the comparison is false).
  __device__ static float Apply(float a) { return a < 0.0f ? 0.0f : a; }
  __device__ static int64_t Apply(int64_t a) { return a < 0 ? 0 : a; }
};
struct Neg {
  static constexpr const char* kName = "neg";
  static constexpr bool kIntOk = true;
  __device__ static float Apply(float a) { return -a; }
  __device__ static int64_t Apply(int64_t a) { return WrapSub(0, a); }
};
struct Abs {
  static constexpr const char* kName = "abs";
  static constexpr bool kIntOk = true;
  __device__ static float Apply(float a) { return fabsf(a); }
  __device__ static int64_t Apply(int64_t a) { return a < 0 ? WrapSub(0, a) : a; }
};

// float32 only: the kernels dispatch on kIntOk with `if constexpr`, so no int64 Apply is needed.
#define FERRY_CUDA_FLOAT_UNARY(Type, name, expr)            \
  struct Type {                                             \
    static constexpr const char* kName = name;              \
    static constexpr bool kIntOk = false;                   \
    __device__ static float Apply(float x) { return expr; } \
  }

FERRY_CUDA_FLOAT_UNARY(Exp, "exp", expf(x));
FERRY_CUDA_FLOAT_UNARY(Log, "log", logf(x));
FERRY_CUDA_FLOAT_UNARY(Sin, "sin", sinf(x));
FERRY_CUDA_FLOAT_UNARY(Cos, "cos", cosf(x));
FERRY_CUDA_FLOAT_UNARY(Tanh, "tanh", tanhf(x));
FERRY_CUDA_FLOAT_UNARY(Sigmoid, "sigmoid", 1.0f / (1.0f + expf(-x)));
FERRY_CUDA_FLOAT_UNARY(Silu, "silu", x / (1.0f + expf(-x)));
// The exact (erf) form, PyTorch's default.
FERRY_CUDA_FLOAT_UNARY(Gelu, "gelu", 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)));
FERRY_CUDA_FLOAT_UNARY(Sqrt, "sqrt", sqrtf(x));
// 1 / sqrtf rather than rsqrtf: correctly rounded like the host's 1 / std::sqrt.
FERRY_CUDA_FLOAT_UNARY(Rsqrt, "rsqrt", 1.0f / sqrtf(x));
FERRY_CUDA_FLOAT_UNARY(Floor, "floor", floorf(x));
FERRY_CUDA_FLOAT_UNARY(Ceil, "ceil", ceilf(x));

#undef FERRY_CUDA_FLOAT_UNARY

// ---- Elementwise kernels --------------------------------------------------------------------

template <typename Op, typename T>
__global__ void BinaryFlat(T* o, const T* a, const T* b, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) o[i] = Op::Apply(a[i], b[i]);
}

template <typename Op, typename T>
__global__ void BinaryStrided(T* o, const T* a, const T* b, Offsets<3> l, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    int64_t off[3];
    Decompose(l, i, off);
    o[off[0]] = Op::Apply(a[off[1]], b[off[2]]);
  }
}

template <typename Op, typename T>
__global__ void BinaryScalarFlat(T* o, const T* a, T s, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) o[i] = Op::Apply(a[i], s);
}

template <typename Op, typename T>
__global__ void BinaryScalarStrided(T* o, const T* a, T s, Offsets<2> l, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    int64_t off[2];
    Decompose(l, i, off);
    o[off[0]] = Op::Apply(a[off[1]], s);
  }
}

template <typename Op, typename T>
__global__ void UnaryFlat(T* o, const T* a, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) o[i] = Op::Apply(a[i]);
}

template <typename Op, typename T>
__global__ void UnaryStrided(T* o, const T* a, Offsets<2> l, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    int64_t off[2];
    Decompose(l, i, off);
    o[off[0]] = Op::Apply(a[off[1]]);
  }
}

// ATen's clamp, as on the host: NaN stays NaN, and min > max gives max everywhere.
template <typename T>
__device__ __forceinline__ T ClampOne(T x, T lo, T hi) {
  const T r = x < lo ? lo : x;
  return r > hi ? hi : r;
}

template <typename T>
__global__ void ClampFlat(T* o, const T* a, T lo, T hi, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) o[i] = ClampOne(a[i], lo, hi);
}

template <typename T>
__global__ void ClampStrided(T* o, const T* a, T lo, T hi, Offsets<2> l, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    int64_t off[2];
    Decompose(l, i, off);
    o[off[0]] = ClampOne(a[off[1]], lo, hi);
  }
}

template <typename T>
__global__ void FillFlat(T* o, T value, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) o[i] = value;
}

template <typename T>
__global__ void FillStrided(T* o, T value, Offsets<1> l, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    int64_t off[1];
    Decompose(l, i, off);
    o[off[0]] = value;
  }
}


// ---- Elementwise launchers ------------------------------------------------------------------

template <typename Op, typename T>
absl::Status RunBinary(const TensorRef& out, const TensorRef& a, const OpArg& rhs) {
  const int64_t n = out.numel();
  if (n == 0) return absl::OkStatus();
  T* o = out.data_as<T>();
  const T* x = a.data_as<const T>();
  const bool fast = IsContiguousFast(out) && IsContiguousFast(a) && SameSizes(out, a);
  int64_t a_strides[kMaxRank];
  BroadcastStrides(a, out.rank, out.sizes.data(), a_strides);
  if (rhs.scalar != nullptr) {
    const T s = ScalarAs<T>(*rhs.scalar);
    if (fast) {
      BinaryScalarFlat<Op, T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, x, s, n);
      return LaunchStatus(Op::kName, "BinaryScalarFlat");
    }
    int64_t count = 0;
    const Offsets<2> l =
        Collapse<2>(out.rank, out.sizes.data(), {out.strides.data(), a_strides}, &count);
    BinaryScalarStrided<Op, T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, x, s, l, n);
    return LaunchStatus(Op::kName, "BinaryScalarStrided");
  }
  const TensorRef& b = *rhs.tensor;
  const T* y = b.data_as<const T>();
  if (fast && IsContiguousFast(b) && SameSizes(out, b)) {
    BinaryFlat<Op, T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, x, y, n);
    return LaunchStatus(Op::kName, "BinaryFlat");
  }
  int64_t b_strides[kMaxRank];
  BroadcastStrides(b, out.rank, out.sizes.data(), b_strides);
  int64_t count = 0;
  const Offsets<3> l =
      Collapse<3>(out.rank, out.sizes.data(), {out.strides.data(), a_strides, b_strides}, &count);
  BinaryStrided<Op, T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, x, y, l, n);
  return LaunchStatus(Op::kName, "BinaryStrided");
}

// add, sub, ... and their in-place forms (the result aliases argument 0 with its layout).
template <typename Op>
absl::Status BinaryKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  if (out.dtype == DType::kFloat32) return RunBinary<Op, float>(out, *args[0].tensor, args[1]);
  if constexpr (Op::kIntOk) {
    if (out.dtype == DType::kInt64) return RunBinary<Op, int64_t>(out, *args[0].tensor, args[1]);
  }
  return UnsupportedDType(Op::kName, out.dtype);
}

template <typename Op, typename T>
absl::Status RunUnary(const TensorRef& out, const TensorRef& a) {
  const int64_t n = out.numel();
  if (n == 0) return absl::OkStatus();
  T* o = out.data_as<T>();
  const T* x = a.data_as<const T>();
  if (IsContiguousFast(out) && IsContiguousFast(a)) {
    UnaryFlat<Op, T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, x, n);
    return LaunchStatus(Op::kName, "UnaryFlat");
  }
  int64_t count = 0;
  const Offsets<2> l =
      Collapse<2>(out.rank, out.sizes.data(), {out.strides.data(), a.strides.data()}, &count);
  UnaryStrided<Op, T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, x, l, n);
  return LaunchStatus(Op::kName, "UnaryStrided");
}

template <typename Op>
absl::Status UnaryKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  if (out.dtype == DType::kFloat32) return RunUnary<Op, float>(out, *args[0].tensor);
  if constexpr (Op::kIntOk) {
    if (out.dtype == DType::kInt64) return RunUnary<Op, int64_t>(out, *args[0].tensor);
  }
  return UnsupportedDType(Op::kName, out.dtype);
}

template <typename T>
absl::Status RunClamp(const TensorRef& out, const TensorRef& a, T lo, T hi) {
  const int64_t n = out.numel();
  if (n == 0) return absl::OkStatus();
  T* o = out.data_as<T>();
  const T* x = a.data_as<const T>();
  if (IsContiguousFast(out) && IsContiguousFast(a)) {
    ClampFlat<T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, x, lo, hi, n);
    return LaunchStatus("clamp", "ClampFlat");
  }
  int64_t count = 0;
  const Offsets<2> l =
      Collapse<2>(out.rank, out.sizes.data(), {out.strides.data(), a.strides.data()}, &count);
  ClampStrided<T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, x, lo, hi, l, n);
  return LaunchStatus("clamp", "ClampStrided");
}

// clamp(t a, number min, number max).
absl::Status ClampKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  const TensorRef& a = *args[0].tensor;
  if (out.dtype == DType::kFloat32) {
    return RunClamp<float>(out, a, ScalarAs<float>(*args[1].scalar),
                           ScalarAs<float>(*args[2].scalar));
  }
  if (out.dtype == DType::kInt64) {
    return RunClamp<int64_t>(out, a, ScalarAs<int64_t>(*args[1].scalar),
                             ScalarAs<int64_t>(*args[2].scalar));
  }
  return UnsupportedDType("clamp", out.dtype);
}

template <typename T>
absl::Status RunFill(const TensorRef& out, T value) {
  const int64_t n = out.numel();
  if (n == 0) return absl::OkStatus();
  T* o = out.data_as<T>();
  if (IsContiguousFast(out)) {
    FillFlat<T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, value, n);
    return LaunchStatus("fill_", "FillFlat");
  }
  int64_t count = 0;
  const Offsets<1> l = Collapse<1>(out.rank, out.sizes.data(), {out.strides.data()}, &count);
  FillStrided<T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, value, l, n);
  return LaunchStatus("fill_", "FillStrided");
}

absl::Status FillKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  if (out.dtype == DType::kFloat32) return RunFill<float>(out, ScalarAs<float>(*args[1].scalar));
  if (out.dtype == DType::kInt64) return RunFill<int64_t>(out, ScalarAs<int64_t>(*args[1].scalar));
  return UnsupportedDType("fill_", out.dtype);
}

// dst[i] = src broadcast to dst's shape, any strides on both sides (the strided-to-dense copy).
template <typename T>
absl::Status RunBroadcastCopy(absl::string_view op, const TensorRef& dst, const TensorRef& src) {
  const int64_t n = dst.numel();
  if (n == 0) return absl::OkStatus();
  T* o = dst.data_as<T>();
  const T* s = src.data_as<const T>();
  if (IsContiguousFast(dst) && IsContiguousFast(src) && SameSizes(dst, src)) {
    if (o != s) {
      FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaMemcpyAsync(o, s, static_cast<size_t>(n) * sizeof(T),
                                                        cudaMemcpyDefault, CurrentStream()));
    }
    return absl::OkStatus();
  }
  int64_t src_strides[kMaxRank];
  BroadcastStrides(src, dst.rank, dst.sizes.data(), src_strides);
  int64_t count = 0;
  const Offsets<2> l =
      Collapse<2>(dst.rank, dst.sizes.data(), {dst.strides.data(), src_strides}, &count);
  CopyStrided<T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, s, l, n);
  return LaunchStatus(op, "CopyStrided");
}


absl::Status CopyKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  return BroadcastCopy("copy_", *results[0], *args[1].tensor);
}


// An op and its in-place form ("add_"), whose name lives in static storage: the table's keys are
// views.
template <typename Op>
void AddBinary(KernelTable& table) {
  table.emplace(Op::kName, &BinaryKernel<Op>);
  static const std::string in_place = absl::StrCat(Op::kName, "_");
  table.emplace(in_place, &BinaryKernel<Op>);
}

template <typename Op>
void AddUnary(KernelTable& table) {
  table.emplace(Op::kName, &UnaryKernel<Op>);
  static const std::string in_place = absl::StrCat(Op::kName, "_");
  table.emplace(in_place, &UnaryKernel<Op>);
}

}  // namespace

absl::Status BroadcastCopy(absl::string_view op, const TensorRef& dst, const TensorRef& src) {
  if (dst.dtype == DType::kFloat32) return RunBroadcastCopy<float>(op, dst, src);
  if (dst.dtype == DType::kInt64) return RunBroadcastCopy<int64_t>(op, dst, src);
  return UnsupportedDType(op, dst.dtype);
}

void AddElementwiseKernels(KernelTable& t) {
  AddBinary<Add>(t);
  AddBinary<Sub>(t);
  AddBinary<Mul>(t);
  AddBinary<Div>(t);
  AddBinary<Maximum>(t);
  AddBinary<Minimum>(t);
  AddUnary<Relu>(t);
  AddUnary<Neg>(t);
  AddUnary<Abs>(t);
  AddUnary<Exp>(t);
  AddUnary<Log>(t);
  AddUnary<Sin>(t);
  AddUnary<Cos>(t);
  AddUnary<Tanh>(t);
  AddUnary<Sigmoid>(t);
  AddUnary<Silu>(t);
  AddUnary<Gelu>(t);
  AddUnary<Sqrt>(t);
  AddUnary<Rsqrt>(t);
  AddUnary<Floor>(t);
  AddUnary<Ceil>(t);
  t.emplace("clamp", &ClampKernel);
  t.emplace("fill_", &FillKernel);
  t.emplace("copy_", &CopyKernel);
}

}  // namespace ferry::cuda_kernels
