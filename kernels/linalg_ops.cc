// Linear algebra and normalization host ops: matmul, linear, softmax, log_softmax, rms_norm
// (float32).
//
// All honour arbitrary input and result strides; the inner loops take a unit-stride path when the
// innermost dimensions are contiguous. matmul and linear hand float32 products that a BLAS takes
// directly (row-major or transposed operands, a row-major result) and that are large enough to
// OpenBLAS when Ferry is built with it (kernels/internal/host_blas.h). Accumulation is in float
// except rms_norm's sum of squares, which is in double so that long rows do not lose the small
// terms. softmax and rms_norm rows whose elements (and rms_norm's weight) are contiguous go through
// the SIMD loops of the CPU's level (kernels/internal/simd_loops.h), whose exp is within 2 ulp and
// whose sums run in vector lanes: they match the strided path to float rounding, not bit for bit.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_blas.h"
#include "ferry/kernels/internal/host_ops.h"
#include "ferry/kernels/internal/op_util.h"
#include "ferry/kernels/internal/simd_loops.h"

namespace ferry::internal {
namespace {

// A TensorRef over the first `rank` dimensions of `t` (batch or leading dimensions).
TensorRef Leading(const TensorRef& t, int rank) {
  TensorRef r = t;
  r.rank = rank;
  return r;
}

// ---- the host BLAS --------------------------------------------------------------------------

// How a BLAS reads a [rows, cols] matrix with element strides (s0, s1): row-major with leading
// dimension `ld`, or the transpose of a row-major [cols, rows] one (`trans`). False for layouts it
// cannot take (broadcast or non-unit inner strides) and for sizes beyond its 32-bit indices.
struct BlasOperand {
  bool trans = false;
  int64_t ld = 0;
};
bool AsBlasOperand(int64_t rows, int64_t cols, int64_t s0, int64_t s1, BlasOperand* op) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (rows < 1 || cols < 1 || rows > kMax || cols > kMax) return false;
  if ((s1 == 1 || cols == 1) && (rows == 1 || s0 >= cols)) {
    *op = {false, rows == 1 ? cols : s0};
  } else if ((s0 == 1 || rows == 1) && (cols == 1 || s1 >= rows)) {
    *op = {true, cols == 1 ? rows : s1};
  } else {
    return false;
  }
  return op->ld <= kMax;
}

// A row-major result (no transpose) for the BLAS to write.
bool AsBlasResult(int64_t rows, int64_t cols, int64_t s0, int64_t s1, int64_t* ld) {
  BlasOperand op;
  if (!AsBlasOperand(rows, cols, s0, s1, &op) || op.trans) return false;
  *ld = op.ld;
  return true;
}

// ---- matmul ---------------------------------------------------------------------------------

absl::Status MatmulInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "matmul";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* a, TensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* b, TensorArg(op, args, 1));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *a, DType::kFloat32));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 1, *b, DType::kFloat32));
  for (int i = 0; i < 2; ++i) {
    const TensorRef& t = i == 0 ? *a : *b;
    if (t.rank < 2) {
      return OpError(op, "argument ", i, " has shape ", ShapeString(t),
                     ", expected at least 2 dimensions");
    }
  }
  const int64_t k = a->sizes[a->rank - 1];
  if (b->sizes[b->rank - 2] != k) {
    return OpError(op, "argument 1 has shape ", ShapeString(*b), ", whose dimension -2 (",
                   b->sizes[b->rank - 2], ") does not match dimension -1 of argument 0 ",
                   ShapeString(*a));
  }
  std::vector<int64_t> out_sizes;
  if (!BroadcastShapes(Sizes(*a).subspan(0, a->rank - 2), Sizes(*b).subspan(0, b->rank - 2),
                       &out_sizes) ||
      out_sizes.size() + 2 > static_cast<size_t>(kMaxRank)) {
    return OpError(op, "argument 1 has shape ", ShapeString(*b),
                   ", whose batch dimensions do not broadcast with those of ", ShapeString(*a));
  }
  out_sizes.push_back(a->sizes[a->rank - 2]);
  out_sizes.push_back(b->sizes[b->rank - 1]);
  results[0].layout = ContiguousLayout(DType::kFloat32, out_sizes);
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// o[m, n] = a[m, k] x b[k, n] with element strides (i-k-j order: the inner loop streams a row of
// b and a row of o).
void Matmul2D(float* o, int64_t os0, int64_t os1, const float* a, int64_t as0, int64_t as1,
              const float* b, int64_t bs0, int64_t bs1, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    float* orow = o + i * os0;
    const float* arow = a + i * as0;
    if (os1 == 1) {
      for (int64_t j = 0; j < n; ++j) orow[j] = 0.0f;
    } else {
      for (int64_t j = 0; j < n; ++j) orow[j * os1] = 0.0f;
    }
    for (int64_t kk = 0; kk < k; ++kk) {
      const float av = arow[kk * as1];
      const float* brow = b + kk * bs0;
      if (os1 == 1 && bs1 == 1) {
        for (int64_t j = 0; j < n; ++j) orow[j] += av * brow[j];
      } else {
        for (int64_t j = 0; j < n; ++j) orow[j * os1] += av * brow[j * bs1];
      }
    }
  }
}

absl::Status MatmulKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& a = *args[0].tensor;
  const TensorRef& b = *args[1].tensor;
  const TensorRef& out = *results[0];
  const int batch_rank = out.rank - 2;
  const int64_t m = out.sizes[out.rank - 2];
  const int64_t n = out.sizes[out.rank - 1];
  const int64_t k = a.sizes[a.rank - 1];
  int64_t a_strides[kMaxRank];
  int64_t b_strides[kMaxRank];
  BroadcastStrides(Leading(a, a.rank - 2), batch_rank, out.sizes.data(), a_strides);
  BroadcastStrides(Leading(b, b.rank - 2), batch_rank, out.sizes.data(), b_strides);
  float* o = out.data_as<float>();
  const float* x = a.data_as<const float>();
  const float* y = b.data_as<const float>();
  BlasOperand ba, bb;
  int64_t ldc = 0;
  const bool blas = HostBlasEnabled() && m * n * k >= kHostBlasMinWork &&
                    AsBlasOperand(m, k, a.strides[a.rank - 2], a.strides[a.rank - 1], &ba) &&
                    AsBlasOperand(k, n, b.strides[b.rank - 2], b.strides[b.rank - 1], &bb) &&
                    AsBlasResult(m, n, out.strides[out.rank - 2], out.strides[out.rank - 1], &ldc);
  // Without the BLAS, a b whose columns are dense (a transposed matrix: attention's q k^T) is
  // linear's x w^T, and takes its loop; other layouts take Matmul2D, whose inner loop runs along
  // b's rows.
  const bool rows_by_transposed = !blas && a.strides[a.rank - 1] == 1 &&
                                  b.strides[b.rank - 2] == 1 && out.strides[out.rank - 1] == 1;
  ForEachOffset<3>(batch_rank, out.sizes.data(), {out.strides.data(), a_strides, b_strides},
                   [&](const std::array<int64_t, 3>& off) {
                     if (blas) {
                       HostSgemm(ba.trans, bb.trans, m, n, k, x + off[1], ba.ld, y + off[2],
                                 bb.ld, /*accumulate=*/false, o + off[0], ldc);
                       return;
                     }
                     if (rows_by_transposed) {  // b is a transposed [n, k] with dense rows
                       Loops().rows_by_transposed(o + off[0], out.strides[out.rank - 2], x + off[1],
                                                  a.strides[a.rank - 2], m, y + off[2],
                                                  b.strides[b.rank - 1], n, k, nullptr, 0);
                       return;
                     }
                     Matmul2D(o + off[0], out.strides[out.rank - 2], out.strides[out.rank - 1],
                              x + off[1], a.strides[a.rank - 2], a.strides[a.rank - 1],
                              y + off[2], b.strides[b.rank - 2], b.strides[b.rank - 1], m, k, n);
                   });
  return absl::OkStatus();
}

// ---- linear ---------------------------------------------------------------------------------

absl::Status LinearInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "linear";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 3, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* w, TensorArg(op, args, 1));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *x, DType::kFloat32));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 1, *w, DType::kFloat32));
  if (x->rank < 1) {
    return OpError(op, "argument 0 has shape ", ShapeString(*x), ", expected at least 1 dimension");
  }
  if (w->rank != 2 || w->sizes[1] != x->sizes[x->rank - 1]) {
    return OpError(op, "argument 1 has shape ", ShapeString(*w), ", expected [out, ",
                   x->sizes[x->rank - 1], "] to match argument 0 ", ShapeString(*x));
  }
  if (args.size() == 3) {
    FERRY_ASSIGN_OR_RETURN(const TensorRef* bias, TensorArg(op, args, 2));
    FERRY_RETURN_IF_ERROR(CheckDType(op, 2, *bias, DType::kFloat32));
    if (bias->rank != 1 || bias->sizes[0] != w->sizes[0]) {
      return OpError(op, "argument 2 has shape ", ShapeString(*bias), ", expected [", w->sizes[0],
                     "]");
    }
  }
  std::vector<int64_t> out_sizes(Sizes(*x).begin(), Sizes(*x).end());
  out_sizes.back() = w->sizes[0];
  results[0].layout = ContiguousLayout(DType::kFloat32, out_sizes);
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// The leading dimensions of `t` (all but the last) as rows of one stride; false when they do not
// collapse to one. Rank 1: one row.
bool CollapseRows(const TensorRef& t, int64_t* rows, int64_t* row_stride) {
  const int lead = t.rank - 1;
  *rows = 1;
  *row_stride = 0;
  for (int d = lead - 1; d >= 0; --d) {
    if (t.sizes[d] == 1) continue;
    if (*rows > 1 && t.strides[d] != *row_stride * *rows) return false;
    if (*rows == 1) *row_stride = t.strides[d];
    *rows *= t.sizes[d];
  }
  return true;
}

// out = x w^T (+ bias) as one BLAS product over all rows; false (nothing written) when the
// layouts do not fit it or the product is too small to gain.
bool LinearByBlas(const TensorRef& x, const TensorRef& w, const TensorRef* bias,
                  const TensorRef& out) {
  const int lead = x.rank - 1;
  const int64_t in = x.sizes[lead];
  const int64_t outf = w.sizes[0];
  int64_t rows = 0, x_row = 0, out_rows = 0, out_row = 0;
  if (!CollapseRows(x, &rows, &x_row) || !CollapseRows(out, &out_rows, &out_row)) return false;
  if (rows * outf * in < kHostBlasMinWork) return false;
  BlasOperand a, b;
  int64_t ldc = 0;
  if (!AsBlasOperand(rows, in, x_row, x.strides[lead], &a) ||
      !AsBlasOperand(in, outf, w.strides[1], w.strides[0], &b) ||
      !AsBlasResult(rows, outf, out_row, out.strides[lead], &ldc)) {
    return false;
  }
  float* o = out.data_as<float>();
  if (bias != nullptr) {
    const float* bd = bias->data_as<const float>();
    const int64_t bs = bias->strides[0];
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t f = 0; f < outf; ++f) o[r * ldc + f] = bd[f * bs];
    }
  }
  HostSgemm(a.trans, b.trans, rows, outf, in, x.data_as<const float>(), a.ld,
            w.data_as<const float>(), b.ld, /*accumulate=*/bias != nullptr, o, ldc);
  return true;
}

// A linear over contiguous rows runs Ferry's own blocked loop (FloatLoops::rows_by_transposed)
// where no host BLAS takes it, and, even where one would, for few rows by a large weight: there
// the loop reads the weight once, where OpenBLAS's sgemm packs it on every call and its sgemv
// reads it once per row. BM_LinearRows (own loop against the BLAS, AVX-512, bench/README.md):
// by a [1024, 1024] weight 1 row 55 against 58 us, 16 rows 358 against 966 us, 64 rows 1.65
// against 1.94 ms; by a [256, 256] one 16 rows 27 against 37 us, 64 rows 111 against 93 us; by a
// [64, 64] one the BLAS is faster from 16 rows.
bool OwnLoopFirst(int64_t rows, int64_t weight_elements) {
  return (rows <= 16 && weight_elements >= 256 * 256) ||
         (rows <= 64 && weight_elements >= 1024 * 1024);
}

absl::Status LinearKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& x = *args[0].tensor;
  const TensorRef& w = *args[1].tensor;
  const TensorRef* bias = args.size() == 3 ? args[2].tensor : nullptr;
  const TensorRef& out = *results[0];
  const int lead = x.rank - 1;
  const int64_t in = x.sizes[lead];
  const int64_t outf = w.sizes[0];
  const int64_t xs = x.strides[lead];
  const int64_t os = out.strides[lead];
  const int64_t ws0 = w.strides[0];
  const int64_t ws1 = w.strides[1];
  const float* wd = w.data_as<const float>();
  const float* bd = bias != nullptr ? bias->data_as<const float>() : nullptr;
  const int64_t bs = bias != nullptr ? bias->strides[0] : 0;
  float* o = out.data_as<float>();
  const float* xd = x.data_as<const float>();
  // Rows of contiguous elements (x's, w's and out's last dimension dense, x's and out's leading
  // dimensions collapsing to rows of one stride each).
  int64_t rows = 0, x_row = 0, out_rows = 0, out_row = 0;
  const bool dense_rows = xs == 1 && ws1 == 1 && os == 1 && CollapseRows(x, &rows, &x_row) &&
                          CollapseRows(out, &out_rows, &out_row) && rows == out_rows;
  if (HostBlasEnabled() && !(dense_rows && OwnLoopFirst(rows, outf * in)) &&
      LinearByBlas(x, w, bias, out)) {
    return absl::OkStatus();
  }
  if (dense_rows) {
    Loops().rows_by_transposed(o, out_row, xd, x_row, rows, wd, ws0, outf, in, bd, bs);
    return absl::OkStatus();
  }
  ForEachOffset<2>(lead, out.sizes.data(), {out.strides.data(), x.strides.data()},
                   [&](const std::array<int64_t, 2>& off) {
                     const float* xrow = xd + off[1];
                     float* orow = o + off[0];
                     for (int64_t f = 0; f < outf; ++f) {
                       const float* wrow = wd + f * ws0;
                       float acc = 0.0f;
                       if (xs == 1 && ws1 == 1) {
                         for (int64_t i = 0; i < in; ++i) acc += xrow[i] * wrow[i];
                       } else {
                         for (int64_t i = 0; i < in; ++i) acc += xrow[i * xs] * wrow[i * ws1];
                       }
                       if (bd != nullptr) acc += bd[f * bs];
                       orow[f * os] = acc;
                     }
                   });
  return absl::OkStatus();
}

// ---- softmax, rms_norm ----------------------------------------------------------------------

// softmax and log_softmax (t x, int dim): a float32 result of x's shape; dim in range.
template <const char* kOp>
absl::Status RowwiseInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = kOp;
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(op, args, 0));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *x, DType::kFloat32));
  FERRY_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  FERRY_RETURN_IF_ERROR(NormalizeDim(op, 1, dim, x->rank).status());
  results[0].layout = ContiguousLayout(DType::kFloat32, Sizes(*x));
  results[0].view_offset = 0;
  return absl::OkStatus();
}
constexpr char kSoftmax[] = "softmax";
constexpr char kLogSoftmax[] = "log_softmax";

// Removes dimension `dim` from sizes and from each stride array, for iterating over the rows that
// a reduction along `dim` produces.
void DropDim(const TensorRef& shape, int dim, const TensorRef& t1, const TensorRef& t2,
             int64_t* sizes, int64_t* s1, int64_t* s2) {
  int r = 0;
  for (int d = 0; d < shape.rank; ++d) {
    if (d == dim) continue;
    sizes[r] = shape.sizes[d];
    s1[r] = t1.strides[d];
    s2[r] = t2.strides[d];
    ++r;
  }
}

// A softmax row: `x` and `out` with element steps `xs` and `os` along the reduced dim.
struct Row {
  const float* x;
  int64_t xs;
  float* out;
  int64_t os;
  int64_t len;
  bool dense() const { return xs == 1 && os == 1; }
};

// Calls f(row) for each row of `x` along the dim of argument 1 (an int, negative from the end),
// with the matching row of `out`; nothing for rows of no elements.
template <typename F>
void ForEachRowAlong(const TensorRef& x, const TensorRef& out, const Scalar& dim_arg, F&& f) {
  const int64_t raw_dim =
      dim_arg.kind == Scalar::Kind::kInt ? dim_arg.i : static_cast<int64_t>(dim_arg.b);
  const int dim = static_cast<int>(raw_dim < 0 ? raw_dim + x.rank : raw_dim);
  int64_t sizes[kMaxRank];
  int64_t os[kMaxRank];
  int64_t xs[kMaxRank];
  DropDim(x, dim, out, x, sizes, os, xs);
  const int64_t len = x.sizes[dim];
  if (len == 0) return;
  float* o = out.data_as<float>();
  const float* xd = x.data_as<const float>();
  ForEachOffset<2>(x.rank - 1, sizes, {os, xs}, [&](const std::array<int64_t, 2>& off) {
    f(Row{xd + off[1], x.strides[dim], o + off[0], out.strides[dim], len});
  });
}

absl::Status SoftmaxKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const FloatLoops& loops = Loops();
  ForEachRowAlong(*args[0].tensor, *results[0], *args[1].scalar, [&](const Row& r) {
    if (r.dense()) {
      const float max = loops.max(r.x, r.len);
      const float sum = loops.exp_sum(r.out, r.x, max, r.len);
      loops.mul_scalar(r.out, r.out, 1.0f / sum, r.len);
      return;
    }
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < r.len; ++j) max = std::fmax(max, r.x[j * r.xs]);
    float sum = 0.0f;
    for (int64_t j = 0; j < r.len; ++j) {
      const float e = std::exp(r.x[j * r.xs] - max);
      r.out[j * r.os] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < r.len; ++j) r.out[j * r.os] *= inv;
  });
  return absl::OkStatus();
}

// log_softmax(t x, int dim): x - max - log(sum(exp(x - max))) along dim, in float (the row's
// sum of exponentials as the SIMD loops compute it for dense rows).
absl::Status LogSoftmaxKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const FloatLoops& loops = Loops();
  ForEachRowAlong(*args[0].tensor, *results[0], *args[1].scalar, [&](const Row& r) {
    float max = -std::numeric_limits<float>::infinity();
    float sum = 0.0f;
    if (r.dense()) {
      max = loops.max(r.x, r.len);
      // exp_sum writes the exponentials into the row, which the last loop overwrites.
      sum = loops.exp_sum(r.out, r.x, max, r.len);
    } else {
      for (int64_t j = 0; j < r.len; ++j) max = std::fmax(max, r.x[j * r.xs]);
      for (int64_t j = 0; j < r.len; ++j) sum += std::exp(r.x[j * r.xs] - max);
    }
    const float shift = max + std::log(sum);
    for (int64_t j = 0; j < r.len; ++j) r.out[j * r.os] = r.x[j * r.xs] - shift;
  });
  return absl::OkStatus();
}

absl::Status RmsNormInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "rms_norm";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 3, 3, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* w, TensorArg(op, args, 1));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *x, DType::kFloat32));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 1, *w, DType::kFloat32));
  FERRY_RETURN_IF_ERROR(NumberArg(op, args, 2).status());
  if (x->rank < 1) {
    return OpError(op, "argument 0 has shape ", ShapeString(*x), ", expected at least 1 dimension");
  }
  if (w->rank != 1 || w->sizes[0] != x->sizes[x->rank - 1]) {
    return OpError(op, "argument 1 has shape ", ShapeString(*w), ", expected [",
                   x->sizes[x->rank - 1], "] (the last dimension of argument 0)");
  }
  results[0].layout = ContiguousLayout(DType::kFloat32, Sizes(*x));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status RmsNormKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& x = *args[0].tensor;
  const TensorRef& w = *args[1].tensor;
  const TensorRef& out = *results[0];
  const double eps = args[2].scalar->AsDouble();
  const int last = x.rank - 1;
  const int64_t len = x.sizes[last];
  const int64_t xstep = x.strides[last];
  const int64_t ostep = out.strides[last];
  const int64_t wstep = w.strides[0];
  const float* wd = w.data_as<const float>();
  const float* xd = x.data_as<const float>();
  float* o = out.data_as<float>();
  if (len == 0) return absl::OkStatus();
  const auto scale_of = [&](double sum_sq) {
    return static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(len) + eps));
  };
  if (xstep == 1 && ostep == 1 && wstep == 1) {
    const FloatLoops& loops = Loops();
    ForEachOffset<2>(last, out.sizes.data(), {out.strides.data(), x.strides.data()},
                     [&](const std::array<int64_t, 2>& off) {
                       const float* xr = xd + off[1];
                       loops.scale_mul(o + off[0], xr, scale_of(loops.sum_squares(xr, len)), wd,
                                       len);
                     });
    return absl::OkStatus();
  }
  ForEachOffset<2>(last, out.sizes.data(), {out.strides.data(), x.strides.data()},
                   [&](const std::array<int64_t, 2>& off) {
                     const float* xr = xd + off[1];
                     float* orow = o + off[0];
                     double sum_sq = 0.0;
                     for (int64_t j = 0; j < len; ++j) {
                       const double v = xr[j * xstep];
                       sum_sq += v * v;
                     }
                     const float scale = scale_of(sum_sq);
                     for (int64_t j = 0; j < len; ++j) {
                       orow[j * ostep] = xr[j * xstep] * scale * wd[j * wstep];
                     }
                   });
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterLinalgOps(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("matmul", 2, 2, 1, &MatmulInfer, &MatmulKernel)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("linear", 2, 3, 1, &LinearInfer, &LinearKernel)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("softmax", 2, 2, 1, &RowwiseInfer<kSoftmax>, &SoftmaxKernel)));
  FERRY_RETURN_IF_ERROR(registry.Register(
      MakeSchema("log_softmax", 2, 2, 1, &RowwiseInfer<kLogSoftmax>, &LogSoftmaxKernel)));
  return registry.Register(MakeSchema("rms_norm", 3, 3, 1, &RmsNormInfer, &RmsNormKernel));
}

}  // namespace ferry::internal
