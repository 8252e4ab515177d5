// Layers of convolutional and transformer networks (float32): conv (1-D and 2-D; stride, padding,
// dilation, groups, depthwise), batch_norm (inference), layer_norm, max_pool2d, avg_pool2d and
// adaptive_avg_pool2d, with ATen's shape rules and arithmetic.
//
// conv runs as im2col and one matrix product per image and group on the host BLAS (its second
// result is the column buffer, planned with the method's other values so that the kernel never
// allocates); a depthwise conv (one input channel per group) and a pointwise one (1x1, unit
// stride, no padding, dense input) need no columns and take their own paths. Builds without a
// BLAS, and layouts a BLAS cannot take, run a direct loop. Every kernel honours its inputs'
// strides. batch_norm and layer_norm compute their statistics and scales in double.
#include "ferry/kernels/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_blas.h"
#include "ferry/kernels/internal/host_ops.h"
#include "ferry/kernels/internal/op_util.h"
#include "ferry/kernels/internal/simd_loops.h"

namespace ferry {

int64_t ConvWorkspaceElements(int64_t channels_per_group, int64_t kernel_elements,
                              bool unit_stride_unpadded, int64_t out_spatial) {
  if (channels_per_group == 1) return 0;                       // depthwise: direct
  if (kernel_elements == 1 && unit_stride_unpadded) return 0;  // pointwise: x is the columns
  return channels_per_group * kernel_elements * out_spatial;
}

namespace internal {
namespace {

// Sizes beyond this (a kernel, a stride, a padding) are refused: no real layer comes near it, and
// it keeps every product of the shape rules below inside int64.
constexpr int64_t kMaxWindow = int64_t{1} << 24;

// The 2-D geometry of a sliding window over [N, C, H, W] (a 1-D op's [N, C, L] is [N, C, 1, L]).
struct Window {
  int64_t n = 1, c = 0, h = 1, w = 0;  // input
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t oh = 1, ow = 0;  // output
  // Element strides of the input's n, c, h, w (0 for a dimension the input lacks).
  int64_t xn = 0, xc = 0, xh = 0, xw = 0;
};

// Reads the input's sizes and strides: rank `spatial + 2`, or `spatial + 1` when `batch_optional`
// (no N).
absl::Status ReadInput(absl::string_view op, const TensorRef& x, int spatial, bool batch_optional,
                       Window* g) {
  const bool batched = x.rank == spatial + 2;
  if (!batched && !(batch_optional && x.rank == spatial + 1)) {
    return OpError(op, "argument 0 has shape ", ShapeString(x), ", expected ",
                   batch_optional ? absl::StrCat(spatial + 1, " or ") : "", spatial + 2,
                   " dimensions");
  }
  const int c = batched ? 1 : 0;
  g->n = batched ? x.sizes[0] : 1;
  g->xn = batched ? x.strides[0] : 0;
  g->c = x.sizes[c];
  g->xc = x.strides[c];
  g->w = x.sizes[x.rank - 1];
  g->xw = x.strides[x.rank - 1];
  if (spatial == 2) {
    g->h = x.sizes[c + 1];
    g->xh = x.strides[c + 1];
  }
  return absl::OkStatus();
}

// An int list argument of 1 or `spatial` entries (1 applies to every dimension), each within
// [min, kMaxWindow]; an empty list gives `fallback` (pooling's stride defaults to its kernel).
absl::Status ReadPair(absl::string_view op, absl::Span<const OpArg> args, int i, const char* what,
                      int spatial, int64_t min, const int64_t* fallback, int64_t* hv, int64_t* wv) {
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* list, IntListArg(op, args, i));
  if (list->empty() && fallback != nullptr) {
    *hv = fallback[0];
    *wv = fallback[1];
    return absl::OkStatus();
  }
  if (list->size() != 1 && list->size() != static_cast<size_t>(spatial)) {
    return OpError(op, "argument ", i, " (", what, ") has ", list->size(), " entries, expected ",
                   spatial == 1 ? "1" : "1 or 2");
  }
  for (int64_t v : *list) {
    if (v < min || v > kMaxWindow) {
      return OpError(op, "argument ", i, " (", what, ") holds ", v, ", expected ", min, " to ",
                     kMaxWindow);
    }
  }
  *wv = list->back();
  *hv = spatial == 2 ? list->front() : (min == 0 ? 0 : 1);
  return absl::OkStatus();
}

// ATen's pooling_output_shape, for a window that fits (OutputSizes checks): floor (or ceil) of
// the window positions, where with ceil_mode the last window must start inside the input or its
// left padding.
int64_t OutSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  int64_t out = (span + (ceil ? stride - 1 : 0)) / stride + 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The output size of each spatial dimension; an error naming the op when a window does not fit.
absl::Status OutputSizes(absl::string_view op, bool ceil, Window* g) {
  const int64_t kh_span = g->dh * (g->kh - 1) + 1;
  const int64_t kw_span = g->dw * (g->kw - 1) + 1;
  if (g->h + 2 * g->ph < kh_span || g->w + 2 * g->pw < kw_span) {
    return OpError(op, "the input's spatial size [", g->h, ", ", g->w, "] with padding [", g->ph,
                   ", ", g->pw, "] is smaller than the window [", kh_span, ", ", kw_span,
                   "] (kernel with dilation)");
  }
  g->oh = OutSize(g->h, g->kh, g->ph, g->sh, g->dh, ceil);
  g->ow = OutSize(g->w, g->kw, g->pw, g->sw, g->dw, ceil);
  return absl::OkStatus();
}

// The result's sizes: the input's with each spatial size replaced.
std::vector<int64_t> WindowOutSizes(const TensorRef& x, int spatial, int64_t channels,
                                    const Window& g) {
  std::vector<int64_t> sizes(Sizes(x).begin(), Sizes(x).end());
  sizes[x.rank - 1 - spatial] = channels;
  sizes[x.rank - 1] = g.ow;
  if (spatial == 2) sizes[x.rank - 2] = g.oh;
  return sizes;
}

// ---- conv -----------------------------------------------------------------------------------
//   conv(t x, t w, intlist stride, intlist padding, intlist dilation, int groups[, t bias])
//   x [N, C, L] or [N, C, H, W]; w [O, C / groups, kL] or [O, C / groups, kH, kW]; bias [O].
//   Results: [N, O, ...] and the im2col columns (ConvWorkspaceElements, 1-D float32).

struct Conv {
  Window g;
  int64_t groups = 1, o = 0, cg = 0, og = 0;
  int spatial = 2;
};

// What conv and conv_transpose read alike: x (argument 0) and w (argument 1), float32, x
// [N, C, L] or [N, C, H, W] into `g`, and the groups (argument `groups_arg`) dividing C.
struct ConvOperands {
  const TensorRef* x = nullptr;
  const TensorRef* w = nullptr;
  int spatial = 2;
  int64_t groups = 1;
};

absl::StatusOr<ConvOperands> ReadConvOperands(absl::string_view op, absl::Span<const OpArg> args,
                                              int groups_arg, Window* g) {
  ConvOperands c;
  FERRY_ASSIGN_OR_RETURN(c.x, TensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(c.w, TensorArg(op, args, 1));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *c.x, DType::kFloat32));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 1, *c.w, DType::kFloat32));
  if (c.x->rank != 3 && c.x->rank != 4) {
    return OpError(op, "argument 0 has shape ", ShapeString(*c.x),
                   ", expected [N, C, L] (1-D) or [N, C, H, W] (2-D)");
  }
  c.spatial = c.x->rank - 2;
  FERRY_RETURN_IF_ERROR(ReadInput(op, *c.x, c.spatial, /*batch_optional=*/false, g));
  FERRY_ASSIGN_OR_RETURN(c.groups, IntArg(op, args, groups_arg));
  if (c.groups < 1 || g->c % c.groups != 0) {
    return OpError(op, "argument ", groups_arg, " (groups) is ", c.groups,
                   ", which does not divide the ", g->c, " input channels");
  }
  return c;
}

// The kernel's sizes, w's last one or two dims, into `g`.
absl::Status ReadKernel(absl::string_view op, const TensorRef& w, int spatial, Window* g) {
  g->kw = w.sizes[w.rank - 1];
  g->kh = spatial == 2 ? w.sizes[2] : 1;
  if (g->kh < 1 || g->kw < 1 || g->kh > kMaxWindow || g->kw > kMaxWindow) {
    return OpError(op, "argument 1 (weight) has shape ", ShapeString(w),
                   ", whose kernel is empty or larger than ", kMaxWindow);
  }
  return absl::OkStatus();
}

absl::StatusOr<Conv> ReadConv(absl::Span<const OpArg> args) {
  constexpr absl::string_view op = "conv";
  Conv c;
  FERRY_ASSIGN_OR_RETURN(const ConvOperands operands, ReadConvOperands(op, args, 5, &c.g));
  const TensorRef* x = operands.x;
  const TensorRef* w = operands.w;
  c.spatial = operands.spatial;
  c.groups = operands.groups;
  if (w->rank != x->rank || w->sizes[1] * c.groups != c.g.c) {
    return OpError(op, "argument 1 (weight) has shape ", ShapeString(*w), ", expected [O, ",
                   c.g.c / c.groups, c.spatial == 2 ? ", kH, kW]" : ", kL]", " for input channels ",
                   c.g.c, " in ", c.groups, " groups");
  }
  c.o = w->sizes[0];
  if (c.o % c.groups != 0) {
    return OpError(op, "argument 1 (weight) has ", c.o, " output channels, not a multiple of the ",
                   c.groups, " groups");
  }
  c.cg = c.g.c / c.groups;
  c.og = c.o / c.groups;
  FERRY_RETURN_IF_ERROR(ReadKernel(op, *w, c.spatial, &c.g));
  FERRY_RETURN_IF_ERROR(ReadPair(op, args, 2, "stride", c.spatial, 1, nullptr, &c.g.sh, &c.g.sw));
  FERRY_RETURN_IF_ERROR(ReadPair(op, args, 3, "padding", c.spatial, 0, nullptr, &c.g.ph, &c.g.pw));
  FERRY_RETURN_IF_ERROR(ReadPair(op, args, 4, "dilation", c.spatial, 1, nullptr, &c.g.dh, &c.g.dw));
  if (args.size() == 7) {
    FERRY_ASSIGN_OR_RETURN(const TensorRef* bias, TensorArg(op, args, 6));
    FERRY_RETURN_IF_ERROR(CheckDType(op, 6, *bias, DType::kFloat32));
    if (bias->rank != 1 || bias->sizes[0] != c.o) {
      return OpError(op, "argument 6 (bias) has shape ", ShapeString(*bias), ", expected [", c.o,
                     "]");
    }
  }
  FERRY_RETURN_IF_ERROR(OutputSizes(op, /*ceil=*/false, &c.g));
  // The column buffer's elements must count in int64.
  int64_t columns = 0;
  if (__builtin_mul_overflow(c.cg, c.g.kh * c.g.kw, &columns) ||
      __builtin_mul_overflow(columns, c.g.oh * c.g.ow, &columns)) {
    return OpError(op, "the im2col buffer of ", c.cg, " channels by a [", c.g.kh, ", ", c.g.kw,
                   "] kernel by [", c.g.oh, ", ", c.g.ow, "] outputs is too large");
  }
  return c;
}

bool UnitStrideUnpadded(const Window& g) {
  return g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

absl::Status ConvInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  FERRY_RETURN_IF_ERROR(CheckArity("conv", args, 6, 7, results, 2));
  FERRY_ASSIGN_OR_RETURN(const Conv c, ReadConv(args));
  const TensorRef& x = *args[0].tensor;
  results[0].layout = ContiguousLayout(DType::kFloat32, WindowOutSizes(x, c.spatial, c.o, c.g));
  results[0].view_offset = 0;
  const int64_t columns =
      ConvWorkspaceElements(c.cg, c.g.kh * c.g.kw, UnitStrideUnpadded(c.g), c.g.oh * c.g.ow);
  results[1].layout = ContiguousLayout(DType::kFloat32, {columns});
  results[1].view_offset = 0;
  return absl::OkStatus();
}

// The element strides of conv's weight [O, C/groups, (kH,) kW] and output [N, O, (H,) W] (0 for
// the H of a 1-D conv).
struct ConvStrides {
  ConvStrides(const Conv& c, const TensorRef& w, const TensorRef& out)
      : w0(w.strides[0]),
        w1(w.strides[1]),
        wh(c.spatial == 2 ? w.strides[2] : 0),
        ww(w.strides[w.rank - 1]),
        on(out.strides[0]),
        oc(out.strides[1]),
        oh(c.spatial == 2 ? out.strides[2] : 0),
        ow(out.strides[out.rank - 1]) {}
  int64_t w0, w1, wh, ww, on, oc, oh, ow;
};

// out[n, oc, oy, ox] = bias[oc] + sum over the group's channels and the kernel, reading x and w
// through their strides; for layouts and builds the BLAS path does not take.
void ConvDirect(const Conv& c, const TensorRef& x, const TensorRef& w, const TensorRef* bias,
                const TensorRef& out) {
  const Window& g = c.g;
  const ConvStrides s(c, w, out);
  const float* xd = x.data_as<const float>();
  const float* wd = w.data_as<const float>();
  float* od = out.data_as<float>();
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t oc = 0; oc < c.o; ++oc) {
      const int64_t first_c = (oc / c.og) * c.cg;
      const float b = bias != nullptr ? bias->data_as<const float>()[oc * bias->strides[0]] : 0.0f;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          float acc = b;
          for (int64_t ci = 0; ci < c.cg; ++ci) {
            const float* xc = xd + n * g.xn + (first_c + ci) * g.xc;
            const float* wc = wd + oc * s.w0 + ci * s.w1;
            for (int64_t ky = 0; ky < g.kh; ++ky) {
              const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
              if (iy < 0 || iy >= g.h) continue;
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                const int64_t ix = ox * g.sw - g.pw + kx * g.dw;
                if (ix < 0 || ix >= g.w) continue;
                acc += xc[iy * g.xh + ix * g.xw] * wc[ky * s.wh + kx * s.ww];
              }
            }
          }
          od[n * s.on + oc * s.oc + oy * s.oh + ox * s.ow] = acc;
        }
      }
    }
  }
}

// Depthwise (one input channel per group): each output channel slides its kernel over its input
// channel; the interior of a row, where no tap falls into the padding, runs without bounds checks.
void ConvDepthwise(const Conv& c, const TensorRef& x, const TensorRef& w, const TensorRef* bias,
                   const TensorRef& out) {
  const Window& g = c.g;
  const ConvStrides s(c, w, out);
  const float* xd = x.data_as<const float>();
  const float* wd = w.data_as<const float>();
  float* od = out.data_as<float>();
  // Output columns [x_lo, x_hi) read only columns inside the input.
  const int64_t x_lo = std::min(g.ow, (g.pw + g.sw - 1) / g.sw);
  int64_t x_hi = g.ow;
  while (x_hi > x_lo && (x_hi - 1) * g.sw - g.pw + (g.kw - 1) * g.dw >= g.w) --x_hi;
  const bool rows_by_tap = g.sw == 1 && g.xw == 1 && s.ow == 1;
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t oc = 0; oc < c.o; ++oc) {
      const float* xc = xd + n * g.xn + (oc / c.og) * g.xc;
      const float* wc = wd + oc * s.w0;
      const float b = bias != nullptr ? bias->data_as<const float>()[oc * bias->strides[0]] : 0.0f;
      float* oplane = od + n * s.on + oc * s.oc;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        float* orow = oplane + oy * s.oh;
        if (rows_by_tap) {
          // Each tap adds its weight times a shifted input row to the output row: loops the
          // compiler vectorizes, over the columns whose input lies inside the row.
          std::fill(orow, orow + g.ow, b);
          for (int64_t ky = 0; ky < g.kh; ++ky) {
            const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
            if (iy < 0 || iy >= g.h) continue;
            const float* xrow = xc + iy * g.xh;
            for (int64_t kx = 0; kx < g.kw; ++kx) {
              const float wv = wc[ky * s.wh + kx * s.ww];
              const int64_t shift = kx * g.dw - g.pw;
              const int64_t lo = std::clamp<int64_t>(-shift, 0, g.ow);
              const int64_t hi = std::clamp<int64_t>(g.w - shift, lo, g.ow);
              const float* xs = xrow + shift;
              for (int64_t ox = lo; ox < hi; ++ox) orow[ox] += wv * xs[ox];
            }
          }
          continue;
        }
        const auto at = [&](int64_t ox, bool checked) {
          float acc = b;
          for (int64_t ky = 0; ky < g.kh; ++ky) {
            const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
            if (iy < 0 || iy >= g.h) continue;
            const float* xrow = xc + iy * g.xh;
            const float* wrow = wc + ky * s.wh;
            const int64_t ix0 = ox * g.sw - g.pw;
            for (int64_t kx = 0; kx < g.kw; ++kx) {
              const int64_t ix = ix0 + kx * g.dw;
              if (checked && (ix < 0 || ix >= g.w)) continue;
              acc += xrow[ix * g.xw] * wrow[kx * s.ww];
            }
          }
          orow[ox * s.ow] = acc;
        };
        for (int64_t ox = 0; ox < x_lo; ++ox) at(ox, true);
        for (int64_t ox = x_lo; ox < x_hi; ++ox) at(ox, false);
        for (int64_t ox = std::max(x_lo, x_hi); ox < g.ow; ++ox) at(ox, true);
      }
    }
  }
}

// The columns of image n, group grp: row (ci, ky, kx), column (oy, ox) holds the input element
// that tap reads for that output, or 0 in the padding.
void Im2Col(const Conv& c, const float* xd, int64_t n, int64_t grp, float* col) {
  const Window& g = c.g;
  const int64_t cols = g.oh * g.ow;
  for (int64_t ci = 0; ci < c.cg; ++ci) {
    const float* xc = xd + n * g.xn + (grp * c.cg + ci) * g.xc;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        float* row = col + ((ci * g.kh + ky) * g.kw + kx) * cols;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          float* dst = row + oy * g.ow;
          const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
          if (iy < 0 || iy >= g.h) {
            std::fill(dst, dst + g.ow, 0.0f);
            continue;
          }
          const float* xrow = xc + iy * g.xh;
          const int64_t ix0 = kx * g.dw - g.pw;
          if (g.sw == 1 && g.xw == 1) {
            // Columns whose input index ix0 + ox lies in [0, w).
            const int64_t lo = std::clamp<int64_t>(-ix0, 0, g.ow);
            const int64_t hi = std::clamp<int64_t>(g.w - ix0, lo, g.ow);
            std::fill(dst, dst + lo, 0.0f);
            std::copy(xrow + ix0 + lo, xrow + ix0 + hi, dst + lo);
            std::fill(dst + hi, dst + g.ow, 0.0f);
            continue;
          }
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const int64_t ix = ix0 + ox * g.sw;
            dst[ox] = ix >= 0 && ix < g.w ? xrow[ix * g.xw] : 0.0f;
          }
        }
      }
    }
  }
}

absl::Status ConvKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  // The arguments were checked at load; reading them again costs a few comparisons.
  absl::StatusOr<Conv> read = ReadConv(args);
  if (!read.ok()) return read.status();
  const Conv& c = *read;
  const Window& g = c.g;
  const TensorRef& x = *args[0].tensor;
  const TensorRef& w = *args[1].tensor;
  const TensorRef* bias = args.size() == 7 ? args[6].tensor : nullptr;
  const TensorRef& out = *results[0];
  if (out.numel() == 0) return absl::OkStatus();
  if (c.cg == 1) {
    ConvDepthwise(c, x, w, bias, out);
    return absl::OkStatus();
  }
  const int64_t k = c.cg * g.kh * g.kw;
  if (k == 0) {  // no input channels: the bias alone
    ConvDirect(c, x, w, bias, out);
    return absl::OkStatus();
  }
  const int64_t cols = g.oh * g.ow;
  const bool pointwise = g.kh * g.kw == 1 && UnitStrideUnpadded(g);
  // The product per image and group: out[og, cols] = w[og, k] x columns[k, cols], all row-major.
  const bool blas = HostBlasEnabled() && w.IsContiguous() && out.IsContiguous() &&
                    (!pointwise || (g.xw == 1 && (g.h == 1 || g.xh == g.w) && g.xc == g.h * g.w)) &&
                    k <= std::numeric_limits<int32_t>::max() &&
                    cols <= std::numeric_limits<int32_t>::max();
  if (!blas) {
    ConvDirect(c, x, w, bias, out);
    return absl::OkStatus();
  }
  const float* xd = x.data_as<const float>();
  const float* wd = w.data_as<const float>();
  float* od = out.data_as<float>();
  float* col = results[1]->data_as<float>();
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t grp = 0; grp < c.groups; ++grp) {
      const float* b_matrix = col;
      if (pointwise) {
        b_matrix = xd + n * g.xn + grp * c.cg * g.xc;
      } else {
        Im2Col(c, xd, n, grp, col);
      }
      float* o = od + (n * c.o + grp * c.og) * cols;
      if (bias != nullptr) {
        const float* bd = bias->data_as<const float>();
        for (int64_t r = 0; r < c.og; ++r) {
          std::fill(o + r * cols, o + (r + 1) * cols, bd[(grp * c.og + r) * bias->strides[0]]);
        }
      }
      HostSgemm(false, false, c.og, cols, k, wd + grp * c.og * k, k, b_matrix, cols,
                /*accumulate=*/bias != nullptr, o, cols);
    }
  }
  return absl::OkStatus();
}

// ---- conv_transpose -------------------------------------------------------------------------
//   conv_transpose(t x, t w, intlist stride, intlist padding, intlist output_padding,
//                  intlist dilation, int groups[, t bias])
//   ATen's transposed convolution: x [N, C, L] or [N, C, H, W]; w [C, O / groups, kL] or
//   [C, O / groups, kH, kW]; bias [O]. Each spatial size out = (in - 1) * stride - 2 * padding +
//   dilation * (k - 1) + output_padding + 1; output_padding is below stride or dilation.

struct ConvTranspose {
  Window g;  // oh, ow: the output's spatial sizes
  int64_t groups = 1, o = 0, cg = 0, og = 0, oph = 0, opw = 0;
  int spatial = 2;
};

absl::StatusOr<ConvTranspose> ReadConvTranspose(absl::Span<const OpArg> args) {
  constexpr absl::string_view op = "conv_transpose";
  ConvTranspose c;
  FERRY_ASSIGN_OR_RETURN(const ConvOperands operands, ReadConvOperands(op, args, 6, &c.g));
  const TensorRef* x = operands.x;
  const TensorRef* w = operands.w;
  c.spatial = operands.spatial;
  c.groups = operands.groups;
  if (w->rank != x->rank || w->sizes[0] != c.g.c || w->sizes[1] > kMaxWindow) {
    return OpError(op, "argument 1 (weight) has shape ", ShapeString(*w), ", expected [", c.g.c,
                   ", O / groups", c.spatial == 2 ? ", kH, kW]" : ", kL]");
  }
  c.cg = c.g.c / c.groups;
  c.og = w->sizes[1];
  c.o = c.og * c.groups;
  FERRY_RETURN_IF_ERROR(ReadKernel(op, *w, c.spatial, &c.g));
  FERRY_RETURN_IF_ERROR(ReadPair(op, args, 2, "stride", c.spatial, 1, nullptr, &c.g.sh, &c.g.sw));
  FERRY_RETURN_IF_ERROR(ReadPair(op, args, 3, "padding", c.spatial, 0, nullptr, &c.g.ph, &c.g.pw));
  FERRY_RETURN_IF_ERROR(
      ReadPair(op, args, 4, "output_padding", c.spatial, 0, nullptr, &c.oph, &c.opw));
  FERRY_RETURN_IF_ERROR(ReadPair(op, args, 5, "dilation", c.spatial, 1, nullptr, &c.g.dh, &c.g.dw));
  if ((c.oph >= c.g.sh && c.oph >= c.g.dh) || (c.opw >= c.g.sw && c.opw >= c.g.dw)) {
    return OpError(op,
                   "argument 4 (output_padding) must be smaller than the stride or the "
                   "dilation");
  }
  if (args.size() == 8) {
    FERRY_ASSIGN_OR_RETURN(const TensorRef* bias, TensorArg(op, args, 7));
    FERRY_RETURN_IF_ERROR(CheckDType(op, 7, *bias, DType::kFloat32));
    if (bias->rank != 1 || bias->sizes[0] != c.o) {
      return OpError(op, "argument 7 (bias) has shape ", ShapeString(*bias), ", expected [", c.o,
                     "]");
    }
  }
  // Every term is below 2^24 * 2^24 or the input's size: the sums stay inside int64.
  c.g.oh = (c.g.h - 1) * c.g.sh - 2 * c.g.ph + c.g.dh * (c.g.kh - 1) + c.oph + 1;
  c.g.ow = (c.g.w - 1) * c.g.sw - 2 * c.g.pw + c.g.dw * (c.g.kw - 1) + c.opw + 1;
  if (c.g.h == 0 || c.g.w == 0 || c.g.oh < 1 || c.g.ow < 1) {
    return OpError(op, "the input's spatial size [", c.g.h, ", ", c.g.w,
                   "] gives an empty output [", c.g.oh, ", ", c.g.ow, "]");
  }
  return c;
}

absl::Status ConvTransposeInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  FERRY_RETURN_IF_ERROR(CheckArity("conv_transpose", args, 7, 8, results, 1));
  FERRY_ASSIGN_OR_RETURN(const ConvTranspose c, ReadConvTranspose(args));
  results[0].layout =
      ContiguousLayout(DType::kFloat32, WindowOutSizes(*args[0].tensor, c.spatial, c.o, c.g));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// Each input element adds its products with the kernel to the outputs it reaches:
// out[n, g * og + k, y * sh - ph + ky * dh, x * sw - pw + kx * dw] +=
//   x[n, g * cg + ci, y, x] * w[g * cg + ci, k, ky, kx], after out = bias.
absl::Status ConvTransposeKernel(absl::Span<const OpArg> args,
                                 absl::Span<TensorRef* const> results) {
  FERRY_ASSIGN_OR_RETURN(const ConvTranspose c, ReadConvTranspose(args));
  const Window& g = c.g;
  const TensorRef& x = *args[0].tensor;
  const TensorRef& w = *args[1].tensor;
  const TensorRef& out = *results[0];
  const TensorRef* bias = args.size() == 8 ? args[7].tensor : nullptr;
  const int64_t w0 = w.strides[0], w1 = w.strides[1];
  const int64_t wh = c.spatial == 2 ? w.strides[2] : 0, ww = w.strides[w.rank - 1];
  const int64_t on = out.strides[0], oc = out.strides[1];
  const int64_t ohs = c.spatial == 2 ? out.strides[2] : 0, ows = out.strides[out.rank - 1];
  const float* xd = x.data_as<const float>();
  const float* wd = w.data_as<const float>();
  float* od = out.data_as<float>();
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t k = 0; k < c.o; ++k) {
      const float b = bias != nullptr ? bias->data_as<const float>()[k * bias->strides[0]] : 0.0f;
      for (int64_t y = 0; y < g.oh; ++y) {
        for (int64_t xx = 0; xx < g.ow; ++xx) od[n * on + k * oc + y * ohs + xx * ows] = b;
      }
    }
    for (int64_t ci = 0; ci < g.c; ++ci) {
      const int64_t group = ci / c.cg;
      for (int64_t iy = 0; iy < g.h; ++iy) {
        for (int64_t ix = 0; ix < g.w; ++ix) {
          const float v = xd[n * g.xn + ci * g.xc + iy * g.xh + ix * g.xw];
          for (int64_t k = 0; k < c.og; ++k) {
            float* plane = od + n * on + (group * c.og + k) * oc;
            const float* kernel = wd + ci * w0 + k * w1;
            for (int64_t ky = 0; ky < g.kh; ++ky) {
              const int64_t oy = iy * g.sh - g.ph + ky * g.dh;
              if (oy < 0 || oy >= g.oh) continue;
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                const int64_t ox = ix * g.sw - g.pw + kx * g.dw;
                if (ox < 0 || ox >= g.ow) continue;
                plane[oy * ohs + ox * ows] += v * kernel[ky * wh + kx * ww];
              }
            }
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

// ---- batch_norm -----------------------------------------------------------------------------
//   batch_norm(t x, t|none weight, t|none bias, t mean, t var, number eps)
//   x [N, C, ...]; weight, bias, mean, var [C]: (x - mean) / sqrt(var + eps) * weight + bias.

// Argument i as a float32 [channels] tensor, or null for a None scalar when `optional`.
absl::StatusOr<const TensorRef*> ChannelArg(absl::string_view op, absl::Span<const OpArg> args,
                                            int i, const char* what, int64_t channels,
                                            bool optional) {
  if (optional && args[i].scalar != nullptr && args[i].scalar->kind == Scalar::Kind::kNone) {
    return nullptr;
  }
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, TensorArg(op, args, i));
  FERRY_RETURN_IF_ERROR(CheckDType(op, i, *t, DType::kFloat32));
  if (t->rank != 1 || t->sizes[0] != channels) {
    return OpError(op, "argument ", i, " (", what, ") has shape ", ShapeString(*t), ", expected [",
                   channels, "]");
  }
  return t;
}

absl::Status BatchNormInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "batch_norm";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 6, 6, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(op, args, 0));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *x, DType::kFloat32));
  if (x->rank < 2) {
    return OpError(op, "argument 0 has shape ", ShapeString(*x),
                   ", expected at least 2 dimensions [N, C, ...]");
  }
  const int64_t channels = x->sizes[1];
  FERRY_RETURN_IF_ERROR(ChannelArg(op, args, 1, "weight", channels, true).status());
  FERRY_RETURN_IF_ERROR(ChannelArg(op, args, 2, "bias", channels, true).status());
  FERRY_RETURN_IF_ERROR(ChannelArg(op, args, 3, "running_mean", channels, false).status());
  FERRY_RETURN_IF_ERROR(ChannelArg(op, args, 4, "running_var", channels, false).status());
  FERRY_RETURN_IF_ERROR(NumberArg(op, args, 5).status());
  results[0].layout = ContiguousLayout(DType::kFloat32, Sizes(*x));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// Element `i` of an optional [C] tensor, or `absent`.
float ChannelValue(const OpArg& arg, int64_t i, float absent) {
  if (arg.tensor == nullptr) return absent;
  return arg.tensor->data_as<const float>()[i * arg.tensor->strides[0]];
}

absl::Status BatchNormKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& x = *args[0].tensor;
  const TensorRef& out = *results[0];
  const double eps = args[5].scalar->AsDouble();
  const float* xd = x.data_as<const float>();
  float* od = out.data_as<float>();
  const int inner_rank = x.rank - 2;
  for (int64_t c = 0; c < x.sizes[1]; ++c) {
    const double var = ChannelValue(args[4], c, 0.0f);
    const double scale_d = ChannelValue(args[1], c, 1.0f) / std::sqrt(var + eps);
    const float scale = static_cast<float>(scale_d);
    const float shift = static_cast<float>(ChannelValue(args[2], c, 0.0f) -
                                           ChannelValue(args[3], c, 0.0f) * scale_d);
    for (int64_t n = 0; n < x.sizes[0]; ++n) {
      const float* xs = xd + n * x.strides[0] + c * x.strides[1];
      float* os = od + n * out.strides[0] + c * out.strides[1];
      ForEachOffset<2>(
          inner_rank, x.sizes.data() + 2, {out.strides.data() + 2, x.strides.data() + 2},
          [&](const std::array<int64_t, 2>& off) { os[off[0]] = xs[off[1]] * scale + shift; });
    }
  }
  return absl::OkStatus();
}

// ---- layer_norm -----------------------------------------------------------------------------
//   layer_norm(t x, intlist normalized_shape, t|none weight, t|none bias, number eps)
//   Over x's last len(normalized_shape) dimensions, which must equal normalized_shape; weight and
//   bias have that shape. Biased variance, as ATen.

absl::Status LayerNormInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "layer_norm";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 5, 5, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(op, args, 0));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *x, DType::kFloat32));
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* shape, IntListArg(op, args, 1));
  const int k = static_cast<int>(shape->size());
  if (k < 1 || k > x->rank ||
      !std::equal(shape->begin(), shape->end(), x->sizes.begin() + (x->rank - k))) {
    return OpError(op, "argument 1 (normalized_shape) is ", ShapeString(*shape),
                   ", which is not a non-empty suffix of argument 0's shape ", ShapeString(*x));
  }
  for (int i = 2; i <= 3; ++i) {
    if (args[i].scalar != nullptr && args[i].scalar->kind == Scalar::Kind::kNone) continue;
    FERRY_ASSIGN_OR_RETURN(const TensorRef* t, TensorArg(op, args, i));
    FERRY_RETURN_IF_ERROR(CheckDType(op, i, *t, DType::kFloat32));
    if (Sizes(*t) != absl::MakeConstSpan(*shape)) {
      return OpError(op, "argument ", i, i == 2 ? " (weight)" : " (bias)", " has shape ",
                     ShapeString(*t), ", expected normalized_shape ", ShapeString(*shape));
    }
  }
  FERRY_RETURN_IF_ERROR(NumberArg(op, args, 4).status());
  results[0].layout = ContiguousLayout(DType::kFloat32, Sizes(*x));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status LayerNormKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& x = *args[0].tensor;
  const TensorRef& out = *results[0];
  const int k = static_cast<int>(args[1].scalar->list.size());
  const int lead = x.rank - k;
  const double eps = args[4].scalar->AsDouble();
  const TensorRef* weight = args[2].tensor;
  const TensorRef* bias = args[3].tensor;
  int64_t len = 1;
  for (int d = lead; d < x.rank; ++d) len *= x.sizes[d];
  if (len == 0) return absl::OkStatus();
  const float* xd = x.data_as<const float>();
  float* od = out.data_as<float>();
  // weight and bias strides over the normalized dimensions (0 for an absent one, read as 1 or 0).
  static constexpr int64_t kNoStrides[kMaxRank] = {};
  const int64_t* ws = weight != nullptr ? weight->strides.data() : kNoStrides;
  const int64_t* bs = bias != nullptr ? bias->strides.data() : kNoStrides;
  const float one = 1.0f, zero = 0.0f;
  const float* wd = weight != nullptr ? weight->data_as<const float>() : &one;
  const float* bd = bias != nullptr ? bias->data_as<const float>() : &zero;
  const int64_t* norm_sizes = x.sizes.data() + lead;
  // Rows of dense elements in x, out, weight and bias: the SIMD sums in double (the variance as
  // E[x^2] - mean^2, which double keeps exact enough for float inputs), then one loop.
  const auto dense = [&](const TensorRef* t, int first) {
    if (t == nullptr) return true;
    int64_t expect = 1;
    for (int d = t->rank - 1; d >= first; --d) {
      if (t->sizes[d] != 1 && t->strides[d] != expect) return false;
      expect *= t->sizes[d];
    }
    return true;
  };
  if (dense(&x, lead) && dense(&out, lead) && dense(weight, 0) && dense(bias, 0)) {
    const FloatLoops& loops = Loops();
    const double n = static_cast<double>(len);
    ForEachOffset<2>(lead, x.sizes.data(), {out.strides.data(), x.strides.data()},
                     [&](const std::array<int64_t, 2>& row) {
                       const float* xr = xd + row[1];
                       float* orow = od + row[0];
                       const double mean = loops.sum(xr, len) / n;
                       const double var =
                           std::max(loops.sum_squares(xr, len) / n - mean * mean, 0.0);
                       const float m = static_cast<float>(mean);
                       const float r = static_cast<float>(1.0 / std::sqrt(var + eps));
                       if (weight != nullptr && bias != nullptr) {
                         for (int64_t j = 0; j < len; ++j)
                           orow[j] = (xr[j] - m) * r * wd[j] + bd[j];
                       } else if (weight != nullptr) {
                         for (int64_t j = 0; j < len; ++j) orow[j] = (xr[j] - m) * r * wd[j];
                       } else if (bias != nullptr) {
                         for (int64_t j = 0; j < len; ++j) orow[j] = (xr[j] - m) * r + bd[j];
                       } else {
                         for (int64_t j = 0; j < len; ++j) orow[j] = (xr[j] - m) * r;
                       }
                     });
    return absl::OkStatus();
  }
  ForEachOffset<2>(lead, x.sizes.data(), {out.strides.data(), x.strides.data()},
                   [&](const std::array<int64_t, 2>& row) {
                     const float* xr = xd + row[1];
                     float* orow = od + row[0];
                     double sum = 0.0;
                     ForEachOffset<1>(k, norm_sizes, {x.strides.data() + lead},
                                      [&](const std::array<int64_t, 1>& o) { sum += xr[o[0]]; });
                     const double mean = sum / static_cast<double>(len);
                     double sq = 0.0;
                     ForEachOffset<1>(k, norm_sizes, {x.strides.data() + lead},
                                      [&](const std::array<int64_t, 1>& o) {
                                        const double d = xr[o[0]] - mean;
                                        sq += d * d;
                                      });
                     const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(len) + eps);
                     const float m = static_cast<float>(mean);
                     const float r = static_cast<float>(rstd);
                     ForEachOffset<4>(k, norm_sizes,
                                      {out.strides.data() + lead, x.strides.data() + lead, ws, bs},
                                      [&](const std::array<int64_t, 4>& o) {
                                        orow[o[0]] = (xr[o[1]] - m) * r * wd[o[2]] + bd[o[3]];
                                      });
                   });
  return absl::OkStatus();
}

// ---- pooling --------------------------------------------------------------------------------
//   max_pool2d(t x, intlist kernel, intlist stride, intlist padding, intlist dilation, bool ceil)
//   avg_pool2d(t x, intlist kernel, intlist stride, intlist padding, bool ceil,
//              bool count_include_pad, int|none divisor_override)
//   adaptive_avg_pool2d(t x, intlist output_size)
//   x [N, C, H, W] or [C, H, W]; an empty stride is the kernel; padding at most half the kernel.

absl::StatusOr<Window> ReadPool(absl::string_view op, absl::Span<const OpArg> args, bool dilation,
                                bool ceil) {
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(op, args, 0));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *x, DType::kFloat32));
  Window g;
  FERRY_RETURN_IF_ERROR(ReadInput(op, *x, 2, /*batch_optional=*/true, &g));
  FERRY_RETURN_IF_ERROR(ReadPair(op, args, 1, "kernel_size", 2, 1, nullptr, &g.kh, &g.kw));
  const int64_t kernel[2] = {g.kh, g.kw};
  FERRY_RETURN_IF_ERROR(ReadPair(op, args, 2, "stride", 2, 1, kernel, &g.sh, &g.sw));
  FERRY_RETURN_IF_ERROR(ReadPair(op, args, 3, "padding", 2, 0, nullptr, &g.ph, &g.pw));
  if (dilation) {
    FERRY_RETURN_IF_ERROR(ReadPair(op, args, 4, "dilation", 2, 1, nullptr, &g.dh, &g.dw));
  }
  // ATen's limit: half the kernel's extent (with dilation, for max_pool2d).
  if (g.ph > ((g.kh - 1) * g.dh + 1) / 2 || g.pw > ((g.kw - 1) * g.dw + 1) / 2) {
    return OpError(op, "argument 3 (padding) is [", g.ph, ", ", g.pw,
                   "], more than half the kernel [", g.kh, ", ", g.kw, "]");
  }
  FERRY_RETURN_IF_ERROR(OutputSizes(op, ceil, &g));
  return g;
}

absl::Status MaxPoolInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "max_pool2d";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 6, 6, results, 1));
  FERRY_ASSIGN_OR_RETURN(const int64_t ceil, IntArg(op, args, 5));
  FERRY_ASSIGN_OR_RETURN(const Window g, ReadPool(op, args, true, ceil != 0));
  const TensorRef& x = *args[0].tensor;
  results[0].layout = ContiguousLayout(DType::kFloat32, WindowOutSizes(x, 2, g.c, g));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// Calls f(plane_in, plane_out) for each [H, W] plane of x and out (N * C of them).
template <typename F>
void ForEachPlane(const TensorRef& x, const TensorRef& out, const Window& g, F&& f) {
  const float* xd = x.data_as<const float>();
  float* od = out.data_as<float>();
  const bool batched = x.rank == 4;
  const int64_t on = batched ? out.strides[0] : 0;
  const int64_t oc = out.strides[batched ? 1 : 0];
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t c = 0; c < g.c; ++c) f(xd + n * g.xn + c * g.xc, od + n * on + c * oc);
  }
}

absl::Status MaxPoolKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  absl::StatusOr<Window> read =
      ReadPool("max_pool2d", args, true, ScalarAs<int64_t>(*args[5].scalar) != 0);
  if (!read.ok()) return read.status();
  const Window& g = *read;
  const TensorRef& out = *results[0];
  const int64_t osh = out.strides[out.rank - 2], osw = out.strides[out.rank - 1];
  ForEachPlane(*args[0].tensor, out, g, [&](const float* xp, float* op) {
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const int64_t ix = ox * g.sw - g.pw + kx * g.dw;
            if (ix < 0 || ix >= g.w) continue;
            const float v = xp[iy * g.xh + ix * g.xw];
            if (v > best || std::isnan(v)) best = v;  // NaN wins, as ATen's
            if (std::isnan(best)) break;
          }
          if (std::isnan(best)) break;
        }
        op[oy * osh + ox * osw] = best;
      }
    }
  });
  return absl::OkStatus();
}

absl::Status AvgPoolArgs(absl::string_view op, absl::Span<const OpArg> args, bool* ceil,
                         bool* include_pad, int64_t* divisor) {
  FERRY_ASSIGN_OR_RETURN(const int64_t c, IntArg(op, args, 4));
  FERRY_ASSIGN_OR_RETURN(const int64_t p, IntArg(op, args, 5));
  *ceil = c != 0;
  *include_pad = p != 0;
  *divisor = 0;
  if (args[6].scalar == nullptr || args[6].scalar->kind != Scalar::Kind::kNone) {
    FERRY_ASSIGN_OR_RETURN(*divisor, IntArg(op, args, 6));
    if (*divisor == 0) return OpError(op, "argument 6 (divisor_override) is 0");
  }
  return absl::OkStatus();
}

absl::Status AvgPoolInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "avg_pool2d";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 7, 7, results, 1));
  bool ceil = false, include_pad = false;
  int64_t divisor = 0;
  FERRY_RETURN_IF_ERROR(AvgPoolArgs(op, args, &ceil, &include_pad, &divisor));
  FERRY_ASSIGN_OR_RETURN(const Window g, ReadPool(op, args, false, ceil));
  results[0].layout = ContiguousLayout(DType::kFloat32, WindowOutSizes(*args[0].tensor, 2, g.c, g));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status AvgPoolKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  constexpr absl::string_view op = "avg_pool2d";
  bool ceil = false, include_pad = false;
  int64_t divisor = 0;
  FERRY_RETURN_IF_ERROR(AvgPoolArgs(op, args, &ceil, &include_pad, &divisor));
  absl::StatusOr<Window> read = ReadPool(op, args, false, ceil);
  if (!read.ok()) return read.status();
  const Window& g = *read;
  const TensorRef& out = *results[0];
  const int64_t osh = out.strides[out.rank - 2], osw = out.strides[out.rank - 1];
  ForEachPlane(*args[0].tensor, out, g, [&](const float* xp, float* op) {
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        // ATen's window: clipped to the padded input for the count, then to the input.
        int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
        int64_t y1 = std::min(y0 + g.kh, g.h + g.ph), x1 = std::min(x0 + g.kw, g.w + g.pw);
        const int64_t padded_count = (y1 - y0) * (x1 - x0);
        y0 = std::max<int64_t>(y0, 0);
        x0 = std::max<int64_t>(x0, 0);
        y1 = std::min(y1, g.h);
        x1 = std::min(x1, g.w);
        float& o = op[oy * osh + ox * osw];
        if (y0 >= y1 || x0 >= x1) {
          o = 0.0f;
          continue;
        }
        float sum = 0.0f;
        for (int64_t iy = y0; iy < y1; ++iy) {
          for (int64_t ix = x0; ix < x1; ++ix) sum += xp[iy * g.xh + ix * g.xw];
        }
        const int64_t count = divisor != 0  ? divisor
                              : include_pad ? padded_count
                                            : (y1 - y0) * (x1 - x0);
        o = sum / static_cast<float>(count);
      }
    }
  });
  return absl::OkStatus();
}

absl::StatusOr<Window> ReadAdaptive(absl::Span<const OpArg> args) {
  constexpr absl::string_view op = "adaptive_avg_pool2d";
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(op, args, 0));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *x, DType::kFloat32));
  Window g;
  FERRY_RETURN_IF_ERROR(ReadInput(op, *x, 2, /*batch_optional=*/true, &g));
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* size, IntListArg(op, args, 1));
  if (size->size() != 2 || (*size)[0] < 0 || (*size)[1] < 0 || (*size)[0] > kMaxWindow ||
      (*size)[1] > kMaxWindow) {
    return OpError(op, "argument 1 (output_size) is ", ShapeString(*size),
                   ", expected two sizes from 0 to ", kMaxWindow);
  }
  g.oh = (*size)[0];
  g.ow = (*size)[1];
  if ((g.h == 0 || g.w == 0) && g.n * g.c != 0) {
    return OpError(op, "argument 0 has shape ", ShapeString(*x),
                   ", whose spatial dimensions must not be empty");
  }
  return g;
}

absl::Status AdaptiveAvgPoolInfer(absl::Span<const OpArg> args,
                                  absl::Span<InferredResult> results) {
  FERRY_RETURN_IF_ERROR(CheckArity("adaptive_avg_pool2d", args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const Window g, ReadAdaptive(args));
  results[0].layout = ContiguousLayout(DType::kFloat32, WindowOutSizes(*args[0].tensor, 2, g.c, g));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status AdaptiveAvgPoolKernel(absl::Span<const OpArg> args,
                                   absl::Span<TensorRef* const> results) {
  absl::StatusOr<Window> read = ReadAdaptive(args);
  if (!read.ok()) return read.status();
  const Window& g = *read;
  const TensorRef& out = *results[0];
  const int64_t osh = out.strides[out.rank - 2], osw = out.strides[out.rank - 1];
  ForEachPlane(*args[0].tensor, out, g, [&](const float* xp, float* op) {
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      // ATen's bins: [floor(o * in / out), ceil((o + 1) * in / out)).
      const int64_t y0 = oy * g.h / g.oh;
      const int64_t y1 = ((oy + 1) * g.h + g.oh - 1) / g.oh;
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t x0 = ox * g.w / g.ow;
        const int64_t x1 = ((ox + 1) * g.w + g.ow - 1) / g.ow;
        float sum = 0.0f;
        for (int64_t iy = y0; iy < y1; ++iy) {
          for (int64_t ix = x0; ix < x1; ++ix) sum += xp[iy * g.xh + ix * g.xw];
        }
        op[oy * osh + ox * osw] = sum / static_cast<float>((y1 - y0) * (x1 - x0));
      }
    }
  });
  return absl::OkStatus();
}

// ---- upsample_bilinear2d --------------------------------------------------------------------
//   upsample_bilinear2d(t x, intlist output_size, bool align_corners, number scale_h,
//                       number scale_w)
//   ATen's: x [N, C, H, W] or [C, H, W]; output coordinate d maps to the input at
//   align_corners: d * (in - 1) / (out - 1); else max(0, (d + 0.5) * ratio - 0.5) with ratio
//   1 / scale when scale > 0, in / out otherwise; its two neighbours are weighted linearly.

struct Upsample {
  Window g;  // oh, ow: the output's spatial sizes
  bool align_corners = false;
  double ratio_h = 0, ratio_w = 0;
};

double UpsampleRatio(int64_t in, int64_t out, bool align_corners, double scale) {
  if (align_corners) {
    return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  }
  return scale > 0 ? 1.0 / scale : static_cast<double>(in) / static_cast<double>(out);
}

absl::StatusOr<Upsample> ReadUpsample(absl::Span<const OpArg> args) {
  constexpr absl::string_view op = "upsample_bilinear2d";
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(op, args, 0));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *x, DType::kFloat32));
  Upsample u;
  FERRY_RETURN_IF_ERROR(ReadInput(op, *x, 2, /*batch_optional=*/true, &u.g));
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* size, IntListArg(op, args, 1));
  if (size->size() != 2 || (*size)[0] < 1 || (*size)[1] < 1 || (*size)[0] > kMaxWindow ||
      (*size)[1] > kMaxWindow) {
    return OpError(op, "argument 1 (output_size) is ", ShapeString(*size),
                   ", expected two sizes from 1 to ", kMaxWindow);
  }
  if (u.g.h < 1 || u.g.w < 1) {
    return OpError(op, "argument 0 has shape ", ShapeString(*x),
                   ", whose spatial dimensions must not be empty");
  }
  FERRY_ASSIGN_OR_RETURN(const int64_t align_corners, IntArg(op, args, 2));
  FERRY_ASSIGN_OR_RETURN(const Scalar* sh, NumberArg(op, args, 3));
  FERRY_ASSIGN_OR_RETURN(const Scalar* sw, NumberArg(op, args, 4));
  u.align_corners = align_corners != 0;
  u.g.oh = (*size)[0];
  u.g.ow = (*size)[1];
  u.ratio_h = UpsampleRatio(u.g.h, u.g.oh, u.align_corners, sh->AsDouble());
  u.ratio_w = UpsampleRatio(u.g.w, u.g.ow, u.align_corners, sw->AsDouble());
  return u;
}

absl::Status UpsampleInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  FERRY_RETURN_IF_ERROR(CheckArity("upsample_bilinear2d", args, 5, 5, results, 1));
  FERRY_ASSIGN_OR_RETURN(const Upsample u, ReadUpsample(args));
  results[0].layout =
      ContiguousLayout(DType::kFloat32, WindowOutSizes(*args[0].tensor, 2, u.g.c, u.g));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// An output coordinate's two input neighbours and the weight of the second.
struct Tap {
  int64_t lo, hi;
  float frac;
};
Tap SourceTap(int64_t d, int64_t in, double ratio, bool align_corners) {
  double src =
      align_corners ? static_cast<double>(d) * ratio : (static_cast<double>(d) + 0.5) * ratio - 0.5;
  if (src < 0) src = 0;
  const int64_t lo = std::min(static_cast<int64_t>(src), in - 1);
  return {lo, lo < in - 1 ? lo + 1 : lo, static_cast<float>(src - static_cast<double>(lo))};
}

absl::Status UpsampleKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  absl::StatusOr<Upsample> read = ReadUpsample(args);
  if (!read.ok()) return read.status();
  const Upsample& u = *read;
  const Window& g = u.g;
  const TensorRef& out = *results[0];
  const int64_t osh = out.strides[out.rank - 2], osw = out.strides[out.rank - 1];
  ForEachPlane(*args[0].tensor, out, g, [&](const float* xp, float* op) {
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      const Tap ty = SourceTap(oy, g.h, u.ratio_h, u.align_corners);
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const Tap tx = SourceTap(ox, g.w, u.ratio_w, u.align_corners);
        const float top = xp[ty.lo * g.xh + tx.lo * g.xw] * (1 - tx.frac) +
                          xp[ty.lo * g.xh + tx.hi * g.xw] * tx.frac;
        const float bottom = xp[ty.hi * g.xh + tx.lo * g.xw] * (1 - tx.frac) +
                             xp[ty.hi * g.xh + tx.hi * g.xw] * tx.frac;
        op[oy * osh + ox * osw] = top * (1 - ty.frac) + bottom * ty.frac;
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterNnOps(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema("conv", 6, 7, 2, &ConvInfer, &ConvKernel)));
  FERRY_RETURN_IF_ERROR(registry.Register(
      MakeSchema("conv_transpose", 7, 8, 1, &ConvTransposeInfer, &ConvTransposeKernel)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("batch_norm", 6, 6, 1, &BatchNormInfer, &BatchNormKernel)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("layer_norm", 5, 5, 1, &LayerNormInfer, &LayerNormKernel)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("max_pool2d", 6, 6, 1, &MaxPoolInfer, &MaxPoolKernel)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("avg_pool2d", 7, 7, 1, &AvgPoolInfer, &AvgPoolKernel)));
  FERRY_RETURN_IF_ERROR(registry.Register(
      MakeSchema("adaptive_avg_pool2d", 2, 2, 1, &AdaptiveAvgPoolInfer, &AdaptiveAvgPoolKernel)));
  return registry.Register(
      MakeSchema("upsample_bilinear2d", 5, 5, 1, &UpsampleInfer, &UpsampleKernel));
}

}  // namespace internal
}  // namespace ferry
