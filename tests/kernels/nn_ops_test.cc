// The network layers (kernels/nn_ops.cc) against naive double-precision loops written here from
// ATen's definitions: conv (1-D, 2-D, groups, depthwise, pointwise, strided inputs, with and
// without the host BLAS), batch_norm, layer_norm, the three poolings; shapes checked by hand;
// refusals naming the argument.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/kernels/internal/host_blas.h"
#include "ferry/kernels/op_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/op_test_util.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ForEachIndex;
using ::ferry::testing::Get;
using ::ferry::testing::Index;
using ::ferry::testing::InferOnly;
using ::ferry::testing::OpRun;
using ::ferry::testing::RunOp;
using ::ferry::testing::S;
using ::ferry::testing::SizesOf;
using ::ferry::testing::StatusIs;
using ::ferry::testing::T;
using ::ferry::testing::TestTensor;
using ::testing::HasSubstr;

const OpSchema& Op(const char* name) {
  static const OpRegistry* registry = new OpRegistry(OpRegistry::WithBuiltIns());
  const OpSchema* s = registry->Find(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

// Every element of `out` within 1e-4 (relative to the magnitude) of `ref(index)`.
template <typename F>
void ExpectAll(const TensorRef& out, F ref) {
  int checked = 0;
  ForEachIndex(SizesOf(out), [&](const Index& i) {
    const double want = ref(i);
    const double got = Get(out, i);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << absl::StrJoin(i, ",");
    } else {
      EXPECT_NEAR(got, want, 1e-4 * std::max(1.0, std::fabs(want))) << absl::StrJoin(i, ",");
    }
    ++checked;
  });
  EXPECT_EQ(checked, out.numel());
}

// ---- conv -----------------------------------------------------------------------------------

struct ConvCase {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};

// ATen's convolution, from its definition: out[n, o, oy, ox] = bias[o] + sum over the group's
// input channels c and taps (ky, kx) of x[n, c, oy*s - p + ky*d, ox*s - p + kx*d] * w[o, c, ky,
// kx], with taps in the padding reading 0. A rank-3 tensor is read as [N, C, 1, L].
double ConvRef(const TensorRef& x, const TensorRef& w, const TensorRef* bias, const ConvCase& c,
               const Index& o) {
  const bool one_d = x.rank == 3;
  const auto spatial = [&](const std::vector<int64_t>& v, int d, int64_t one_d_value) {
    if (one_d) return d == 0 ? one_d_value : v.back();
    return v.size() == 1 ? v[0] : v[d];
  };
  const int64_t sh = spatial(c.stride, 0, 1), sw = spatial(c.stride, 1, 1);
  const int64_t ph = spatial(c.padding, 0, 0), pw = spatial(c.padding, 1, 0);
  const int64_t dh = spatial(c.dilation, 0, 1), dw = spatial(c.dilation, 1, 1);
  const int64_t n = o[0], oc = o[1], oy = one_d ? 0 : o[2], ox = o.back();
  const int64_t cg = w.sizes[1];
  const int64_t og = w.sizes[0] / c.groups;
  const int64_t kh = one_d ? 1 : w.sizes[2], kw = w.sizes[w.rank - 1];
  const int64_t h = one_d ? 1 : x.sizes[2], wd = x.sizes[x.rank - 1];
  double acc = bias != nullptr ? Get(*bias, {oc}) : 0.0;
  for (int64_t ci = 0; ci < cg; ++ci) {
    const int64_t ic = (oc / og) * cg + ci;
    for (int64_t ky = 0; ky < kh; ++ky) {
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int64_t iy = oy * sh - ph + ky * dh, ix = ox * sw - pw + kx * dw;
        if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
        const double xv = one_d ? Get(x, {n, ic, ix}) : Get(x, {n, ic, iy, ix});
        const double wv = one_d ? Get(w, {oc, ci, kx}) : Get(w, {oc, ci, ky, kx});
        acc += xv * wv;
      }
    }
  }
  return acc;
}

// Runs conv with and without the host BLAS; both must match the reference, and the output must
// have `want_sizes` (checked by hand in each test).
void ExpectConv(TensorRef x, TensorRef w, TestTensor* bias, const ConvCase& c,
                const std::vector<int64_t>& want_sizes, int64_t want_columns) {
  const Scalar stride = Scalar::IntList(c.stride);
  const Scalar padding = Scalar::IntList(c.padding);
  const Scalar dilation = Scalar::IntList(c.dilation);
  const Scalar groups = Scalar::Int(c.groups);
  std::vector<OpArg> args = {T(x), T(w), S(stride), S(padding), S(dilation), S(groups)};
  if (bias != nullptr) args.push_back(T(*bias));
  for (bool blas : {true, false}) {
    SCOPED_TRACE(blas ? "host BLAS" : "own loops");
    internal::UseHostBlas(blas);
    OpRun run = RunOp(Op("conv"), args);
    internal::UseHostBlas(true);
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    ASSERT_EQ(SizesOf(run.results[0]), want_sizes);
    ASSERT_EQ(SizesOf(run.results[1]), std::vector<int64_t>{want_columns});
    ExpectAll(run.results[0], [&](const Index& o) {
      return ConvRef(x, w, bias != nullptr ? bias->ptr() : nullptr, c, o);
    });
  }
}

TEST(ConvTest, TwoDWithStridePaddingDilationGroupsAndBias) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 4, 7, 6}, 1);
  TestTensor w = TestTensor::Filled(DType::kFloat32, {6, 2, 3, 2}, 2);
  TestTensor b = TestTensor::Filled(DType::kFloat32, {6}, 3);
  // out h: (7 + 2*1 - 1*(3-1) - 1) / 2 + 1 = 4; out w: (6 + 0 - 2*(2-1) - 1) / 1 + 1 = 4.
  // Columns per image and group: 2 channels x 3 x 2 taps x 16 positions = 192.
  ExpectConv(x.ref(), w.ref(), &b, {{2, 1}, {1, 0}, {1, 2}, 2}, {2, 6, 4, 4}, 192);
}

TEST(ConvTest, LargeEnoughForTheBlasAndOneListEntryForBothDims) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {1, 16, 12, 12}, 4);
  TestTensor w = TestTensor::Filled(DType::kFloat32, {32, 16, 3, 3}, 5);
  // (12 + 2 - 2 - 1) / 1 + 1 = 12 both ways; columns 16 * 9 * 144.
  ExpectConv(x.ref(), w.ref(), nullptr, {{1}, {1}, {1}, 1}, {1, 32, 12, 12}, 16 * 9 * 144);
}

TEST(ConvTest, OneD) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 10}, 6);
  TestTensor w = TestTensor::Filled(DType::kFloat32, {4, 3, 3}, 7);
  TestTensor b = TestTensor::Filled(DType::kFloat32, {4}, 8);
  // (10 + 2 - 2 - 1) / 2 + 1 = 5; columns 3 * 3 * 5.
  ExpectConv(x.ref(), w.ref(), &b, {{2}, {1}, {1}, 1}, {2, 4, 5}, 45);
}

TEST(ConvTest, DepthwiseWithAChannelMultiplierNeedsNoColumns) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {1, 4, 5, 6}, 9);
  TestTensor w = TestTensor::Filled(DType::kFloat32, {8, 1, 3, 3}, 10);
  TestTensor b = TestTensor::Filled(DType::kFloat32, {8}, 11);
  ExpectConv(x.ref(), w.ref(), &b, {{1, 1}, {1, 1}, {1, 1}, 4}, {1, 8, 5, 6}, 0);
  // Strided and dilated, so that few output columns are interior.
  ExpectConv(x.ref(), w.ref(), &b, {{2, 2}, {1, 1}, {2, 1}, 4}, {1, 8, 2, 3}, 0);
}

TEST(ConvTest, PointwiseReadsTheInputAsColumnsAndStridedInputsStillWork) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 8, 4, 5}, 12);
  TestTensor w = TestTensor::Filled(DType::kFloat32, {5, 8, 1, 1}, 13);
  ExpectConv(x.ref(), w.ref(), nullptr, {{1, 1}, {0, 0}, {1, 1}, 1}, {2, 5, 4, 5}, 0);
  // The same values channels-last: [N, H, W, C] storage read as [N, C, H, W].
  TestTensor nhwc = TestTensor::Strided(DType::kFloat32, {2, 8, 4, 5}, {160, 1, 40, 8}, 12);
  ExpectConv(nhwc.ref(), w.ref(), nullptr, {{1, 1}, {0, 0}, {1, 1}, 1}, {2, 5, 4, 5}, 0);
  // A 3x3 conv over a transposed input and weight.
  TestTensor xt = TestTensor::Strided(DType::kFloat32, {1, 3, 5, 4}, {60, 20, 1, 5}, 14);
  TestTensor wt = TestTensor::Strided(DType::kFloat32, {4, 3, 3, 3}, {1, 4, 36, 12}, 15);
  ExpectConv(xt.ref(), wt.ref(), nullptr, {{1, 1}, {1, 1}, {1, 1}, 1}, {1, 4, 5, 4}, 3 * 9 * 20);
}

TEST(ConvTest, AnEmptyBatchAndNoInputChannels) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {0, 2, 4, 4});
  TestTensor w = TestTensor::Filled(DType::kFloat32, {3, 2, 3, 3});
  ExpectConv(x.ref(), w.ref(), nullptr, {{1}, {0}, {1}, 1}, {0, 3, 2, 2}, 2 * 9 * 4);
  // No input channels: the output is the bias.
  TestTensor x0 = TestTensor::Filled(DType::kFloat32, {1, 0, 3, 3});
  TestTensor w0 = TestTensor::Filled(DType::kFloat32, {2, 0, 1, 1});
  TestTensor b = TestTensor::Float({2}, {1.5f, -2.0f});
  ExpectConv(x0.ref(), w0.ref(), &b, {{1}, {0}, {1}, 1}, {1, 2, 3, 3}, 0);
}

TEST(ConvTest, BadArgumentsAreRefusedNamingThem) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {1, 4, 5, 5});
  TestTensor w = TestTensor::Filled(DType::kFloat32, {6, 2, 3, 3});
  const Scalar one = Scalar::IntList({1}), zero = Scalar::IntList({0});
  const auto infer = [&](TensorRef& wr, const Scalar& stride, const Scalar& padding, int64_t groups,
                         TensorRef* bias = nullptr) {
    const Scalar g = Scalar::Int(groups);
    std::vector<OpArg> args = {T(x), T(wr), S(stride), S(padding), S(one), S(g)};
    if (bias != nullptr) args.push_back(T(*bias));
    return InferOnly(Op("conv"), args);
  };
  EXPECT_OK(infer(w.ref(), one, zero, 2));
  EXPECT_THAT(infer(w.ref(), one, zero, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 5 (groups) is 3, which does not divide the 4")));
  EXPECT_THAT(infer(w.ref(), one, zero, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("argument 1 (weight)")));
  EXPECT_THAT(infer(w.ref(), zero, zero, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 2 (stride) holds 0, expected 1")));
  const Scalar three = Scalar::IntList({1, 2, 3});
  EXPECT_THAT(infer(w.ref(), one, three, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 3 (padding) has 3 entries, expected 1 or 2")));
  TestTensor big = TestTensor::Filled(DType::kFloat32, {6, 2, 7, 3});
  EXPECT_THAT(infer(big.ref(), one, zero, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("smaller than the window")));
  TestTensor bias = TestTensor::Filled(DType::kFloat32, {5});
  EXPECT_THAT(infer(w.ref(), one, zero, 2, bias.ptr()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 6 (bias) has shape [5], expected [6]")));
  TestTensor xi = TestTensor::Filled(DType::kInt64, {1, 4, 5, 5});
  const Scalar g = Scalar::Int(2);
  EXPECT_THAT(InferOnly(Op("conv"), {T(xi), T(w), S(one), S(zero), S(one), S(g)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dtype int64")));
}

// ---- batch_norm, layer_norm -----------------------------------------------------------------

// ---- conv_transpose -------------------------------------------------------------------------

// ATen's transposed convolution from its definition, by gathering: out[n, o, oy, ox] = bias[o] +
// sum over the group's input channels c and taps (ky, kx) with oy = iy*s - p + ky*d (and so for
// x) of x[n, c, iy, ix] * w[c, o % og, ky, kx]. A rank-3 tensor is read as [N, C, 1, L].
double ConvTransposeRef(const TensorRef& x, const TensorRef& w, const TensorRef* bias,
                        const std::array<int64_t, 2>& s, const std::array<int64_t, 2>& p,
                        const std::array<int64_t, 2>& d, int64_t groups, const Index& o) {
  const bool one_d = x.rank == 3;
  const int64_t n = o[0], oc = o[1], oy = one_d ? 0 : o[2], ox = o.back();
  const int64_t og = w.sizes[1], cg = x.sizes[1] / groups;
  const int64_t kh = one_d ? 1 : w.sizes[2], kw = w.sizes[w.rank - 1];
  const int64_t h = one_d ? 1 : x.sizes[2], wd = x.sizes[x.rank - 1];
  double acc = bias != nullptr ? Get(*bias, {oc}) : 0.0;
  for (int64_t ci = 0; ci < cg; ++ci) {
    const int64_t ic = (oc / og) * cg + ci;
    for (int64_t iy = 0; iy < h; ++iy) {
      for (int64_t ix = 0; ix < wd; ++ix) {
        for (int64_t ky = 0; ky < kh; ++ky) {
          for (int64_t kx = 0; kx < kw; ++kx) {
            if (iy * s[0] - p[0] + ky * d[0] != oy || ix * s[1] - p[1] + kx * d[1] != ox) continue;
            const double xv = one_d ? Get(x, {n, ic, ix}) : Get(x, {n, ic, iy, ix});
            const double wv = one_d ? Get(w, {ic, oc % og, kx}) : Get(w, {ic, oc % og, ky, kx});
            acc += xv * wv;
          }
        }
      }
    }
  }
  return acc;
}

TEST(ConvTransposeTest, TwoDAndOneDWithStridePaddingOutputPaddingDilationAndGroups) {
  // 2-D: x [2, 4, 3, 2] (strided), w [4, 3, 2, 3], two groups -> 6 channels; stride (2, 3),
  // padding (1, 0), output_padding (1, 2), dilation (1, 2):
  // h: (3-1)*2 - 2 + 1*(2-1) + 1 + 1 = 5; w: (2-1)*3 - 0 + 2*(3-1) + 2 + 1 = 10.
  TestTensor base = TestTensor::Filled(DType::kFloat32, {2, 4, 2, 3}, 1);
  TensorRef x = base.View({2, 4, 3, 2}, {24, 6, 1, 3});
  TestTensor w = TestTensor::Filled(DType::kFloat32, {4, 3, 2, 3}, 2);
  TestTensor b = TestTensor::Filled(DType::kFloat32, {6}, 3);
  const Scalar stride = Scalar::IntList({2, 3}), padding = Scalar::IntList({1, 0});
  const Scalar out_pad = Scalar::IntList({1, 2}), dilation = Scalar::IntList({1, 2});
  const Scalar groups = Scalar::Int(2);
  OpRun run = RunOp(Op("conv_transpose"),
                    {T(x), T(w), S(stride), S(padding), S(out_pad), S(dilation), S(groups), T(b)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  ASSERT_EQ(SizesOf(run.results[0]), (std::vector<int64_t>{2, 6, 5, 10}));
  ExpectAll(run.results[0], [&](const Index& o) {
    return ConvTransposeRef(x, w.ref(), b.ptr(), {2, 3}, {1, 0}, {1, 2}, 2, o);
  });

  // 1-D without bias: x [1, 2, 4], w [2, 2, 3], stride 2, no padding: (4-1)*2 + 2 + 1 = 9.
  TestTensor x1 = TestTensor::Filled(DType::kFloat32, {1, 2, 4}, 4);
  TestTensor w1 = TestTensor::Filled(DType::kFloat32, {2, 2, 3}, 5);
  const Scalar two = Scalar::IntList({2}), zero = Scalar::IntList({0}), one = Scalar::IntList({1});
  const Scalar g1 = Scalar::Int(1);
  OpRun one_d =
      RunOp(Op("conv_transpose"), {T(x1), T(w1), S(two), S(zero), S(zero), S(one), S(g1)});
  ASSERT_OK(one_d.kernel_status);
  ASSERT_EQ(SizesOf(one_d.results[0]), (std::vector<int64_t>{1, 2, 9}));
  ExpectAll(one_d.results[0], [&](const Index& o) {
    return ConvTransposeRef(x1.ref(), w1.ref(), nullptr, {1, 2}, {0, 0}, {1, 1}, 1, o);
  });

  // output_padding must be below the stride or the dilation; the weight's in channels match x.
  EXPECT_THAT(
      InferOnly(Op("conv_transpose"), {T(x1), T(w1), S(two), S(zero), S(two), S(one), S(g1)}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("output_padding")));
  TestTensor wrong = TestTensor::Filled(DType::kFloat32, {3, 2, 3});
  EXPECT_THAT(
      InferOnly(Op("conv_transpose"), {T(x1), T(wrong), S(two), S(zero), S(zero), S(one), S(g1)}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("argument 1 (weight)")));
}

// ---- upsample_bilinear2d --------------------------------------------------------------------

// PyTorch's bilinear interpolation, from its definition, per output coordinate.
double BilinearRef(const TensorRef& x, int64_t n, int64_t c, int64_t oy, int64_t ox, int64_t oh,
                   int64_t ow, bool align, double scale_h, double scale_w) {
  const int64_t h = x.sizes[2], w = x.sizes[3];
  auto source = [&](int64_t d, int64_t in, int64_t out, double scale) {
    if (align) return out > 1 ? d * static_cast<double>(in - 1) / (out - 1) : 0.0;
    const double ratio = scale > 0 ? 1 / scale : static_cast<double>(in) / out;
    return std::max(0.0, (d + 0.5) * ratio - 0.5);
  };
  const double sy = source(oy, h, oh, scale_h), sx = source(ox, w, ow, scale_w);
  const int64_t y0 = std::min<int64_t>(static_cast<int64_t>(std::floor(sy)), h - 1);
  const int64_t x0 = std::min<int64_t>(static_cast<int64_t>(std::floor(sx)), w - 1);
  const int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
  const double fy = sy - y0, fx = sx - x0;
  return (1 - fy) * ((1 - fx) * Get(x, {n, c, y0, x0}) + fx * Get(x, {n, c, y0, x1})) +
         fy * ((1 - fx) * Get(x, {n, c, y1, x0}) + fx * Get(x, {n, c, y1, x1}));
}

TEST(UpsampleBilinearTest, HalfPixelAlignCornersScalesAndDownsampling) {
  TestTensor base = TestTensor::Filled(DType::kFloat32, {2, 3, 4, 5}, 1);
  TensorRef x = base.View({2, 3, 5, 4}, {60, 20, 1, 5});  // strided
  struct Case {
    std::vector<int64_t> size;
    bool align;
    double sh, sw;
  };
  for (const Case& c : std::vector<Case>{{{10, 8}, false, 0, 0},
                                         {{10, 8}, true, 0, 0},
                                         {{7, 9}, false, 1.5, 2.25},
                                         {{3, 2}, false, 0, 0},
                                         {{1, 1}, true, 0, 0}}) {
    const Scalar size = Scalar::IntList(c.size), align = Scalar::Bool(c.align);
    const Scalar sh = Scalar::Double(c.sh), sw = Scalar::Double(c.sw);
    OpRun run = RunOp(Op("upsample_bilinear2d"), {T(x), S(size), S(align), S(sh), S(sw)});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    ASSERT_EQ(SizesOf(run.results[0]), (std::vector<int64_t>{2, 3, c.size[0], c.size[1]}));
    ExpectAll(run.results[0], [&](const Index& o) {
      return BilinearRef(x, o[0], o[1], o[2], o[3], c.size[0], c.size[1], c.align, c.sh, c.sw);
    });
  }
  const Scalar empty = Scalar::IntList({0, 2}), no = Scalar::Bool(false), zero = Scalar::Double(0);
  EXPECT_THAT(InferOnly(Op("upsample_bilinear2d"), {T(x), S(empty), S(no), S(zero), S(zero)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("output_size")));
}

TEST(BatchNormTest, PerChannelWithAndWithoutWeightAndBiasOnAStridedInput) {
  // [2, 3, 4] values stored as [2, 4, 3].
  TestTensor x = TestTensor::Strided(DType::kFloat32, {2, 3, 4}, {12, 1, 3}, 1);
  TestTensor w = TestTensor::Float({3}, {0.5f, -1.0f, 2.0f});
  TestTensor b = TestTensor::Float({3}, {0.25f, 0.0f, -3.0f});
  TestTensor mean = TestTensor::Float({3}, {0.1f, -0.2f, 0.3f});
  TestTensor var = TestTensor::Float({3}, {1.0f, 0.25f, 4.0f});
  const Scalar eps = Scalar::Double(1e-5);
  const Scalar none = Scalar::None();
  for (bool affine : {true, false}) {
    SCOPED_TRACE(affine ? "weight and bias" : "None, None");
    OpRun run = RunOp(Op("batch_norm"), {T(x), affine ? T(w) : S(none), affine ? T(b) : S(none),
                                         T(mean), T(var), S(eps)});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    ExpectAll(run.results[0], [&](const Index& i) {
      const int64_t c = i[1];
      const double norm =
          (Get(x.ref(), i) - Get(mean.ref(), {c})) / std::sqrt(Get(var.ref(), {c}) + 1e-5);
      return affine ? norm * Get(w.ref(), {c}) + Get(b.ref(), {c}) : norm;
    });
  }
  TestTensor short_var = TestTensor::Float({2}, {1.0f, 1.0f});
  EXPECT_THAT(InferOnly(Op("batch_norm"), {T(x), S(none), S(none), T(mean), T(short_var), S(eps)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 4 (running_var) has shape [2], expected [3]")));
}

// layer_norm of x over its last `k` dims (weight and bias of that shape, when given) at index i,
// from the definition: the row's mean and biased variance, in double.
double LayerNormRef(const TensorRef& x, int k, const TensorRef* w, const TensorRef* b,
                    const Index& i) {
  const int lead = x.rank - k;
  double sum = 0, sq = 0, count = 0;
  const auto in_row = [&](const Index& j) {
    for (int d = 0; d < lead; ++d) {
      if (j[d] != i[d]) return false;
    }
    return true;
  };
  ForEachIndex(SizesOf(x), [&](const Index& j) {
    if (!in_row(j)) return;
    sum += Get(x, j);
    count += 1;
  });
  const double mean = sum / count;
  ForEachIndex(SizesOf(x), [&](const Index& j) {
    if (in_row(j)) sq += (Get(x, j) - mean) * (Get(x, j) - mean);
  });
  const Index tail(i.begin() + lead, i.end());
  const double norm = (Get(x, i) - mean) / std::sqrt(sq / count + 1e-5);
  return norm * (w != nullptr ? Get(*w, tail) : 1.0) + (b != nullptr ? Get(*b, tail) : 0.0);
}

TEST(LayerNormTest, OverTheLastDimsWithAndWithoutWeightAndBias) {
  const Scalar eps = Scalar::Double(1e-5);
  const Scalar none = Scalar::None();
  // Dense rows (the SIMD path), and the same shape stored transposed (the strided path).
  for (bool strided : {false, true}) {
    TestTensor x = strided ? TestTensor::Strided(DType::kFloat32, {2, 3, 4}, {12, 1, 3}, 2)
                           : TestTensor::Filled(DType::kFloat32, {2, 3, 4}, 2);
    struct Case {
      int k;
      bool weight, bias;
    };
    for (const Case& c : {Case{2, true, true}, Case{2, true, false}, Case{1, false, true},
                          Case{1, false, false}, Case{3, true, true}}) {
      SCOPED_TRACE(absl::StrCat(strided ? "strided, " : "dense, ", c.k, " dims, weight ", c.weight,
                                ", bias ", c.bias));
      const std::vector<int64_t> shape(x.ref().sizes.begin() + 3 - c.k, x.ref().sizes.begin() + 3);
      TestTensor w = TestTensor::Filled(DType::kFloat32, shape, 3);
      TestTensor b = TestTensor::Filled(DType::kFloat32, shape, 4);
      const Scalar normalized = Scalar::IntList(shape);
      OpRun run = RunOp(Op("layer_norm"), {T(x), S(normalized), c.weight ? T(w) : S(none),
                                           c.bias ? T(b) : S(none), S(eps)});
      ASSERT_OK(run.infer_status);
      ASSERT_OK(run.kernel_status);
      ExpectAll(run.results[0], [&](const Index& i) {
        return LayerNormRef(x.ref(), c.k, c.weight ? w.ptr() : nullptr, c.bias ? b.ptr() : nullptr,
                            i);
      });
    }
  }
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 4}, 2);
  TestTensor w = TestTensor::Filled(DType::kFloat32, {3, 4}, 3);
  const Scalar not_suffix = Scalar::IntList({3});
  EXPECT_THAT(InferOnly(Op("layer_norm"), {T(x), S(not_suffix), S(none), S(none), S(eps)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 1 (normalized_shape) is [3], which is not a non-empty "
                                 "suffix of argument 0's shape [2, 3, 4]")));
  const Scalar last = Scalar::IntList({4});
  EXPECT_THAT(InferOnly(Op("layer_norm"), {T(x), S(last), T(w), S(none), S(eps)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("argument 2 (weight)")));
}

// ---- pooling --------------------------------------------------------------------------------

// ATen's pooling output size (pooling_output_shape), written from its definition.
int64_t PoolOut(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
  const double v = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t out = static_cast<int64_t>(ceil ? std::ceil(v) : std::floor(v)) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

TEST(MaxPoolTest, FloorAndCeilModesPaddingDilationAndNaN) {
  // Hand-checked sizes: 6 wide, kernel 3, stride 2: floor (6-3)/2+1 = 2, ceil 3.
  TestTensor x6 = TestTensor::Filled(DType::kFloat32, {1, 2, 6, 6}, 5);
  for (bool ceil : {false, true}) {
    const Scalar k = Scalar::IntList({3}), s = Scalar::IntList({2}), p = Scalar::IntList({0}),
                 d = Scalar::IntList({1}), c = Scalar::Bool(ceil);
    OpRun run = RunOp(Op("max_pool2d"), {T(x6), S(k), S(s), S(p), S(d), S(c)});
    ASSERT_OK(run.kernel_status);
    EXPECT_EQ(SizesOf(run.results[0]), (std::vector<int64_t>{1, 2, ceil ? 3 : 2, ceil ? 3 : 2}));
  }
  // 5 wide, kernel 3, stride 3, padding 1: ceil would give 3 windows, but the third would start
  // at 6 - 1 = 5, inside the right padding only, so ATen drops it: 2 both ways.
  TestTensor x5 = TestTensor::Filled(DType::kFloat32, {1, 1, 5, 5}, 5);
  {
    const Scalar k = Scalar::IntList({3}), s = Scalar::IntList({3}), p = Scalar::IntList({1}),
                 d = Scalar::IntList({1}), c = Scalar::Bool(true);
    OpRun run = RunOp(Op("max_pool2d"), {T(x5), S(k), S(s), S(p), S(d), S(c)});
    ASSERT_OK(run.kernel_status);
    EXPECT_EQ(SizesOf(run.results[0]), (std::vector<int64_t>{1, 1, 2, 2}));
  }
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 7, 6}, 6);
  static_cast<float*>(x.ref().data)[5] = std::numeric_limits<float>::quiet_NaN();  // [0, 0, 0, 5]
  for (bool ceil : {false, true}) {
    for (int64_t dil : {1, 2}) {
      SCOPED_TRACE(absl::StrCat("ceil ", ceil, " dilation ", dil));
      const Scalar k = Scalar::IntList({3, 2}), s = Scalar::IntList({2, 2}),
                   p = Scalar::IntList({1, 1}), d = Scalar::IntList({dil}), c = Scalar::Bool(ceil);
      OpRun run = RunOp(Op("max_pool2d"), {T(x), S(k), S(s), S(p), S(d), S(c)});
      ASSERT_OK(run.infer_status);
      ASSERT_OK(run.kernel_status);
      ASSERT_EQ(SizesOf(run.results[0]), (std::vector<int64_t>{2, 3, PoolOut(7, 3, 1, 2, dil, ceil),
                                                               PoolOut(6, 2, 1, 2, dil, ceil)}));
      ExpectAll(run.results[0], [&](const Index& o) {
        double best = -INFINITY;
        for (int64_t ky = 0; ky < 3; ++ky) {
          for (int64_t kx = 0; kx < 2; ++kx) {
            const int64_t iy = o[2] * 2 - 1 + ky * dil, ix = o[3] * 2 - 1 + kx * dil;
            if (iy < 0 || iy >= 7 || ix < 0 || ix >= 6) continue;
            const double v = Get(x.ref(), {o[0], o[1], iy, ix});
            if (std::isnan(v)) return v;
            best = std::max(best, v);
          }
        }
        return best;
      });
    }
  }
  const Scalar k = Scalar::IntList({2}), s = Scalar::IntList({}), p = Scalar::IntList({2}),
               d = Scalar::IntList({1}), c = Scalar::Bool(false);
  EXPECT_THAT(InferOnly(Op("max_pool2d"), {T(x), S(k), S(s), S(p), S(d), S(c)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 3 (padding) is [2, 2], more than half the kernel")));
}

TEST(AvgPoolTest, PaddingCountsDivisorOverrideAndAnUnbatchedInput) {
  // 1..16 in a 4x4 plane; kernel 3, stride 2, padding 1. The top-left window holds 1, 2, 5, 6
  // (sum 14) and five padded taps: 14/9 counting the padding, 14/4 not, 14/2 with divisor 2.
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i + 1);
  TestTensor x = TestTensor::Float({1, 4, 4}, v);  // [C, H, W]
  const Scalar k = Scalar::IntList({3}), s = Scalar::IntList({2}), p = Scalar::IntList({1}),
               no = Scalar::Bool(false), yes = Scalar::Bool(true), none = Scalar::None(),
               two = Scalar::Int(2);
  struct Case {
    const Scalar* include_pad;
    const Scalar* divisor;
    double top_left;
  };
  for (const Case& c :
       {Case{&yes, &none, 14.0 / 9}, Case{&no, &none, 14.0 / 4}, Case{&yes, &two, 7.0}}) {
    OpRun run =
        RunOp(Op("avg_pool2d"), {T(x), S(k), S(s), S(p), S(no), S(*c.include_pad), S(*c.divisor)});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    ASSERT_EQ(SizesOf(run.results[0]), (std::vector<int64_t>{1, 2, 2}));
    EXPECT_NEAR(Get(run.results[0], {0, 0, 0}), c.top_left, 1e-6);
    // Bottom-right window: rows 1..3, columns 1..3 (all inside): 6+7+8+10+11+12+14+15+16 = 99.
    const double br = c.divisor == &two ? 99.0 / 2 : 99.0 / 9;
    EXPECT_NEAR(Get(run.results[0], {0, 1, 1}), br, 1e-5);
  }
  // Against ATen's definition, on a batched input with ceil mode.
  TestTensor xb = TestTensor::Filled(DType::kFloat32, {2, 2, 7, 5}, 3);
  const Scalar k2 = Scalar::IntList({3, 2}), s2 = Scalar::IntList({2, 2}),
               p2 = Scalar::IntList({1, 0});
  for (bool include_pad : {false, true}) {
    const Scalar inc = Scalar::Bool(include_pad);
    OpRun run = RunOp(Op("avg_pool2d"), {T(xb), S(k2), S(s2), S(p2), S(yes), S(inc), S(none)});
    ASSERT_OK(run.kernel_status);
    ASSERT_EQ(SizesOf(run.results[0]), (std::vector<int64_t>{2, 2, PoolOut(7, 3, 1, 2, 1, true),
                                                             PoolOut(5, 2, 0, 2, 1, true)}));
    ExpectAll(run.results[0], [&](const Index& o) {
      const int64_t y0 = o[2] * 2 - 1, x0 = o[3] * 2;
      const int64_t y1 = std::min<int64_t>(y0 + 3, 7 + 1), x1 = std::min<int64_t>(x0 + 2, 5);
      double sum = 0;
      int64_t inside = 0;
      for (int64_t iy = std::max<int64_t>(y0, 0); iy < std::min<int64_t>(y1, 7); ++iy) {
        for (int64_t ix = x0; ix < x1; ++ix) {
          sum += Get(xb.ref(), {o[0], o[1], iy, ix});
          ++inside;
        }
      }
      return sum / static_cast<double>(include_pad ? (y1 - y0) * (x1 - x0) : inside);
    });
  }
}

TEST(AdaptiveAvgPoolTest, UnevenBinsAndGlobalPooling) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 5, 7}, 8);
  for (const std::vector<int64_t>& size : {std::vector<int64_t>{3, 2}, {1, 1}, {5, 7}}) {
    SCOPED_TRACE(absl::StrJoin(size, "x"));
    const Scalar out_size = Scalar::IntList(size);
    OpRun run = RunOp(Op("adaptive_avg_pool2d"), {T(x), S(out_size)});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    ASSERT_EQ(SizesOf(run.results[0]), (std::vector<int64_t>{2, 3, size[0], size[1]}));
    ExpectAll(run.results[0], [&](const Index& o) {
      // Bin [floor(i * in / out), ceil((i + 1) * in / out)) per dimension.
      const auto bin = [](int64_t i, int64_t in, int64_t out) {
        return std::pair<int64_t, int64_t>{
            static_cast<int64_t>(std::floor(static_cast<double>(i * in) / out)),
            static_cast<int64_t>(std::ceil(static_cast<double>((i + 1) * in) / out))};
      };
      const auto [y0, y1] = bin(o[2], 5, size[0]);
      const auto [x0, x1] = bin(o[3], 7, size[1]);
      double sum = 0;
      for (int64_t iy = y0; iy < y1; ++iy) {
        for (int64_t ix = x0; ix < x1; ++ix) sum += Get(x.ref(), {o[0], o[1], iy, ix});
      }
      return sum / static_cast<double>((y1 - y0) * (x1 - x0));
    });
  }
  const Scalar bad = Scalar::IntList({2});
  EXPECT_THAT(InferOnly(Op("adaptive_avg_pool2d"), {T(x), S(bad)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 1 (output_size) is [2], expected two sizes")));
}

}  // namespace
}  // namespace ferry
