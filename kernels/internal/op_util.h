// Shared pieces of the built-in host ops: argument checks for `infer` and strided loops for
// kernels.
//
//   FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg("relu", args, 0));
//   FERRY_RETURN_IF_ERROR(CheckDType("relu", 0, *x, DType::kFloat32));
//   ForEachOffset<2>(out.rank, out.sizes.data(), {out.strides.data(), x_strides}, [&](auto& o) {
//     out_data[o[0]] = f(x_data[o[1]]);
//   });
//
// Infer helpers allocate only to build error messages and return InvalidArgument whose message
// starts with the op name and names the argument. Kernel helpers never allocate. Nothing here holds
// state; everything is safe to call from any thread.
#ifndef FERRY_KERNELS_INTERNAL_OP_UTIL_H_
#define FERRY_KERNELS_INTERNAL_OP_UTIL_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/op_registry.h"

namespace ferry::internal {

// ---- Load time ------------------------------------------------------------------------------

// "[2, 3]".
std::string ShapeString(absl::Span<const int64_t> sizes);
inline std::string ShapeString(const TensorRef& t) {
  return ShapeString(absl::MakeConstSpan(t.sizes.data(), t.rank));
}

template <typename... Parts>
absl::Status OpError(absl::string_view op, const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", parts...));
}

// Argument count within [min_args, max_args] (max_args -1: unbounded) and results sized
// num_results.
absl::Status CheckArity(absl::string_view op, absl::Span<const OpArg> args, int min_args,
                        int max_args, absl::Span<InferredResult> results, int num_results);

// The errors of the two functions below, built out of line: infer runs per node at load.
absl::Status TensorArgError(absl::string_view op, absl::Span<const OpArg> args, int i,
                            bool any_dtype);

// Whether `t` is a tensor with a valid rank and non-negative sizes.
inline bool IsWellFormedTensor(const TensorRef* t) {
  if (t == nullptr || t->rank < 0 || t->rank > kMaxRank) return false;
  for (int d = 0; d < t->rank; ++d) {
    if (t->sizes[d] < 0) return false;
  }
  return true;
}

// Argument `i` as a tensor with a valid rank and non-negative sizes, of dtype float32 or int64
// (the dtypes every op supports); the others are Unimplemented, naming the op.
inline absl::StatusOr<const TensorRef*> TensorArg(absl::string_view op,
                                                  absl::Span<const OpArg> args, int i) {
  const TensorRef* t = args[i].tensor;
  if (IsWellFormedTensor(t) && (t->dtype == DType::kFloat32 || t->dtype == DType::kInt64)) {
    return t;
  }
  return TensorArgError(op, args, i, /*any_dtype=*/false);
}
// The same for ops that take every dtype (copies, views, casts, comparisons).
inline absl::StatusOr<const TensorRef*> AnyTensorArg(absl::string_view op,
                                                     absl::Span<const OpArg> args, int i) {
  const TensorRef* t = args[i].tensor;
  if (IsWellFormedTensor(t) && IsKnownDType(t->dtype)) return t;
  return TensorArgError(op, args, i, /*any_dtype=*/true);
}
absl::Status CheckDType(absl::string_view op, int i, const TensorRef& t, DType expected);
absl::Status CheckSameDType(absl::string_view op, int i, const TensorRef& t, int j,
                            const TensorRef& u);
// Argument `i` as an integer scalar (kInt or kBool).
absl::StatusOr<int64_t> IntArg(absl::string_view op, absl::Span<const OpArg> args, int i);
// Argument `i` as an int list.
absl::StatusOr<const std::vector<int64_t>*> IntListArg(absl::string_view op,
                                                       absl::Span<const OpArg> args, int i);
// Argument `i` as a number (kInt, kDouble or kBool).
absl::StatusOr<const Scalar*> NumberArg(absl::string_view op, absl::Span<const OpArg> args, int i);
// Checks that a number scalar converts to `dtype` without overflow (a double into int64).
absl::Status CheckNumberFits(absl::string_view op, int i, const Scalar& s, DType dtype);

// `dim` wrapped into [0, rank) (negative counts from the end); argument `i` is named on error.
absl::StatusOr<int> NormalizeDim(absl::string_view op, int i, int64_t dim, int rank);

// NumPy broadcasting of two shapes (right-aligned; sizes equal or one of them 1). False when they
// do not broadcast or the result exceeds kMaxRank.
bool BroadcastShapes(absl::Span<const int64_t> a, absl::Span<const int64_t> b,
                     std::vector<int64_t>* out);
// The same into `out` (kMaxRank entries), setting `*rank`; allocates nothing.
bool BroadcastShapes(absl::Span<const int64_t> a, absl::Span<const int64_t> b, int64_t* out,
                     int* rank);
// Whether `from` broadcasts to exactly `to`.
bool BroadcastsTo(absl::Span<const int64_t> from, absl::Span<const int64_t> to);

inline absl::Span<const int64_t> Sizes(const TensorRef& t) {
  return absl::MakeConstSpan(t.sizes.data(), t.rank);
}
inline absl::Span<const int64_t> Strides(const TensorRef& t) {
  return absl::MakeConstSpan(t.strides.data(), t.rank);
}

// A row-major contiguous layout (functional results).
inline TensorRef ContiguousLayout(DType dtype, absl::Span<const int64_t> sizes) {
  return TensorRef::Contiguous(dtype, sizes);
}

// A schema for the registry; `view_of` empty means no result is a view.
inline OpSchema MakeSchema(std::string name, int min_args, int max_args, int num_results,
                           InferFn infer, KernelFn kernel, std::vector<int> written_args = {},
                           std::vector<int> view_of = {}, std::vector<int> shape_only_args = {}) {
  OpSchema s;
  s.name = std::move(name);
  s.min_args = min_args;
  s.max_args = max_args;
  s.num_results = num_results;
  s.written_args = std::move(written_args);
  s.view_of = view_of.empty() ? std::vector<int>(num_results, -1) : std::move(view_of);
  s.shape_only_args = std::move(shape_only_args);
  s.infer = infer;
  s.kernel = kernel;
  return s;
}

// The layout of `t` as a view result at `offset` elements (data left null).
inline InferredResult ViewResult(const TensorRef& t, int64_t offset = 0) {
  InferredResult r;
  r.layout = t;
  r.layout.data = nullptr;
  r.view_offset = offset;
  return r;
}

// ---- Execute time ---------------------------------------------------------------------------

// Row-major contiguous (size-1 dimensions ignored); inline because fast paths test it per call.
inline bool IsContiguousFast(const TensorRef& t) {
  int64_t expected = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    if (t.sizes[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.sizes[i];
  }
  return true;
}

// numel when `t` is row-major contiguous, else -1: one pass for the fast-path test. An operand
// that broadcasts to a result with as many elements as the result has no broadcast dimension, so a
// contiguous one with the result's numel is read in the result's element order.
inline int64_t ContiguousNumel(const TensorRef& t) {
  int64_t expected = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    if (t.sizes[i] != 1 && t.strides[i] != expected) return -1;
    expected *= t.sizes[i];
  }
  return expected;
}

inline bool SameSizes(const TensorRef& a, const TensorRef& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i) {
    if (a.sizes[i] != b.sizes[i]) return false;
  }
  return true;
}

// Strides of `t` read as a tensor of shape `sizes` (rank `rank` >= t.rank) under broadcasting:
// right-aligned, 0 on new leading and on broadcast (size-1) dimensions.
inline void BroadcastStrides(const TensorRef& t, int rank, const int64_t* sizes, int64_t* strides) {
  const int lead = rank - t.rank;
  for (int d = 0; d < rank; ++d) {
    if (d < lead) {
      strides[d] = 0;
    } else {
      const int td = d - lead;
      strides[d] = (t.sizes[td] == 1 && sizes[d] != 1) ? 0 : t.strides[td];
    }
  }
}

// Calls f(offsets) once per element of the shape `sizes` in row-major order, where offsets[k] is
// the element offset of that multi-index under strides[k]. Dimensions of size 1 are dropped and
// neighbours that are contiguous with each other in every operand are merged, so the inner loop
// runs as long as the layouts allow.
template <size_t N, typename F>
void ForEachOffset(int rank, const int64_t* sizes, const std::array<const int64_t*, N>& strides,
                   F&& f) {
  int64_t sz[kMaxRank];
  int64_t st[N][kMaxRank];
  int r = 0;
  for (int d = 0; d < rank; ++d) {
    if (sizes[d] == 0) return;
    if (sizes[d] == 1) continue;
    bool merge = r > 0;
    for (size_t k = 0; merge && k < N; ++k) merge = st[k][r - 1] == strides[k][d] * sizes[d];
    if (merge) {
      sz[r - 1] *= sizes[d];
      for (size_t k = 0; k < N; ++k) st[k][r - 1] = strides[k][d];
      continue;
    }
    sz[r] = sizes[d];
    for (size_t k = 0; k < N; ++k) st[k][r] = strides[k][d];
    ++r;
  }
  std::array<int64_t, N> base{};
  if (r == 0) {
    f(base);
    return;
  }
  const int inner = r - 1;
  const int64_t inner_size = sz[inner];
  int64_t index[kMaxRank] = {};
  while (true) {
    std::array<int64_t, N> o = base;
    for (int64_t j = 0; j < inner_size; ++j) {
      f(o);
      for (size_t k = 0; k < N; ++k) o[k] += st[k][inner];
    }
    int d = inner - 1;
    for (; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) base[k] += st[k][d];
      if (++index[d] < sz[d]) break;
      for (size_t k = 0; k < N; ++k) base[k] -= st[k][d] * sz[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// dst[i] = src[i] for every element of dst, where src is read with `src_strides` (dst.rank
// entries, 0 for broadcast dimensions).
template <typename T>
void StridedCopy(const TensorRef& dst, const T* src, const int64_t* src_strides) {
  T* out = dst.data_as<T>();
  bool src_contiguous = true;
  int64_t expected = 1;
  for (int d = dst.rank - 1; d >= 0; --d) {
    if (dst.sizes[d] != 1 && src_strides[d] != expected) src_contiguous = false;
    expected *= dst.sizes[d];
  }
  if (src_contiguous && IsContiguousFast(dst)) {
    if (dst.numel() > 0 && out != src) {
      std::memmove(out, src, static_cast<size_t>(dst.numel()) * sizeof(T));
    }
    return;
  }
  ForEachOffset<2>(dst.rank, dst.sizes.data(), {dst.strides.data(), src_strides},
                   [&](const std::array<int64_t, 2>& o) { out[o[0]] = src[o[1]]; });
}

// StridedCopy of `src` broadcast to dst's shape, dispatched on the element size (dst and src share
// the dtype), so it serves every dtype.
void BroadcastCopy(const TensorRef& dst, const TensorRef& src);

// A numeric scalar argument as T, on the host (host and CUDA kernels alike read scalars here; a
// Scalar never reaches a device). Other kinds give T{}; infer rejects them where a number is
// needed.
template <typename T>
T ScalarAs(const Scalar& s) {
  switch (s.kind) {
    case Scalar::Kind::kInt:
      return static_cast<T>(s.i);
    case Scalar::Kind::kDouble:
      return static_cast<T>(s.d);  // range checked by infer for int64
    case Scalar::Kind::kBool:
      return static_cast<T>(s.b);
    default:
      break;
  }
  return T{};
}

}  // namespace ferry::internal

#endif  // FERRY_KERNELS_INTERNAL_OP_UTIL_H_
