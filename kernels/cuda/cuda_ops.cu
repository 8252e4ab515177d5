// CUDA kernels of the built-in ops (see kernels/cuda/cuda_ops.h for the contract).
//
// Each op mirrors its host kernel (kernels/*_ops.cc) element for element: same broadcasting, same
// int64 wrap-around, same NaN handling, the same accumulation order in matmul and linear, and
// rms_norm's sum of squares in double. Layout work happens on the host before a launch: operands
// are read under broadcast strides, size-1 dimensions are dropped and dimensions that are
// contiguous with each other in every operand are merged (as ForEachOffset does on the host), so a
// strided kernel decomposes its linear index over as few dimensions as the layouts allow. Operands
// that are all row-major contiguous over the result's shape take flat kernels with no index math.
//
// Kernel parameters are passed by value (the layouts are small PODs), so no launch needs device
// memory of its own. matmul and linear hand layouts cuBLAS takes directly to cuBLAS, through one
// handle per device created by PrepareCudaKernels at load.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ferry/base/status_macros.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/cuda/cuda_ops.h"
#include "ferry/kernels/internal/op_util.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/memory/cuda/cuda_status.h"

namespace ferry {
namespace {

using internal::BroadcastStrides;
using internal::IsContiguousFast;
using internal::SameSizes;
using internal::ScalarAs;

thread_local cudaStream_t t_stream = nullptr;

constexpr int kThreads = 256;
// Grid-stride loops cover the rest; this many blocks keep every SM of current GPUs busy.
constexpr int64_t kMaxBlocks = 65536;
// gridDim.y and gridDim.z limit.
constexpr int64_t kMaxGridYZ = 65535;

int Blocks(int64_t n, int threads = kThreads) {
  return static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, kMaxBlocks));
}

// The status of the launch just made: Internal naming the op and the kernel with CUDA's text.
absl::Status LaunchStatus(absl::string_view op, const char* kernel) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(op, ": CUDA kernel ", kernel,
                                          " failed: ", cudaGetErrorName(error), " (",
                                          cudaGetErrorString(error), ")"));
}

// A failed CUDA runtime call as FERRY_CUDA_RETURN_IF_ERROR reports it, prefixed with the op.
absl::Status WithOp(absl::string_view op, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(op, ": ", status.message()));
}

#define FERRY_CUDA_OP_RETURN_IF_ERROR(op, expr) \
  FERRY_RETURN_IF_ERROR(                        \
      WithOp((op), ::ferry::internal::CudaStatus((expr), #expr, __FILE__, __LINE__)))

absl::Status UnsupportedDType(absl::string_view op, DType dtype) {
  return absl::UnimplementedError(
      absl::StrCat(op, ": no CUDA kernel for dtype ", DTypeName(dtype)));
}


int64_t IntScalar(const Scalar& s) { return s.kind == Scalar::Kind::kInt ? s.i : s.b; }

// ---- Layouts --------------------------------------------------------------------------------

// N operands iterated together over one shape: element i (row-major over `sizes`) of operand k is
// at offset sum(index[d] * strides[k][d]).
template <int N>
struct Offsets {
  int32_t rank = 0;
  int64_t sizes[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
};

// The collapsed layout of N operands over `sizes` (ForEachOffset's merging); *count receives the
// number of elements (0 when a dimension is empty).
template <int N>
Offsets<N> Collapse(int rank, const int64_t* sizes, const std::array<const int64_t*, N>& strides,
                    int64_t* count) {
  Offsets<N> l;
  int64_t n = 1;
  int r = 0;
  for (int d = 0; d < rank; ++d) {
    n *= sizes[d];
    if (sizes[d] == 1) continue;
    bool merge = r > 0;
    for (int k = 0; merge && k < N; ++k) merge = l.strides[k][r - 1] == strides[k][d] * sizes[d];
    if (merge) {
      l.sizes[r - 1] *= sizes[d];
      for (int k = 0; k < N; ++k) l.strides[k][r - 1] = strides[k][d];
      continue;
    }
    l.sizes[r] = sizes[d];
    for (int k = 0; k < N; ++k) l.strides[k][r] = strides[k][d];
    ++r;
  }
  l.rank = r;
  *count = n;
  return l;
}

template <int N>
__device__ __forceinline__ void Decompose(const Offsets<N>& l, int64_t i, int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const int64_t size = l.sizes[d];
    const int64_t q = i / size;
    const int64_t r = i - q * size;
    i = q;
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += r * l.strides[k][d];
  }
}

__device__ __forceinline__ int64_t GridStart() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStep() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}

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

template <typename T>
__global__ void CopyStrided(T* o, const T* s, Offsets<2> l, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    int64_t off[2];
    Decompose(l, i, off);
    o[off[0]] = s[off[1]];
  }
}

// Element i of dst (row-major over its shape) = element i of src (row-major over its own shape).
template <typename T>
__global__ void LogicalCopyStrided(T* o, const T* s, Offsets<1> dst, Offsets<1> src, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    int64_t d[1];
    int64_t r[1];
    Decompose(dst, i, d);
    Decompose(src, i, r);
    o[d[0]] = s[r[0]];
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
      BinaryScalarFlat<Op, T><<<Blocks(n), kThreads, 0, t_stream>>>(o, x, s, n);
      return LaunchStatus(Op::kName, "BinaryScalarFlat");
    }
    int64_t count = 0;
    const Offsets<2> l =
        Collapse<2>(out.rank, out.sizes.data(), {out.strides.data(), a_strides}, &count);
    BinaryScalarStrided<Op, T><<<Blocks(n), kThreads, 0, t_stream>>>(o, x, s, l, n);
    return LaunchStatus(Op::kName, "BinaryScalarStrided");
  }
  const TensorRef& b = *rhs.tensor;
  const T* y = b.data_as<const T>();
  if (fast && IsContiguousFast(b) && SameSizes(out, b)) {
    BinaryFlat<Op, T><<<Blocks(n), kThreads, 0, t_stream>>>(o, x, y, n);
    return LaunchStatus(Op::kName, "BinaryFlat");
  }
  int64_t b_strides[kMaxRank];
  BroadcastStrides(b, out.rank, out.sizes.data(), b_strides);
  int64_t count = 0;
  const Offsets<3> l =
      Collapse<3>(out.rank, out.sizes.data(), {out.strides.data(), a_strides, b_strides}, &count);
  BinaryStrided<Op, T><<<Blocks(n), kThreads, 0, t_stream>>>(o, x, y, l, n);
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
    UnaryFlat<Op, T><<<Blocks(n), kThreads, 0, t_stream>>>(o, x, n);
    return LaunchStatus(Op::kName, "UnaryFlat");
  }
  int64_t count = 0;
  const Offsets<2> l =
      Collapse<2>(out.rank, out.sizes.data(), {out.strides.data(), a.strides.data()}, &count);
  UnaryStrided<Op, T><<<Blocks(n), kThreads, 0, t_stream>>>(o, x, l, n);
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
absl::Status RunFill(const TensorRef& out, T value) {
  const int64_t n = out.numel();
  if (n == 0) return absl::OkStatus();
  T* o = out.data_as<T>();
  if (IsContiguousFast(out)) {
    FillFlat<T><<<Blocks(n), kThreads, 0, t_stream>>>(o, value, n);
    return LaunchStatus("fill_", "FillFlat");
  }
  int64_t count = 0;
  const Offsets<1> l = Collapse<1>(out.rank, out.sizes.data(), {out.strides.data()}, &count);
  FillStrided<T><<<Blocks(n), kThreads, 0, t_stream>>>(o, value, l, n);
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
                                                        cudaMemcpyDefault, t_stream));
    }
    return absl::OkStatus();
  }
  int64_t src_strides[kMaxRank];
  BroadcastStrides(src, dst.rank, dst.sizes.data(), src_strides);
  int64_t count = 0;
  const Offsets<2> l =
      Collapse<2>(dst.rank, dst.sizes.data(), {dst.strides.data(), src_strides}, &count);
  CopyStrided<T><<<Blocks(n), kThreads, 0, t_stream>>>(o, s, l, n);
  return LaunchStatus(op, "CopyStrided");
}

absl::Status BroadcastCopy(absl::string_view op, const TensorRef& dst, const TensorRef& src) {
  if (dst.dtype == DType::kFloat32) return RunBroadcastCopy<float>(op, dst, src);
  if (dst.dtype == DType::kInt64) return RunBroadcastCopy<int64_t>(op, dst, src);
  return UnsupportedDType(op, dst.dtype);
}

absl::Status CopyKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  return BroadcastCopy("copy_", *results[0], *args[1].tensor);
}

absl::Status CloneKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  return BroadcastCopy("clone", *results[0], *args[0].tensor);
}

// Row-major element order of src into dst; the shapes may differ, the counts match.
template <typename T>
absl::Status RunLogicalCopy(const TensorRef& dst, const TensorRef& src) {
  const int64_t n = dst.numel();
  if (n == 0) return absl::OkStatus();
  T* o = dst.data_as<T>();
  const T* s = src.data_as<const T>();
  if (IsContiguousFast(dst) && IsContiguousFast(src)) {
    if (o != s) {
      FERRY_CUDA_OP_RETURN_IF_ERROR(
          "reshape",
          cudaMemcpyAsync(o, s, static_cast<size_t>(n) * sizeof(T), cudaMemcpyDefault, t_stream));
    }
    return absl::OkStatus();
  }
  int64_t dst_count = 0;
  int64_t src_count = 0;
  const Offsets<1> dl = Collapse<1>(dst.rank, dst.sizes.data(), {dst.strides.data()}, &dst_count);
  const Offsets<1> sl = Collapse<1>(src.rank, src.sizes.data(), {src.strides.data()}, &src_count);
  LogicalCopyStrided<T><<<Blocks(n), kThreads, 0, t_stream>>>(o, s, dl, sl, n);
  return LaunchStatus("reshape", "LogicalCopyStrided");
}

absl::Status ReshapeKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& src = *args[0].tensor;
  if (src.dtype == DType::kFloat32) return RunLogicalCopy<float>(*results[0], src);
  if (src.dtype == DType::kInt64) return RunLogicalCopy<int64_t>(*results[0], src);
  return UnsupportedDType("reshape", src.dtype);
}

// cat(dim, t1, t2, ...): each input copied into its slab of the result along `dim`.
absl::Status CatKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  const int64_t raw = IntScalar(*args[0].scalar);
  const int dim = static_cast<int>(raw < 0 ? raw + out.rank : raw);
  char* base = static_cast<char*>(out.data);
  const int64_t elem = static_cast<int64_t>(out.element_size());
  int64_t at = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    const TensorRef& src = *args[i].tensor;
    TensorRef dst = out;
    dst.sizes[dim] = src.sizes[dim];
    dst.data = base + at * out.strides[dim] * elem;
    FERRY_RETURN_IF_ERROR(BroadcastCopy("cat", dst, src));
    at += src.sizes[dim];
  }
  return absl::OkStatus();
}

// ---- sym_size -------------------------------------------------------------------------------

__global__ void WriteInt64(int64_t* o, int64_t value) { *o = value; }

absl::Status SymSizeKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  // Reads only the argument's metadata; the value travels as a kernel parameter.
  const TensorRef& t = *args[0].tensor;
  const int64_t raw = IntScalar(*args[1].scalar);
  const int dim = static_cast<int>(raw < 0 ? raw + t.rank : raw);
  WriteInt64<<<1, 1, 0, t_stream>>>(results[0]->data_as<int64_t>(), t.sizes[dim]);
  return LaunchStatus("sym_size", "WriteInt64");
}

// ---- index_put_ -----------------------------------------------------------------------------

constexpr absl::string_view kIndexPut = "index_put_";
// Indices checked per round trip: 32 KiB of pinned memory per prepared device (and per thread that
// calls index_put_ on a device not prepared).
constexpr int64_t kIndexChunk = 4096;

constexpr int kMaxCudaDevices = 64;

// A prepared device's staging for index_put_: a pinned buffer and the event the host waits on
// for the indices copied into it. PrepareCudaKernels fills it and then sets `ready` (release);
// index_put_ reads it after an acquire load, without a lock (one thread per device at a time).
struct IndexStaging {
  std::atomic<bool> ready{false};
  int64_t* host = nullptr;
  cudaEvent_t copied = nullptr;
};

IndexStaging g_index_staging[kMaxCudaDevices];

absl::Status CreateIndexStaging(IndexStaging& staging) {
  void* host = nullptr;
  cudaEvent_t copied = nullptr;
  FERRY_CUDA_OP_RETURN_IF_ERROR(
      kIndexPut, cudaHostAlloc(&host, static_cast<size_t>(kIndexChunk) * sizeof(int64_t),
                               cudaHostAllocPortable));
  const cudaError_t event = cudaEventCreateWithFlags(&copied, cudaEventDisableTiming);
  if (event != cudaSuccess) {
    cudaFreeHost(host);
    FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut, event);
  }
  staging.host = static_cast<int64_t*>(host);
  staging.copied = copied;
  staging.ready.store(true, std::memory_order_release);
  return absl::OkStatus();
}

// The calling thread's pinned staging buffer for indices, allocated at first use.
class PinnedIndexBuffer {
 public:
  PinnedIndexBuffer() = default;
  PinnedIndexBuffer(const PinnedIndexBuffer&) = delete;
  PinnedIndexBuffer& operator=(const PinnedIndexBuffer&) = delete;
  ~PinnedIndexBuffer() {
    // At process exit the CUDA runtime may already be gone; nothing useful to do with an error.
    if (data_ != nullptr) static_cast<void>(cudaFreeHost(data_));
  }

  absl::StatusOr<int64_t*> Get() {
    if (data_ == nullptr) {
      void* p = nullptr;
      FERRY_CUDA_OP_RETURN_IF_ERROR(
          kIndexPut, cudaHostAlloc(&p, static_cast<size_t>(kIndexChunk) * sizeof(int64_t),
                                   cudaHostAllocPortable));
      data_ = static_cast<int64_t*>(p);
    }
    return data_;
  }

 private:
  int64_t* data_ = nullptr;
};

thread_local PinnedIndexBuffer t_index_buffer;

// Copies indices [start, start + count) of a 1-D int64 device tensor (element stride `stride`,
// any sign) into `host`, on the current stream; the caller synchronizes.
absl::Status GatherIndices(const int64_t* idx, int64_t stride, int64_t start, int64_t count,
                           int64_t* host) {
  if (stride == 1) {
    FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut,
                                  cudaMemcpyAsync(host, idx + start, static_cast<size_t>(count) * 8,
                                                  cudaMemcpyDefault, t_stream));
  } else if (stride == 0) {
    FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut,
                                  cudaMemcpyAsync(host, idx, 8, cudaMemcpyDefault, t_stream));
  } else {
    // One 8-byte column of `count` rows; a negative stride is read from its last element up.
    const int64_t pitch = stride > 0 ? stride : -stride;
    const int64_t* first = stride > 0 ? idx + start * stride : idx + (start + count - 1) * stride;
    FERRY_CUDA_OP_RETURN_IF_ERROR(
        kIndexPut, cudaMemcpy2DAsync(host, 8, first, static_cast<size_t>(pitch) * 8, 8,
                                     static_cast<size_t>(count), cudaMemcpyDefault, t_stream));
  }
  return absl::OkStatus();
}

// self[wrap(idx[i]), rest...] = values[i, rest...] (values under broadcast strides). Rows run in
// parallel, so with duplicate indices which value lands is unspecified (the host kernel keeps the
// last; PyTorch leaves it undefined).
template <typename T>
__global__ void IndexPutRows(T* self, const T* values, const int64_t* idx, int64_t istride,
                             int64_t size0, int64_t self_stride0, int64_t values_stride0,
                             Offsets<2> row, int64_t row_numel, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    const int64_t r = i / row_numel;
    int64_t off[2];
    Decompose(row, i - r * row_numel, off);
    int64_t target = idx[r * istride];
    if (target < 0) target += size0;
    self[target * self_stride0 + off[0]] = values[r * values_stride0 + off[1]];
  }
}

template <typename T>
absl::Status RunIndexPut(const TensorRef& self, const TensorRef& indices, const TensorRef& values) {
  const int64_t n = indices.sizes[0];
  const int64_t size0 = self.sizes[0];
  const int64_t* idx = indices.data_as<const int64_t>();
  const int64_t istride = indices.strides[0];
  if (n > 0) {
    // A prepared device's staging (no allocation, an event to wait on), else the thread's own.
    int device = -1;
    FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut, cudaGetDevice(&device));
    IndexStaging* staging = device >= 0 && device < kMaxCudaDevices &&
                                    g_index_staging[device].ready.load(std::memory_order_acquire)
                                ? &g_index_staging[device]
                                : nullptr;
    int64_t* host = nullptr;
    if (staging != nullptr) {
      host = staging->host;
    } else {
      FERRY_ASSIGN_OR_RETURN(host, t_index_buffer.Get());
    }
    for (int64_t start = 0; start < n; start += kIndexChunk) {
      const int64_t count = std::min(kIndexChunk, n - start);
      FERRY_RETURN_IF_ERROR(GatherIndices(idx, istride, start, count, host));
      if (staging != nullptr) {
        FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut, cudaEventRecord(staging->copied, t_stream));
        FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut, cudaEventSynchronize(staging->copied));
      } else {
        FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut, cudaStreamSynchronize(t_stream));
      }
      if (istride == 0) std::fill(host + 1, host + count, host[0]);
      if (istride < 0) std::reverse(host, host + count);
      for (int64_t i = 0; i < count; ++i) {
        const int64_t v = host[i];
        if (v < -size0 || v >= size0) {
          return absl::InvalidArgumentError(absl::StrCat(
              kIndexPut, ": index ", v, " is out of range for dimension 0 of size ", size0));
        }
      }
    }
  }
  // values read as [n, self.sizes[1:]...].
  TensorRef target = self;
  target.sizes[0] = n;
  int64_t vstrides[kMaxRank];
  BroadcastStrides(values, target.rank, target.sizes.data(), vstrides);
  int64_t row_numel = 0;
  const Offsets<2> row = Collapse<2>(self.rank - 1, self.sizes.data() + 1,
                                     {self.strides.data() + 1, vstrides + 1}, &row_numel);
  const int64_t total = n * row_numel;
  if (total == 0) return absl::OkStatus();
  IndexPutRows<T><<<Blocks(total), kThreads, 0, t_stream>>>(
      self.data_as<T>(), values.data_as<const T>(), idx, istride, size0, self.strides[0],
      vstrides[0], row, row_numel, total);
  return LaunchStatus(kIndexPut, "IndexPutRows");
}

absl::Status IndexPutKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& self = *results[0];  // aliases argument 0 with its layout
  if (self.dtype == DType::kFloat32) {
    return RunIndexPut<float>(self, *args[1].tensor, *args[2].tensor);
  }
  if (self.dtype == DType::kInt64) {
    return RunIndexPut<int64_t>(self, *args[1].tensor, *args[2].tensor);
  }
  return UnsupportedDType(kIndexPut, self.dtype);
}

// ---- Reductions over a row: softmax, rms_norm -----------------------------------------------

template <typename T>
struct MaxOp {
  __device__ T operator()(T a, T b) const { return fmax(a, b); }
};
template <typename T>
struct SumOp {
  __device__ T operator()(T a, T b) const { return a + b; }
};

// Reduces v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `shared` holds one value per warp.
template <typename T, typename F>
__device__ T BlockReduce(T v, T* shared, F f) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  __syncthreads();  // the previous reduction's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = shared[0];
  for (int w = 1; w < warps; ++w) v = f(v, shared[w]);
  return v;
}

// The rows a reduction along one dimension produces: Offsets over the other dimensions for the
// result (operand 0) and the input (operand 1).
struct Rows {
  Offsets<2> layout;
  int64_t count = 0;
};

Rows RowsWithout(const TensorRef& out, const TensorRef& x, int dim) {
  int64_t sizes[kMaxRank];
  int64_t os[kMaxRank];
  int64_t xs[kMaxRank];
  int r = 0;
  for (int d = 0; d < x.rank; ++d) {
    if (d == dim) continue;
    sizes[r] = x.sizes[d];
    os[r] = out.strides[d];
    xs[r] = x.strides[d];
    ++r;
  }
  Rows rows;
  rows.layout = Collapse<2>(r, sizes, {os, xs}, &rows.count);
  return rows;
}

// Threads per row for block-per-row kernels: a multiple of 32 up to 256.
int RowThreads(int64_t len) {
  return static_cast<int>(std::min<int64_t>(kThreads, (len + 31) / 32 * 32));
}

// Rows this short go one per thread (no reduction across threads needed).
constexpr int64_t kShortRow = 32;

__global__ void SoftmaxBlockRows(float* o, const float* x, Offsets<2> rows, int64_t nrows,
                                 int64_t len, int64_t xstep, int64_t ostep) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
    int64_t off[2];
    Decompose(rows, r, off);
    const float* xr = x + off[1];
    float* orow = o + off[0];
    float max = -INFINITY;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) max = fmaxf(max, xr[j * xstep]);
    max = BlockReduce(max, shared, MaxOp<float>());
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) sum += expf(xr[j * xstep] - max);
    sum = BlockReduce(sum, shared, SumOp<float>());
    const float inv = 1.0f / sum;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      orow[j * ostep] = expf(xr[j * xstep] - max) * inv;
    }
  }
}

__global__ void SoftmaxThreadRows(float* o, const float* x, Offsets<2> rows, int64_t nrows,
                                  int64_t len, int64_t xstep, int64_t ostep) {
  for (int64_t r = GridStart(); r < nrows; r += GridStep()) {
    int64_t off[2];
    Decompose(rows, r, off);
    const float* xr = x + off[1];
    float* orow = o + off[0];
    float max = -INFINITY;
    for (int64_t j = 0; j < len; ++j) max = fmaxf(max, xr[j * xstep]);
    float sum = 0.0f;
    for (int64_t j = 0; j < len; ++j) {
      const float e = expf(xr[j * xstep] - max);
      orow[j * ostep] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < len; ++j) orow[j * ostep] *= inv;
  }
}

absl::Status SoftmaxKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& x = *args[0].tensor;
  const TensorRef& out = *results[0];
  if (x.dtype != DType::kFloat32) return UnsupportedDType("softmax", x.dtype);
  const int64_t raw = IntScalar(*args[1].scalar);
  const int dim = static_cast<int>(raw < 0 ? raw + x.rank : raw);
  const int64_t len = x.sizes[dim];
  const Rows rows = RowsWithout(out, x, dim);
  if (len == 0 || rows.count == 0) return absl::OkStatus();
  float* o = out.data_as<float>();
  const float* xd = x.data_as<const float>();
  if (len <= kShortRow) {
    SoftmaxThreadRows<<<Blocks(rows.count), kThreads, 0, t_stream>>>(
        o, xd, rows.layout, rows.count, len, x.strides[dim], out.strides[dim]);
    return LaunchStatus("softmax", "SoftmaxThreadRows");
  }
  const int blocks = static_cast<int>(std::min(rows.count, kMaxBlocks));
  SoftmaxBlockRows<<<blocks, RowThreads(len), 0, t_stream>>>(o, xd, rows.layout, rows.count, len,
                                                             x.strides[dim], out.strides[dim]);
  return LaunchStatus("softmax", "SoftmaxBlockRows");
}

__global__ void RmsNormBlockRows(float* o, const float* x, const float* w, Offsets<2> rows,
                                 int64_t nrows, int64_t len, int64_t xstep, int64_t ostep,
                                 int64_t wstep, double eps) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
    int64_t off[2];
    Decompose(rows, r, off);
    const float* xr = x + off[1];
    float* orow = o + off[0];
    double sum_sq = 0.0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      const double v = xr[j * xstep];
      sum_sq += v * v;
    }
    sum_sq = BlockReduce(sum_sq, shared, SumOp<double>());
    const float scale = static_cast<float>(1.0 / sqrt(sum_sq / static_cast<double>(len) + eps));
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      orow[j * ostep] = xr[j * xstep] * scale * w[j * wstep];
    }
  }
}

__global__ void RmsNormThreadRows(float* o, const float* x, const float* w, Offsets<2> rows,
                                  int64_t nrows, int64_t len, int64_t xstep, int64_t ostep,
                                  int64_t wstep, double eps) {
  for (int64_t r = GridStart(); r < nrows; r += GridStep()) {
    int64_t off[2];
    Decompose(rows, r, off);
    const float* xr = x + off[1];
    float* orow = o + off[0];
    double sum_sq = 0.0;
    for (int64_t j = 0; j < len; ++j) {
      const double v = xr[j * xstep];
      sum_sq += v * v;
    }
    const float scale = static_cast<float>(1.0 / sqrt(sum_sq / static_cast<double>(len) + eps));
    for (int64_t j = 0; j < len; ++j) orow[j * ostep] = xr[j * xstep] * scale * w[j * wstep];
  }
}

absl::Status RmsNormKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& x = *args[0].tensor;
  const TensorRef& w = *args[1].tensor;
  const TensorRef& out = *results[0];
  if (x.dtype != DType::kFloat32) return UnsupportedDType("rms_norm", x.dtype);
  const double eps = args[2].scalar->AsDouble();
  const int last = x.rank - 1;
  const int64_t len = x.sizes[last];
  const Rows rows = RowsWithout(out, x, last);
  if (len == 0 || rows.count == 0) return absl::OkStatus();
  float* o = out.data_as<float>();
  const float* xd = x.data_as<const float>();
  const float* wd = w.data_as<const float>();
  if (len <= kShortRow) {
    RmsNormThreadRows<<<Blocks(rows.count), kThreads, 0, t_stream>>>(
        o, xd, wd, rows.layout, rows.count, len, x.strides[last], out.strides[last], w.strides[0],
        eps);
    return LaunchStatus("rms_norm", "RmsNormThreadRows");
  }
  const int blocks = static_cast<int>(std::min(rows.count, kMaxBlocks));
  RmsNormBlockRows<<<blocks, RowThreads(len), 0, t_stream>>>(o, xd, wd, rows.layout, rows.count,
                                                             len, x.strides[last],
                                                             out.strides[last], w.strides[0], eps);
  return LaunchStatus("rms_norm", "RmsNormBlockRows");
}

// ---- matmul, linear -------------------------------------------------------------------------

constexpr int kTile = 16;

// O[i, j] = sum_k A[i, k] * B[k, j] (+ bias[j]) per batch, with every operand strided:
//   A[i, k] at a + batch_a + row_a(i) + k * a_k
//   B[k, j] at b + batch_b + k * b_k + j * b_n
//   O[i, j] at o + batch_o + row_o(i) + j * o_n
// row_*(i) come from `rows` (one dimension for matmul, the leading dimensions of x for linear),
// batch_* from `batch`. The sum runs over k in order, as on the host.
struct GemmParams {
  float* o = nullptr;
  const float* a = nullptr;
  const float* b = nullptr;
  const float* bias = nullptr;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t a_k = 0;
  int64_t b_k = 0;
  int64_t b_n = 0;
  int64_t o_n = 0;
  int64_t bias_n = 0;
  Offsets<2> rows;   // (o, a)
  Offsets<3> batch;  // (o, a, b)
  int64_t batch_count = 1;
  // B is read along k when b_k == 1 (a transposed weight, as in linear), so tile loads coalesce.
  bool b_along_k = false;
};

__global__ void GemmTiled(GemmParams p) {
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  // Every loop bound below depends on block indices only, so the barriers are uniform.
  for (int64_t bt = blockIdx.z; bt < p.batch_count; bt += gridDim.z) {
    int64_t boff[3];
    Decompose(p.batch, bt, boff);
    const float* b = p.b + boff[2];
    for (int64_t rt = blockIdx.y; rt * kTile < p.m; rt += gridDim.y) {
      const int64_t row = rt * kTile + ty;
      const bool row_ok = row < p.m;
      int64_t roff[2] = {0, 0};
      if (row_ok) Decompose(p.rows, row, roff);
      const float* arow = p.a + boff[1] + roff[1];
      for (int64_t ct = blockIdx.x; ct * kTile < p.n; ct += gridDim.x) {
        const int64_t col = ct * kTile + tx;
        float acc = 0.0f;
        for (int64_t k0 = 0; k0 < p.k; k0 += kTile) {
          const int64_t ka = k0 + tx;
          as[ty][tx] = (row_ok && ka < p.k) ? arow[ka * p.a_k] : 0.0f;
          if (p.b_along_k) {
            const int64_t kb = k0 + tx;
            const int64_t cb = ct * kTile + ty;
            bs[tx][ty] = (kb < p.k && cb < p.n) ? b[kb * p.b_k + cb * p.b_n] : 0.0f;
          } else {
            const int64_t kb = k0 + ty;
            bs[ty][tx] = (kb < p.k && col < p.n) ? b[kb * p.b_k + col * p.b_n] : 0.0f;
          }
          __syncthreads();
#pragma unroll
          for (int kk = 0; kk < kTile; ++kk) acc += as[ty][kk] * bs[kk][tx];
          __syncthreads();
        }
        if (row_ok && col < p.n) {
          if (p.bias != nullptr) acc += p.bias[col * p.bias_n];
          p.o[boff[0] + roff[0] + col * p.o_n] = acc;
        }
      }
    }
  }
}

absl::Status LaunchGemm(absl::string_view op, const GemmParams& p) {
  if (p.m == 0 || p.n == 0 || p.batch_count == 0) return absl::OkStatus();
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((p.n + kTile - 1) / kTile, kMaxBlocks)),
                  static_cast<unsigned>(std::min<int64_t>((p.m + kTile - 1) / kTile, kMaxGridYZ)),
                  static_cast<unsigned>(std::min<int64_t>(p.batch_count, kMaxGridYZ)));
  GemmTiled<<<grid, block, 0, t_stream>>>(p);
  return LaunchStatus(op, "GemmTiled");
}

// ---- cuBLAS ---------------------------------------------------------------------------------

// cuBLAS is opened with dlopen by the first PrepareCudaKernels, not linked: linking it makes every
// process that links the kernels (each test binary, the CLI, the benchmarks) load cuBLAS and
// cuBLASLt at start-up, GPU or not, which costs about half a second per process. `cublas` holds
// the entry points; it is filled under g_cublas_mutex before any device is marked ready, and read
// only after that (see CublasDevice).
#define FERRY_STRINGIFY_EXPANDED(x) FERRY_STRINGIFY(x)
#define FERRY_STRINGIFY(x) #x

constexpr const char* kCublasSoname = "libcublas.so." FERRY_STRINGIFY_EXPANDED(CUBLAS_VER_MAJOR);

struct CublasApi {
  decltype(&cublasCreate) Create = nullptr;
  decltype(&cublasDestroy) Destroy = nullptr;
  decltype(&cublasSetMathMode) SetMathMode = nullptr;
  decltype(&cublasSetWorkspace) SetWorkspace = nullptr;
  decltype(&cublasSetStream) SetStream = nullptr;
  decltype(&cublasSgemm) Sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) SgemmStridedBatched = nullptr;
  decltype(&cublasGetStatusName) GetStatusName = nullptr;
  decltype(&cublasGetStatusString) GetStatusString = nullptr;
};

CublasApi cublas;
std::mutex g_cublas_mutex;

// Opens cuBLAS and fills `cublas`, once; the caller holds g_cublas_mutex.
absl::Status LoadCublas() {
  static bool loaded = false;
  if (loaded) return absl::OkStatus();
  // The soname through the usual search (the binaries' run path names the toolkit's library
  // directory), then the library this build was configured with.
  std::string errors;
  void* library = nullptr;
  for (const char* name : {kCublasSoname, FERRY_CUBLAS_LIBRARY}) {
    library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    const char* error = dlerror();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", error != nullptr ? error : name);
  }
  if (library == nullptr) {
    return absl::InternalError(absl::StrCat("cuBLAS could not be loaded: ", errors));
  }
  CublasApi api;
  auto find = [library](auto& entry, const char* symbol) -> absl::Status {
    void* address = dlsym(library, symbol);
    if (address == nullptr) {
      return absl::InternalError(absl::StrCat("cuBLAS (", kCublasSoname, ") lacks ", symbol));
    }
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(address);
    return absl::OkStatus();
  };
  // The names after cublas_v2.h's renames (cublasCreate is cublasCreate_v2, ...).
#define FERRY_FIND_CUBLAS(entry, function) \
  FERRY_RETURN_IF_ERROR(find(api.entry, FERRY_STRINGIFY_EXPANDED(function)))
  FERRY_FIND_CUBLAS(Create, cublasCreate);
  FERRY_FIND_CUBLAS(Destroy, cublasDestroy);
  FERRY_FIND_CUBLAS(SetMathMode, cublasSetMathMode);
  FERRY_FIND_CUBLAS(SetWorkspace, cublasSetWorkspace);
  FERRY_FIND_CUBLAS(SetStream, cublasSetStream);
  FERRY_FIND_CUBLAS(Sgemm, cublasSgemm);
  FERRY_FIND_CUBLAS(SgemmStridedBatched, cublasSgemmStridedBatched);
  FERRY_FIND_CUBLAS(GetStatusName, cublasGetStatusName);
  FERRY_FIND_CUBLAS(GetStatusString, cublasGetStatusString);
#undef FERRY_FIND_CUBLAS
  cublas = api;
  loaded = true;  // the library stays open for the process's life
  return absl::OkStatus();
}

// A failed cuBLAS call as CudaStatus reports a CUDA one: Internal (ResourceExhausted when cuBLAS
// could not allocate) with the expression, cuBLAS's status name and text, and file:line.
absl::Status CublasStatus(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusCode code = status == CUBLAS_STATUS_ALLOC_FAILED
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(expr, " failed: ", cublas.GetStatusName(status), " (",
                                         cublas.GetStatusString(status), ") at ", file, ":",
                                         line));
}

#define FERRY_CUBLAS_OP_RETURN_IF_ERROR(op, expr) \
  FERRY_RETURN_IF_ERROR(WithOp((op), CublasStatus((expr), #expr, __FILE__, __LINE__)))

// The cuBLAS state of one device. PrepareCudaKernels fills it under g_cublas_mutex and then sets
// `ready` (release); kernels read it after an acquire load of `ready`, without a lock. `stream` is
// changed by kernels only, one thread per device at a time (see the header).
struct CublasDevice {
  std::atomic<bool> ready{false};
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;  // ours, so cuBLAS never allocates one while a method executes
  size_t workspace_bytes = 0;
  // Recorded after every cuBLAS call. A stream that takes the handle over waits for it first: the
  // previous stream's last call may still be using the workspace.
  cudaEvent_t last_use = nullptr;
  cudaStream_t stream = nullptr;  // the stream the handle is bound to
};

CublasDevice g_cublas[kMaxCudaDevices];

thread_local CudaGemmCounts t_gemm_counts;

absl::Status CreateCublas(int index, absl::string_view op, CublasDevice& d) {
  FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaSetDevice(index));
  int major = 0;
  FERRY_CUDA_OP_RETURN_IF_ERROR(
      op, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  // The workspace size cuBLAS recommends: 32 MiB from Hopper on, 4 MiB before.
  const size_t workspace_bytes = size_t{major >= 9 ? 32u : 4u} << 20;
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  cudaEvent_t last_use = nullptr;
  auto create = [&]() -> absl::Status {
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(op, cublas.Create(&handle));
    // Results are compared with the host's in float32: no TF32 (CUBLAS_DEFAULT_MATH never
    // lowers the precision of float32 operands), set explicitly rather than trusted as default.
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(op, cublas.SetMathMode(handle, CUBLAS_DEFAULT_MATH));
    FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaMalloc(&workspace, workspace_bytes));
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(op, cublas.SetWorkspace(handle, workspace, workspace_bytes));
    FERRY_CUDA_OP_RETURN_IF_ERROR(op,
                                  cudaEventCreateWithFlags(&last_use, cudaEventDisableTiming));
    return absl::OkStatus();
  };
  const absl::Status status = create();
  if (!status.ok()) {
    if (last_use != nullptr) cudaEventDestroy(last_use);
    if (workspace != nullptr) cudaFree(workspace);
    if (handle != nullptr) cublas.Destroy(handle);
    return status;
  }
  d.handle = handle;
  d.workspace = workspace;
  d.workspace_bytes = workspace_bytes;
  d.last_use = last_use;
  d.stream = nullptr;  // cublasCreate binds the legacy default stream
  d.ready.store(true, std::memory_order_release);
  return absl::OkStatus();
}

// The cuBLAS state of the calling thread's current device, bound to the current stream; nullptr
// when PrepareCudaKernels has not run for that device (the caller takes the tiled kernel).
absl::StatusOr<CublasDevice*> CurrentCublas(absl::string_view op) {
  int device = -1;
  FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaGetDevice(&device));
  if (device < 0 || device >= kMaxCudaDevices) return nullptr;
  CublasDevice& d = g_cublas[device];
  if (!d.ready.load(std::memory_order_acquire)) return nullptr;
  if (d.stream != t_stream) {
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(op, cublas.SetStream(d.handle, t_stream));
    // cublasSetStream drops the user workspace: set it again.
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(
        op, cublas.SetWorkspace(d.handle, d.workspace, d.workspace_bytes));
    FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaStreamWaitEvent(t_stream, d.last_use, 0));
    d.stream = t_stream;
  }
  return &d;
}

// How cuBLAS (column-major) reads a row-major operand of `rows` x `cols` with element strides
// (row_stride, col_stride). Row-major storage with leading dimension `ld` is, to cuBLAS, the
// transpose stored column-major, so in the swapped product below it takes CUBLAS_OP_N; a
// transposed view of a row-major matrix (unit row stride) takes CUBLAS_OP_T. Strides of size-1
// dimensions are ignored. ok is false for anything else (broadcast, gaps in both dimensions,
// overlapping rows, negative strides, a leading dimension beyond int).
struct BlasOperand {
  bool ok = false;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;
};

BlasOperand AsBlasOperand(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (cols == 1 || col_stride == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : row_stride;
    if (ld >= std::max<int64_t>(cols, 1) && ld <= kIntMax) return {true, CUBLAS_OP_N, ld};
  }
  if (rows == 1 || row_stride == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : col_stride;
    if (ld >= std::max<int64_t>(rows, 1) && ld <= kIntMax) return {true, CUBLAS_OP_T, ld};
  }
  return {};
}

// C = A B (plus what C holds when `accumulate`) for `batch` problems of row-major [m, k] x [k, n],
// with C row-major contiguous and the problems `m * n` elements apart. cuBLAS is column-major, so
// it computes C^T = B^T A^T: B is its first operand and A its second.
struct BlasGemm {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t batch = 1;
  const float* a = nullptr;
  BlasOperand a_op;
  int64_t a_batch_stride = 0;  // 0 for a broadcast operand, which cuBLAS allows for A and B
  const float* b = nullptr;
  BlasOperand b_op;
  int64_t b_batch_stride = 0;
  float* c = nullptr;
  bool accumulate = false;
};

// Fills `*g` and returns true when the strided GEMM `p` is one cuBLAS takes directly: every
// operand a matrix cuBLAS reads (AsBlasOperand), at most one batch dimension after collapsing
// (uniform batch strides), and a contiguous result.
bool AsBlasGemm(const GemmParams& p, BlasGemm* g) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (p.k == 0 || p.rows.rank > 1 || p.batch.rank > 1) return false;
  if (p.m > kIntMax || p.n > kIntMax || p.k > kIntMax || p.batch_count > kIntMax) return false;
  const int64_t o_row = p.rows.rank == 1 ? p.rows.strides[0][0] : p.n;
  const int64_t a_row = p.rows.rank == 1 ? p.rows.strides[1][0] : 0;
  if ((p.n > 1 && p.o_n != 1) || (p.m > 1 && o_row != p.n)) return false;
  if (p.batch.rank == 1 && p.batch.strides[0][0] != p.m * p.n) return false;
  g->a_op = AsBlasOperand(p.m, p.k, a_row, p.a_k);
  g->b_op = AsBlasOperand(p.k, p.n, p.b_k, p.b_n);
  if (!g->a_op.ok || !g->b_op.ok) return false;
  g->m = p.m;
  g->n = p.n;
  g->k = p.k;
  g->batch = p.batch_count;
  g->a = p.a;
  g->b = p.b;
  g->c = p.o;
  g->a_batch_stride = p.batch.rank == 1 ? p.batch.strides[1][0] : 0;
  g->b_batch_stride = p.batch.rank == 1 ? p.batch.strides[2][0] : 0;
  g->accumulate = p.bias != nullptr;
  return true;
}

absl::Status RunCublasGemm(absl::string_view op, CublasDevice& d, const BlasGemm& g) {
  const float alpha = 1.0f;
  const float beta = g.accumulate ? 1.0f : 0.0f;
  const int m = static_cast<int>(g.m);
  const int n = static_cast<int>(g.n);
  const int k = static_cast<int>(g.k);
  const int lda = static_cast<int>(g.a_op.ld);
  const int ldb = static_cast<int>(g.b_op.ld);
  if (g.batch == 1) {
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(
        op, cublas.Sgemm(d.handle, g.b_op.op, g.a_op.op, n, m, k, &alpha, g.b, ldb, g.a, lda,
                         &beta, g.c, n));
  } else {
    const long long c_batch_stride = static_cast<long long>(g.m) * g.n;
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(
        op, cublas.SgemmStridedBatched(d.handle, g.b_op.op, g.a_op.op, n, m, k, &alpha, g.b,
                                       ldb, g.b_batch_stride, g.a, lda, g.a_batch_stride, &beta,
                                       g.c, n, c_batch_stride, static_cast<int>(g.batch)));
  }
  FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaEventRecord(d.last_use, t_stream));
  ++t_gemm_counts.cublas;
  return absl::OkStatus();
}

// out[i, j] = bias[j] over linear's contiguous [m, n] result, for cuBLAS to add the product to.
absl::Status FillRowsWithBias(absl::string_view op, const GemmParams& p) {
  const int64_t sizes[2] = {p.m, p.n};
  const int64_t out_strides[2] = {p.n, 1};
  const int64_t bias_strides[2] = {0, p.bias_n};
  int64_t count = 0;
  const Offsets<2> l = Collapse<2>(2, sizes, {out_strides, bias_strides}, &count);
  CopyStrided<float><<<Blocks(count), kThreads, 0, t_stream>>>(p.o, p.bias, l, count);
  return LaunchStatus(op, "CopyStrided");
}

// cuBLAS when the layouts and the device allow it, the tiled kernel otherwise.
absl::Status RunGemm(absl::string_view op, const GemmParams& p) {
  if (p.m == 0 || p.n == 0 || p.batch_count == 0) return absl::OkStatus();
  BlasGemm g;
  if (AsBlasGemm(p, &g)) {
    FERRY_ASSIGN_OR_RETURN(CublasDevice* cublas, CurrentCublas(op));
    if (cublas != nullptr) {
      if (g.accumulate) FERRY_RETURN_IF_ERROR(FillRowsWithBias(op, p));
      return RunCublasGemm(op, *cublas, g);
    }
  }
  ++t_gemm_counts.tiled;
  return LaunchGemm(op, p);
}

absl::Status MatmulKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& a = *args[0].tensor;
  const TensorRef& b = *args[1].tensor;
  const TensorRef& out = *results[0];
  if (out.dtype != DType::kFloat32) return UnsupportedDType("matmul", out.dtype);
  const int batch_rank = out.rank - 2;
  TensorRef a_lead = a;
  a_lead.rank = a.rank - 2;
  TensorRef b_lead = b;
  b_lead.rank = b.rank - 2;
  int64_t a_strides[kMaxRank];
  int64_t b_strides[kMaxRank];
  BroadcastStrides(a_lead, batch_rank, out.sizes.data(), a_strides);
  BroadcastStrides(b_lead, batch_rank, out.sizes.data(), b_strides);
  GemmParams p;
  p.o = out.data_as<float>();
  p.a = a.data_as<const float>();
  p.b = b.data_as<const float>();
  p.m = out.sizes[out.rank - 2];
  p.n = out.sizes[out.rank - 1];
  p.k = a.sizes[a.rank - 1];
  p.a_k = a.strides[a.rank - 1];
  p.b_k = b.strides[b.rank - 2];
  p.b_n = b.strides[b.rank - 1];
  p.o_n = out.strides[out.rank - 1];
  const int64_t m = p.m;
  const int64_t os0 = out.strides[out.rank - 2];
  const int64_t as0 = a.strides[a.rank - 2];
  int64_t row_count = 0;
  p.rows = Collapse<2>(1, &m, {&os0, &as0}, &row_count);
  p.batch = Collapse<3>(batch_rank, out.sizes.data(), {out.strides.data(), a_strides, b_strides},
                        &p.batch_count);
  p.b_along_k = p.b_k == 1 && p.b_n != 1;
  return RunGemm("matmul", p);
}

absl::Status LinearKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& x = *args[0].tensor;
  const TensorRef& w = *args[1].tensor;
  const TensorRef* bias = args.size() == 3 ? args[2].tensor : nullptr;
  const TensorRef& out = *results[0];
  if (out.dtype != DType::kFloat32) return UnsupportedDType("linear", out.dtype);
  const int lead = x.rank - 1;
  GemmParams p;
  p.o = out.data_as<float>();
  p.a = x.data_as<const float>();
  p.b = w.data_as<const float>();  // B[k, j] = w[j, k]
  p.bias = bias != nullptr ? bias->data_as<const float>() : nullptr;
  p.bias_n = bias != nullptr ? bias->strides[0] : 0;
  p.n = w.sizes[0];
  p.k = x.sizes[lead];
  p.a_k = x.strides[lead];
  p.b_k = w.strides[1];
  p.b_n = w.strides[0];
  p.o_n = out.strides[lead];
  p.rows = Collapse<2>(lead, out.sizes.data(), {out.strides.data(), x.strides.data()}, &p.m);
  p.b_along_k = p.b_k == 1 && p.b_n != 1;
  return RunGemm("linear", p);
}

// ---- Table ----------------------------------------------------------------------------------

using KernelTable = absl::flat_hash_map<absl::string_view, KernelFn>;

template <typename Op>
void AddBinary(KernelTable& table) {
  table.emplace(Op::kName, &BinaryKernel<Op>);
  // In-place names live in static storage: the table keys are views.
  static const std::string in_place = absl::StrCat(Op::kName, "_");
  table.emplace(in_place, &BinaryKernel<Op>);
}

template <typename Op>
void AddUnary(KernelTable& table) {
  table.emplace(Op::kName, &UnaryKernel<Op>);
  static const std::string in_place = absl::StrCat(Op::kName, "_");
  table.emplace(in_place, &UnaryKernel<Op>);
}

const KernelTable& Table() {
  static const KernelTable* const table = [] {
    auto* t = new KernelTable();
    AddBinary<Add>(*t);
    AddBinary<Sub>(*t);
    AddBinary<Mul>(*t);
    AddBinary<Div>(*t);
    AddBinary<Maximum>(*t);
    AddBinary<Minimum>(*t);
    AddUnary<Relu>(*t);
    AddUnary<Neg>(*t);
    AddUnary<Abs>(*t);
    AddUnary<Exp>(*t);
    AddUnary<Log>(*t);
    AddUnary<Sin>(*t);
    AddUnary<Cos>(*t);
    AddUnary<Tanh>(*t);
    AddUnary<Sigmoid>(*t);
    AddUnary<Silu>(*t);
    AddUnary<Gelu>(*t);
    AddUnary<Sqrt>(*t);
    AddUnary<Rsqrt>(*t);
    t->emplace("fill_", &FillKernel);
    t->emplace("copy_", &CopyKernel);
    t->emplace("clone", &CloneKernel);
    t->emplace("reshape", &ReshapeKernel);
    t->emplace("cat", &CatKernel);
    t->emplace("sym_size", &SymSizeKernel);
    t->emplace("index_put_", &IndexPutKernel);
    t->emplace("softmax", &SoftmaxKernel);
    t->emplace("rms_norm", &RmsNormKernel);
    t->emplace("matmul", &MatmulKernel);
    t->emplace("linear", &LinearKernel);
    return t;
  }();
  return *table;
}

}  // namespace

bool HaveCudaKernels() { return true; }

void SetCurrentCudaStream(void* stream) { t_stream = static_cast<cudaStream_t>(stream); }

absl::Status PrepareCudaKernels(int device_index) {
  if (device_index < 0 || device_index >= kMaxCudaDevices) {
    return absl::InvalidArgumentError(absl::StrCat("PrepareCudaKernels: device index ",
                                                   device_index, " is outside [0, ",
                                                   kMaxCudaDevices, ")"));
  }
  CublasDevice& d = g_cublas[device_index];
  if (d.ready.load(std::memory_order_acquire)) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(g_cublas_mutex);
  if (d.ready.load(std::memory_order_relaxed)) return absl::OkStatus();
  const std::string op = absl::StrCat("preparing the CUDA kernels of cuda:", device_index);
  FERRY_RETURN_IF_ERROR(WithOp(op, LoadCublas()));
  int previous = 0;
  FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaGetDevice(&previous));
  absl::Status status = CreateCublas(device_index, op, d);  // leaves the device current
  if (status.ok() && !g_index_staging[device_index].ready.load(std::memory_order_relaxed)) {
    status.Update(WithOp(op, CreateIndexStaging(g_index_staging[device_index])));
  }
  const absl::Status restored = WithOp(
      op, internal::CudaStatus(cudaSetDevice(previous), "cudaSetDevice(previous)", __FILE__,
                               __LINE__));
  FERRY_RETURN_IF_ERROR(status);
  return restored;
}

CudaGemmCounts GetCudaGemmCounts() { return t_gemm_counts; }

absl::Status CheckCudaKernelDTypes(absl::string_view op, absl::Span<const OpArg> args,
                                   absl::Span<const TensorRef* const> results) {
  auto supported = [](DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kInt64; };
  for (const OpArg& arg : args) {
    if (arg.tensor != nullptr && !supported(arg.tensor->dtype)) {
      return UnsupportedDType(op, arg.tensor->dtype);
    }
  }
  for (const TensorRef* result : results) {
    if (!supported(result->dtype)) return UnsupportedDType(op, result->dtype);
  }
  return absl::OkStatus();
}

KernelFn FindCudaKernel(absl::string_view op) {
  const KernelTable& table = Table();
  auto it = table.find(op);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace ferry
