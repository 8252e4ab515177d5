// The built-in XNNPACK backend: graphs written with tests/testing/xnnpack_payload.h, inside
// ExecuTorch programs, loaded and run through a Runtime; every expected value is computed here in
// double from the graph's definition (XNNPACK's NHWC layouts, [out, kh, kw, in] filters).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/xnnpack_reader.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/plan_printer.h"
#include "ferry/runtime/runtime.h"
#include "ferry/runtime/tensor_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/ptd_builder.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/xnnpack_payload.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::ferry::testing::XnnpackCall;
using ::ferry::testing::XnnPayloadWriter;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace xfb = ::ferry::testing::xfb;

constexpr uint32_t kNone = kXnnNoValue;
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Values(size_t n, double seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.7 * i + seed) * 1.5);
  return v;
}

size_t Numel(const std::vector<int64_t>& sizes) {
  size_t n = 1;
  for (int64_t s : sizes) n *= static_cast<size_t>(s);
  return n;
}

// Loads the call's program in `rt` (a fresh Runtime when null), runs it once on `inputs` and
// returns its outputs.
absl::StatusOr<std::vector<std::vector<float>>> RunCall(const XnnpackCall& call,
                                                        std::vector<std::vector<float>> inputs,
                                                        Runtime* rt = nullptr) {
  Runtime own;
  if (rt == nullptr) rt = &own;
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Program> program, Program::FromBytes(call.pte));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Method> method, rt->LoadMethod(*program, "forward"));
  FERRY_ASSIGN_OR_RETURN(const MethodDef* def, program->method("forward"));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& meta = def->values[def->inputs[i]].meta;
    FERRY_RETURN_IF_ERROR(method->SetInput(
        i, TensorView::Host(DType::kFloat32, absl::MakeConstSpan(meta.sizes), inputs[i].data())));
  }
  FERRY_RETURN_IF_ERROR(method->Execute());
  std::vector<std::vector<float>> outputs;
  for (size_t o = 0; o < method->num_outputs(); ++o) {
    const TensorView out = method->Output(o);
    const float* data = out.data_as<float>();
    const std::vector<int64_t> sizes(out.sizes().begin(), out.sizes().end());
    outputs.emplace_back(data, data + Numel(sizes));
  }
  return outputs;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << what << " element " << i;
  }
}

TEST(XnnpackBackendTest, BinaryNodesBroadcastAndClampToTheirOutputRange) {
  struct Case {
    xfb::Node type;
    std::function<double(double, double)> fn;
  };
  const std::vector<Case> cases = {
      {xfb::Node::Add, [](double a, double b) { return a + b; }},
      {xfb::Node::Subtract, [](double a, double b) { return a - b; }},
      {xfb::Node::Multiply, [](double a, double b) { return a * b; }},
      {xfb::Node::Divide, [](double a, double b) { return a / b; }},
      {xfb::Node::Minimum, [](double a, double b) { return std::min(a, b); }},
      {xfb::Node::Maximum, [](double a, double b) { return std::max(a, b); }},
  };
  const std::vector<float> a = Values(6, 0.3), b = {0.5f, -2.0f, 1.25f};
  for (const Case& c : cases) {
    for (bool ranged : {false, true}) {
      const std::string what = absl::StrCat(xfb::EnumNameNode(c.type), ranged ? " ranged" : "");
      XnnPayloadWriter w;
      const uint32_t x = w.Input({2, 3}, 0), y = w.Input({3}, 1), z = w.Output({2, 3}, 2);
      XnnPayloadWriter::Range range;
      if (ranged) range = std::array<float, 2>{-0.5f, 0.75f};
      w.Binary(c.type, x, y, z, 0, range);
      const XnnpackCall call = XnnpackCall::Of(w.Build(), {{2, 3}, {3}}, {{2, 3}});
      ASSERT_OK_AND_ASSIGN(auto out, RunCall(call, {a, b}));
      std::vector<double> want(6);
      for (int i = 0; i < 6; ++i) {
        want[i] = c.fn(a[i], b[i % 3]);
        if (ranged) want[i] = std::clamp(want[i], -0.5, 0.75);
      }
      ExpectNear(out[0], want, what);
    }
  }
}

TEST(XnnpackBackendTest, FullyConnectedWithAndWithoutBiasAndTransposedWeights) {
  const std::vector<float> x = Values(2 * 2 * 4, 0.1);
  const std::vector<float> filter = Values(3 * 4, 1.7), bias = {0.25f, -1.0f, 2.0f};
  for (int variant = 0; variant < 3; ++variant) {
    const bool with_bias = variant != 1, transposed = variant == 2;
    XnnPayloadWriter w;
    const uint32_t in = w.Input({2, 2, 4}, 0), out = w.Output({2, 2, 3}, 1);
    // The transposed filter holds the same [3, 4] matrix stored as [4, 3].
    std::vector<float> stored = filter;
    if (transposed) {
      for (int o = 0; o < 3; ++o) {
        for (int i = 0; i < 4; ++i) stored[i * 3 + o] = filter[o * 4 + i];
      }
    }
    const uint32_t f = transposed ? w.Constant({4, 3}, stored) : w.Constant({3, 4}, stored);
    const uint32_t b = with_bias ? w.Constant({3}, bias) : kNone;
    w.FullyConnected(in, f, b, out, transposed ? kXnnTransposeWeights : 0);
    const XnnpackCall call = XnnpackCall::Of(w.Build(), {{2, 2, 4}}, {{2, 2, 3}});
    ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {x}));
    std::vector<double> want(12);
    for (int r = 0; r < 4; ++r) {
      for (int o = 0; o < 3; ++o) {
        double acc = with_bias ? bias[o] : 0.0;
        for (int i = 0; i < 4; ++i) acc += static_cast<double>(x[r * 4 + i]) * filter[o * 4 + i];
        want[r * 3 + o] = acc;
      }
    }
    ExpectNear(got[0], want, absl::StrCat("variant ", variant));
  }
}

// NHWC convolution, reference over XNNPACK's [out, kh, kw, in / groups] filter.
std::vector<double> ConvNhwc(const std::vector<float>& x, int h, int w, int c,
                             const std::vector<float>& filter, const std::vector<float>& bias,
                             int out_c, int k, int stride, int pad, int groups, int oh, int ow) {
  const int cg = c / groups, og = out_c / groups;
  std::vector<double> y(static_cast<size_t>(oh) * ow * out_c);
  for (int oy = 0; oy < oh; ++oy) {
    for (int ox = 0; ox < ow; ++ox) {
      for (int o = 0; o < out_c; ++o) {
        double acc = bias.empty() ? 0.0 : bias[o];
        const int g = o / og;
        for (int ky = 0; ky < k; ++ky) {
          for (int kx = 0; kx < k; ++kx) {
            const int iy = oy * stride + ky - pad, ix = ox * stride + kx - pad;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            for (int ci = 0; ci < cg; ++ci) {
              acc += static_cast<double>(filter[((o * k + ky) * k + kx) * cg + ci]) *
                     x[(iy * w + ix) * c + g * cg + ci];
            }
          }
        }
        y[(oy * ow + ox) * out_c + o] = acc;
      }
    }
  }
  return y;
}

// As the exporter writes a convolution: NCHW arguments transposed to NHWC inside the graph, and
// back after the node; here stride 2, padding 1 and a ReLU as the output range.
TEST(XnnpackBackendTest, Conv2dBetweenTheExportersTransposes) {
  const int c = 2, h = 5, wd = 5, out_c = 3, k = 3, oh = 3, ow = 3;
  const std::vector<float> x_nchw = Values(c * h * wd, 0.2);
  const std::vector<float> filter = Values(out_c * k * k * c, 2.1), bias = {0.1f, -0.2f, 0.3f};
  XnnPayloadWriter w;
  const uint32_t in = w.Input({1, c, h, wd}, 0);
  const uint32_t nhwc = w.Internal({1, h, wd, c});
  const uint32_t f = w.Constant({out_c, k, k, c}, filter), b = w.Constant({out_c}, bias);
  const uint32_t conv = w.Internal({1, oh, ow, out_c});
  const uint32_t out = w.Output({1, out_c, oh, ow}, 1);
  w.Transpose({0, 2, 3, 1}, in, nhwc);
  XnnPayloadWriter::Conv p;
  p.padding = {1, 1, 1, 1};
  p.kernel = {k, k};
  p.stride = {2, 2};
  p.group_in = c;
  p.group_out = out_c;
  w.Convolution(xfb::Node::Conv2d, p, nhwc, f, b, conv, std::array<float, 2>{0, kInf});
  w.Transpose({0, 3, 1, 2}, conv, out);
  const XnnpackCall call = XnnpackCall::Of(w.Build(), {{1, c, h, wd}}, {{1, out_c, oh, ow}});
  ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {x_nchw}));

  std::vector<float> x_nhwc(x_nchw.size());
  for (int ci = 0; ci < c; ++ci) {
    for (int i = 0; i < h * wd; ++i) x_nhwc[i * c + ci] = x_nchw[ci * h * wd + i];
  }
  const std::vector<double> y = ConvNhwc(x_nhwc, h, wd, c, filter, bias, out_c, k, 2, 1, 1, oh, ow);
  std::vector<double> want(y.size());
  int clipped = 0;
  for (int o = 0; o < out_c; ++o) {
    for (int i = 0; i < oh * ow; ++i) {
      want[o * oh * ow + i] = std::max(y[i * out_c + o], 0.0);
      clipped += y[i * out_c + o] < 0;
    }
  }
  EXPECT_GT(clipped, 0);  // the ReLU matters
  ExpectNear(got[0], want, "conv");
}

TEST(XnnpackBackendTest, DepthwiseConv2dWithAChannelMultiplier) {
  const int c = 2, mult = 2, h = 4, wd = 4, k = 3, out_c = c * mult;
  const std::vector<float> x = Values(h * wd * c, 0.9);  // NHWC
  const std::vector<float> filter = Values(k * k * out_c, 0.4), bias = Values(out_c, 3.0);
  XnnPayloadWriter w;
  const uint32_t in = w.Input({1, h, wd, c}, 0), out = w.Output({1, h, wd, out_c}, 1);
  const uint32_t f = w.Constant({1, k, k, out_c}, filter), b = w.Constant({out_c}, bias);
  XnnPayloadWriter::Conv p;
  p.padding = {1, 1, 1, 1};
  p.kernel = {k, k};
  p.groups = c;
  p.group_in = 1;
  p.group_out = mult;
  w.Convolution(xfb::Node::DepthwiseConv2d, p, in, f, b, out);
  const XnnpackCall call = XnnpackCall::Of(w.Build(), {{1, h, wd, c}}, {{1, h, wd, out_c}});
  ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {x}));
  // [1, kh, kw, out_c] is the [out_c, kh, kw, 1] filter of a grouped convolution.
  std::vector<float> grouped(filter.size());
  for (int o = 0; o < out_c; ++o) {
    for (int i = 0; i < k * k; ++i) grouped[o * k * k + i] = filter[i * out_c + o];
  }
  ExpectNear(got[0], ConvNhwc(x, h, wd, c, grouped, bias, out_c, k, 1, 1, c, h, wd), "depthwise");
}

// XNNPACK's deconvolution: NHWC, the filter [groups * out per group, kh, kw, in per group]; two
// groups, stride 2, padding 1, adjustment 1, a bias.
TEST(XnnpackBackendTest, ConvTranspose2dInTwoGroups) {
  const int h = 3, wd = 2, c = 4, groups = 2, cg = 2, og = 3, k = 3, out_c = groups * og;
  const int oh = (h - 1) * 2 - 2 + (k - 1) + 1 + 1, ow = (wd - 1) * 2 - 2 + (k - 1) + 1 + 1;
  const std::vector<float> x = Values(h * wd * c, 0.6);  // NHWC
  const std::vector<float> filter = Values(out_c * k * k * cg, 1.3), bias = Values(out_c, 2.2);
  XnnPayloadWriter w;
  const uint32_t in = w.Input({1, h, wd, c}, 0), out = w.Output({1, oh, ow, out_c}, 1);
  XnnPayloadWriter::Conv p;
  p.padding = {1, 1, 1, 1};
  p.kernel = {k, k};
  p.stride = {2, 2};
  p.groups = groups;
  p.group_in = cg;
  p.group_out = og;
  p.adjustment = {1, 1};
  w.Convolution(xfb::Node::ConvTranspose2d, p, in, w.Constant({out_c, k, k, cg}, filter),
                w.Constant({out_c}, bias), out);
  const XnnpackCall call = XnnpackCall::Of(w.Build(), {{1, h, wd, c}}, {{1, oh, ow, out_c}});
  ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {x}));
  std::vector<double> want(static_cast<size_t>(oh) * ow * out_c);
  for (int y = 0; y < oh; ++y) {
    for (int xx = 0; xx < ow; ++xx) {
      for (int o = 0; o < out_c; ++o) want[(y * ow + xx) * out_c + o] = bias[o];
    }
  }
  for (int iy = 0; iy < h; ++iy) {
    for (int ix = 0; ix < wd; ++ix) {
      for (int ci = 0; ci < c; ++ci) {
        const int g = ci / cg;
        for (int k2 = 0; k2 < og; ++k2) {
          const int o = g * og + k2;
          for (int ky = 0; ky < k; ++ky) {
            for (int kx = 0; kx < k; ++kx) {
              const int y = iy * 2 - 1 + ky, xx = ix * 2 - 1 + kx;
              if (y < 0 || y >= oh || xx < 0 || xx >= ow) continue;
              want[(y * ow + xx) * out_c + o] += static_cast<double>(x[(iy * wd + ix) * c + ci]) *
                                                 filter[((o * k + ky) * k + kx) * cg + ci % cg];
            }
          }
        }
      }
    }
  }
  ExpectNear(got[0], want, "deconvolution");
}

TEST(XnnpackBackendTest, StaticResizeBilinearHalfPixelAndAlignCorners) {
  // NHWC [1, 2, 2, 1] holding 0, 4 / 8, 12, as the ATen test of the same mapping checks by hand.
  XnnPayloadWriter w;
  const uint32_t in = w.Input({1, 2, 2, 1}, 0);
  const uint32_t half = w.Output({1, 4, 4, 1}, 1), corners = w.Output({1, 3, 3, 1}, 2);
  w.Node(xfb::Node::StaticResizeBilinear2d, [=](auto& fbb) {
    return xfb::CreateStaticResizeBilinear2d(fbb, 4, 4, in, half, 0).Union();
  });
  w.Node(xfb::Node::StaticResizeBilinear2d, [=](auto& fbb) {
    return xfb::CreateStaticResizeBilinear2d(fbb, 3, 3, in, corners, kXnnAlignCorners).Union();
  });
  const XnnpackCall call = XnnpackCall::Of(w.Build(), {{1, 2, 2, 1}}, {{1, 4, 4, 1}, {1, 3, 3, 1}});
  ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {{0, 4, 8, 12}}));
  EXPECT_THAT(std::vector<float>(got[0].begin(), got[0].begin() + 4),
              ::testing::ElementsAre(0, 1, 3, 4));
  EXPECT_THAT(got[1], ::testing::ElementsAre(0, 2, 4, 4, 6, 8, 8, 10, 12));
}

// A statically quantized convolution as ExecuTorch's XNNPACK quantizer exports one: float NCHW
// in, transposed, converted to qint8, Conv2d with a qcint8 filter (a scale per output channel) and
// a qcint32 bias, a qint8 result with a fused ReLU, converted back and transposed. The reference
// is the integer computation: round the input to its grid, accumulate in int32, requantize.
TEST(XnnpackBackendTest, StaticallyQuantizedConvolutionMatchesTheIntegerComputation) {
  const int c = 2, h = 4, wd = 4, out_c = 3, k = 3;
  const float s_in = 0.05f, s_out = 0.1f;
  const int32_t zp_in = 3, zp_out = -5;
  const std::vector<float> s_w = {0.02f, 0.01f, 0.03f};
  std::vector<int8_t> wq(out_c * k * k * c);
  for (size_t i = 0; i < wq.size(); ++i) wq[i] = static_cast<int8_t>(((i * 37) % 200) - 100);
  const std::vector<int32_t> bq = {150, -400, 20};
  std::vector<uint8_t> w_bytes(wq.size()), b_bytes(bq.size() * 4);
  std::memcpy(w_bytes.data(), wq.data(), wq.size());
  std::memcpy(b_bytes.data(), bq.data(), b_bytes.size());
  std::vector<float> b_scales(out_c);
  for (int o = 0; o < out_c; ++o) b_scales[o] = s_in * s_w[o];

  XnnPayloadWriter w;
  const uint32_t in = w.Input({1, c, h, wd}, 0);
  const uint32_t nhwc = w.Internal({1, h, wd, c});
  XnnPayloadWriter::Value q_in{xfb::DataType::QInt8, {1, h, wd, c}, 0, UINT32_MAX, 0, 0, {}, {}};
  q_in.per_tensor = std::make_pair(s_in, zp_in);
  const uint32_t xq = w.AddValue(q_in);
  const uint32_t filter = w.ConstantBytes(xfb::DataType::QCInt8, {out_c, k, k, c}, w_bytes);
  w.value(filter).per_channel = std::make_pair(s_w, 0);
  const uint32_t bias = w.ConstantBytes(xfb::DataType::QCInt32, {out_c}, b_bytes);
  w.value(bias).per_channel = std::make_pair(b_scales, 0);
  XnnPayloadWriter::Value q_out = q_in;
  q_out.dims = {1, h, wd, out_c};
  q_out.per_tensor = std::make_pair(s_out, zp_out);
  const uint32_t yq = w.AddValue(q_out);
  const uint32_t y = w.Internal({1, h, wd, out_c});
  const uint32_t out = w.Output({1, out_c, h, wd}, 1);
  w.Transpose({0, 2, 3, 1}, in, nhwc);
  w.Unary(xfb::Node::Convert, nhwc, xq);
  XnnPayloadWriter::Conv p;
  p.padding = {1, 1, 1, 1};
  p.kernel = {k, k};
  p.group_in = c;
  p.group_out = out_c;
  w.Convolution(xfb::Node::Conv2d, p, xq, filter, bias, yq, std::array<float, 2>{0, kInf});
  w.Unary(xfb::Node::Convert, yq, y);
  w.Transpose({0, 3, 1, 2}, y, out);
  const XnnpackCall call = XnnpackCall::Of(w.Build(), {{1, c, h, wd}}, {{1, out_c, h, wd}});
  const std::vector<float> x = Values(c * h * wd, 0.3);  // within [-1.5, 1.5]
  ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {x}));

  auto quantize = [](double v, float scale, int32_t zp) {
    return std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(v / scale)) + zp, -128, 127);
  };
  std::vector<double> want(out_c * h * wd);
  int clipped = 0;
  for (int o = 0; o < out_c; ++o) {
    for (int oy = 0; oy < h; ++oy) {
      for (int ox = 0; ox < wd; ++ox) {
        int64_t acc = bq[o];
        for (int ky = 0; ky < k; ++ky) {
          for (int kx = 0; kx < k; ++kx) {
            const int iy = oy + ky - 1, ix = ox + kx - 1;
            if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
            for (int ci = 0; ci < c; ++ci) {
              const int64_t xv = quantize(x[(ci * h + iy) * wd + ix], s_in, zp_in) - zp_in;
              acc += xv * wq[((o * k + ky) * k + kx) * c + ci];
            }
          }
        }
        const double real = static_cast<double>(acc) * s_in * s_w[o];
        clipped += real < 0;
        const int64_t q = std::max<int64_t>(quantize(real, s_out, zp_out), zp_out);  // the ReLU
        want[(o * h + oy) * wd + ox] = static_cast<double>(q - zp_out) * s_out;
      }
    }
  }
  EXPECT_GT(clipped, 0);
  ASSERT_EQ(got[0].size(), want.size());
  int exact = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[0][i], want[i], s_out * 1.001) << i;  // within one quantization step
    exact += std::abs(got[0][i] - want[i]) < 1e-5;
  }
  // Float accumulation of the dequantized values rounds as the integers do almost everywhere.
  EXPECT_GE(exact, static_cast<int>(want.size()) * 9 / 10);
}

// qint8 arguments and results are int8 tensors of the call: dequantized on the way in, requantized
// to the result's grid on the way out.
TEST(XnnpackBackendTest, QuantizedArgumentsAndResultsAreInt8Tensors) {
  XnnPayloadWriter w;
  const uint32_t in = w.Input({5}, 0), out = w.Output({5}, 1);
  w.value(in).dtype = w.value(out).dtype = xfb::DataType::QInt8;
  w.value(in).per_tensor = std::make_pair(0.5f, 1);
  w.value(out).per_tensor = std::make_pair(0.25f, -2);
  w.Unary(xfb::Node::Negate, in, out);
  const XnnpackCall call = XnnpackCall::Of(w.Build(), {{5}}, {{5}}, {}, {true, true});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(call.pte));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<int8_t> q = {1, 3, -4, 100, -128};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kInt8, {5}, q.data())));
  ASSERT_OK(method->Execute());
  const TensorView y = method->Output(0);
  ASSERT_EQ(y.dtype(), DType::kInt8);
  // x = (q - 1) * 0.5; -x on the grid of 0.25 with zero point -2, clamped to int8.
  for (int i = 0; i < 5; ++i) {
    const double neg = -(q[i] - 1) * 0.5;
    const int64_t want = std::clamp<int64_t>(std::llround(neg / 0.25) - 2, -128, 127);
    EXPECT_EQ(y.data_as<int8_t>()[i], want) << i;
  }
}

TEST(XnnpackBackendTest, MaxAverageAndGlobalPoolingOverNhwc) {
  const int h = 5, wd = 5, c = 2;
  const std::vector<float> x = Values(h * wd * c, 0.5);
  auto at = [&](int y, int xx, int ch) { return static_cast<double>(x[(y * wd + xx) * c + ch]); };
  XnnPayloadWriter w;
  const uint32_t in = w.Input({1, h, wd, c}, 0);
  const uint32_t max = w.Output({1, 3, 3, c}, 1), avg = w.Output({1, 3, 3, c}, 2);
  const uint32_t global = w.Output({1, 1, 1, c}, 3);
  const uint32_t flat = w.Output({1, c}, 4), ceiled = w.Output({1, 2, 2, c}, 5);
  // As the exporter writes them: KEEP_DIMS on pooling, ceil_mode as extra bottom/right padding.
  XnnPayloadWriter::Conv p;
  p.padding = {1, 1, 1, 1};
  p.kernel = {3, 3};
  p.stride = {2, 2};
  p.flags = kXnnKeepDims;
  w.Pooling(xfb::Node::MaxPooling2d, p, in, max);
  p.kernel = {2, 2};
  w.Pooling(xfb::Node::AvgPooling2d, p, in, avg);
  w.Unary(xfb::Node::GlobalAvgPooling2d, in, global, std::nullopt, kXnnKeepDims);
  w.Unary(xfb::Node::GlobalAvgPooling2d, in, flat);
  // Window 3, stride 3 over 5: one window with floor, two with ceil_mode (the second starts at 3,
  // inside), which the exporter writes as one extra bottom and right padding.
  p.padding = {0, 1, 1, 0};
  p.kernel = {3, 3};
  p.stride = {3, 3};
  w.Pooling(xfb::Node::MaxPooling2d, p, in, ceiled);
  const XnnpackCall call = XnnpackCall::Of(
      w.Build(), {{1, h, wd, c}}, {{1, 3, 3, c}, {1, 3, 3, c}, {1, 1, 1, c}, {1, c}, {1, 2, 2, c}});
  ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {x}));
  std::vector<double> want_max, want_avg, want_global(c, 0.0);
  for (int oy = 0; oy < 3; ++oy) {
    for (int ox = 0; ox < 3; ++ox) {
      for (int ch = 0; ch < c; ++ch) {
        double m = -INFINITY, sum = 0;
        int n = 0;
        for (int ky = 0; ky < 3; ++ky) {
          for (int kx = 0; kx < 3; ++kx) {
            const int y = oy * 2 + ky - 1, xx = ox * 2 + kx - 1;
            if (y >= 0 && y < h && xx >= 0 && xx < wd) m = std::max(m, at(y, xx, ch));
          }
        }
        // Average over the 2x2 window's elements inside the input (padding not counted).
        for (int ky = 0; ky < 2; ++ky) {
          for (int kx = 0; kx < 2; ++kx) {
            const int y = oy * 2 + ky - 1, xx = ox * 2 + kx - 1;
            if (y >= 0 && y < h && xx >= 0 && xx < wd) {
              sum += at(y, xx, ch);
              ++n;
            }
          }
        }
        want_max.push_back(m);
        want_avg.push_back(sum / n);
      }
    }
  }
  for (int i = 0; i < h * wd; ++i) {
    for (int ch = 0; ch < c; ++ch) want_global[ch] += x[i * c + ch] / static_cast<double>(h * wd);
  }
  ExpectNear(got[0], want_max, "max");
  ExpectNear(got[1], want_avg, "avg");
  ExpectNear(got[2], want_global, "global");
  ExpectNear(got[3], want_global, "global, dims dropped");
  std::vector<double> want_ceiled;
  for (int oy = 0; oy < 2; ++oy) {
    for (int ox = 0; ox < 2; ++ox) {
      for (int ch = 0; ch < c; ++ch) {
        double m = -INFINITY;
        for (int y = oy * 3; y < std::min(oy * 3 + 3, h); ++y) {
          for (int xx = ox * 3; xx < std::min(ox * 3 + 3, wd); ++xx) m = std::max(m, at(y, xx, ch));
        }
        want_ceiled.push_back(m);
      }
    }
  }
  ExpectNear(got[4], want_ceiled, "max, ceil mode");
}

TEST(XnnpackBackendTest, UnaryNodes) {
  struct Case {
    xfb::Node type;
    std::function<double(double)> fn;
    bool positive = false;  // needs a positive input
  };
  const std::vector<Case> cases = {
      {xfb::Node::Sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {xfb::Node::Tanh, [](double v) { return std::tanh(v); }},
      {xfb::Node::Exp, [](double v) { return std::exp(v); }},
      {xfb::Node::Log, [](double v) { return std::log(v); }, true},
      {xfb::Node::Sin, [](double v) { return std::sin(v); }},
      {xfb::Node::Cos, [](double v) { return std::cos(v); }},
      {xfb::Node::Abs, [](double v) { return std::abs(v); }},
      {xfb::Node::Negate, [](double v) { return -v; }},
      {xfb::Node::Square, [](double v) { return v * v; }},
      {xfb::Node::SquareRoot, [](double v) { return std::sqrt(v); }, true},
      {xfb::Node::ReciprocalSquareRoot, [](double v) { return 1 / std::sqrt(v); }, true},
      {xfb::Node::Hardswish, [](double v) { return v * std::clamp(v + 3, 0.0, 6.0) / 6; }},
      {xfb::Node::Gelu, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {xfb::Node::Floor, [](double v) { return std::floor(v); }},
      {xfb::Node::Ceiling, [](double v) { return std::ceil(v); }},
      {xfb::Node::Copy, [](double v) { return v; }},
      {xfb::Node::Convert, [](double v) { return v; }},
      {xfb::Node::Clamp, [](double v) { return std::clamp(v, -0.25, 0.5); }},
  };
  std::vector<float> x = Values(8, 0.7);
  x[0] = -3.5f;  // hardswish's lower piece
  x[1] = 3.25f;  // and its upper one
  std::vector<float> positive(x.size());
  for (size_t i = 0; i < x.size(); ++i) positive[i] = std::abs(x[i]) + 0.125f;
  for (const Case& c : cases) {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({8}, 0), out = w.Output({8}, 1);
    XnnPayloadWriter::Range range;
    if (c.type == xfb::Node::Clamp) range = std::array<float, 2>{-0.25f, 0.5f};
    w.Unary(c.type, in, out, range);
    const XnnpackCall call = XnnpackCall::Of(w.Build(), {{8}}, {{8}});
    const std::vector<float>& input = c.positive ? positive : x;
    ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {input}));
    std::vector<double> want(input.size());
    for (size_t i = 0; i < input.size(); ++i) want[i] = c.fn(input[i]);
    ExpectNear(got[0], want, xfb::EnumNameNode(c.type));
  }
}

TEST(XnnpackBackendTest, ActivationsWithParametersAndSoftmax) {
  const std::vector<float> x = Values(6, 1.1), slope = {0.1f, 0.5f, -2.0f};
  XnnPayloadWriter w;
  const uint32_t in = w.Input({2, 3}, 0);
  const uint32_t leaky = w.Output({2, 3}, 1), elu = w.Output({2, 3}, 2);
  const uint32_t prelu = w.Output({2, 3}, 3), softmax = w.Output({2, 3}, 4);
  w.Node(xfb::Node::LeakyRelu,
         [=](auto& fbb) { return xfb::CreateLeakyRelu(fbb, 0.2f, in, leaky, 0).Union(); });
  w.Node(xfb::Node::Elu, [=](auto& fbb) { return xfb::CreateElu(fbb, 0.5f, in, elu, 0).Union(); });
  w.Binary(xfb::Node::PRelu, in, w.Constant({3}, slope), prelu);
  w.Unary(xfb::Node::Softmax, in, softmax);
  const XnnpackCall call = XnnpackCall::Of(w.Build(), {{2, 3}}, {{2, 3}, {2, 3}, {2, 3}, {2, 3}});
  ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {x}));
  std::vector<double> want_leaky, want_elu, want_prelu, want_softmax;
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int i = 0; i < 3; ++i) sum += std::exp(static_cast<double>(x[r * 3 + i]));
    for (int i = 0; i < 3; ++i) {
      const double v = x[r * 3 + i];
      want_leaky.push_back(v < 0 ? 0.2 * v : v);
      want_elu.push_back(v < 0 ? 0.5 * (std::exp(v) - 1) : v);
      want_prelu.push_back(v < 0 ? slope[i] * v : v);
      want_softmax.push_back(std::exp(v) / sum);
    }
  }
  ExpectNear(got[0], want_leaky, "leaky relu");
  ExpectNear(got[1], want_elu, "elu");
  ExpectNear(got[2], want_prelu, "prelu");
  ExpectNear(got[3], want_softmax, "softmax");
}

TEST(XnnpackBackendTest, ReshapeTransposeSliceConcatenateAndPad) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6}, y = {7, 8}, z = {9, 10, 11, 12};
  XnnPayloadWriter w;
  const uint32_t a = w.Input({2, 3}, 0), b = w.Input({2, 1}, 1), c = w.Input({2, 2}, 2);
  const uint32_t reshaped = w.Output({3, 2}, 3), transposed = w.Output({3, 2}, 4);
  const uint32_t sliced = w.Output({2, 2}, 5), cat = w.Output({2, 5}, 6);
  w.Reshape({3, 2}, a, reshaped);
  w.Transpose({1, 0}, a, transposed);
  w.Slice({0, 1}, {2, 2}, a, sliced);
  w.Concatenate(1, {b, c, sliced}, cat);
  const uint32_t padded = w.Output({3, 4}, 7);
  w.Node(xfb::Node::StaticConstantPad, [=](auto& fbb) {
    const std::vector<uint32_t> before = {1, 0}, after = {0, 1};
    return xfb::CreateStaticConstantPadDirect(fbb, &before, &after, -1.0f, a, padded, 0).Union();
  });
  const XnnpackCall call = XnnpackCall::Of(w.Build(), {{2, 3}, {2, 1}, {2, 2}},
                                           {{3, 2}, {3, 2}, {2, 2}, {2, 5}, {3, 4}});
  ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {x, y, z}));
  EXPECT_THAT(got[0], ::testing::ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(got[1], ::testing::ElementsAre(1, 4, 2, 5, 3, 6));
  EXPECT_THAT(got[2], ::testing::ElementsAre(2, 3, 5, 6));
  EXPECT_THAT(got[3], ::testing::ElementsAre(7, 9, 10, 2, 3, 8, 11, 12, 5, 6));
  // One row before, one column after, filled with -1.
  EXPECT_THAT(got[4], ::testing::ElementsAre(-1, -1, -1, -1, 1, 2, 3, -1, 4, 5, 6, -1));
}

TEST(XnnpackBackendTest, BatchMatrixMultiplyAndAttention) {
  const std::vector<float> a = Values(2 * 2 * 3, 0.2), b = Values(2 * 3 * 2, 1.4);
  const std::vector<float> q = Values(2 * 3, 0.3), k = Values(4 * 3, 0.8), v = Values(4 * 2, 1.9);
  const std::vector<float> scale = {0.5f, 0.25f, 1.0f};
  const std::vector<float> mask = {0, -1, 0, -1e9f, 0.5f, 0, 0, 0};
  XnnPayloadWriter w;
  const uint32_t ia = w.Input({2, 2, 3}, 0), ib = w.Input({2, 3, 2}, 1);
  const uint32_t iq = w.Input({1, 2, 3}, 2), ik = w.Input({1, 4, 3}, 3), iv = w.Input({1, 4, 2}, 4);
  const uint32_t bmm = w.Output({2, 2, 2}, 5), bmm_t = w.Output({2, 2, 3}, 6);
  const uint32_t sdpa = w.Output({1, 2, 2}, 7);
  w.Binary(xfb::Node::BatchMatrixMultiply, ia, ib, bmm);
  // Flag 1: b is given as [batch, n, k], here a itself: a a^T per batch.
  w.Binary(xfb::Node::BatchMatrixMultiply, ia, ia, bmm_t, kXnnTransposeWeights);
  const uint32_t s = w.Constant({3}, scale), m = w.Constant({2, 4}, mask);
  w.Node(xfb::Node::ScaledDotProductAttention, [=](auto& fbb) {
    return xfb::CreateScaledDotProductAttention(fbb, iq, ik, iv, s, m, sdpa, 0).Union();
  });
  const XnnpackCall call =
      XnnpackCall::Of(w.Build(), {{2, 2, 3}, {2, 3, 2}, {1, 2, 3}, {1, 4, 3}, {1, 4, 2}},
                      {{2, 2, 2}, {2, 2, 2}, {1, 2, 2}});
  // The call's second result is [2, 2, 2]: the graph declares [2, 2, 3] for it; refused below.
  EXPECT_THAT(RunCall(call, {a, b, q, k, v}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("declares its output")));

  XnnPayloadWriter w2;
  const uint32_t ja = w2.Input({2, 2, 3}, 0), jb = w2.Input({2, 3, 2}, 1);
  const uint32_t jq = w2.Input({1, 2, 3}, 2), jk = w2.Input({1, 4, 3}, 3);
  const uint32_t jv = w2.Input({1, 4, 2}, 4);
  const uint32_t o1 = w2.Output({2, 2, 2}, 5), o2 = w2.Output({2, 2, 2}, 6);
  const uint32_t o3 = w2.Output({1, 2, 2}, 7);
  w2.Binary(xfb::Node::BatchMatrixMultiply, ja, jb, o1);
  w2.Binary(xfb::Node::BatchMatrixMultiply, ja, ja, o2, kXnnTransposeWeights);
  const uint32_t s2 = w2.Constant({3}, scale), m2 = w2.Constant({2, 4}, mask);
  w2.Node(xfb::Node::ScaledDotProductAttention, [=](auto& fbb) {
    return xfb::CreateScaledDotProductAttention(fbb, jq, jk, jv, s2, m2, o3, 0).Union();
  });
  const XnnpackCall call2 =
      XnnpackCall::Of(w2.Build(), {{2, 2, 3}, {2, 3, 2}, {1, 2, 3}, {1, 4, 3}, {1, 4, 2}},
                      {{2, 2, 2}, {2, 2, 2}, {1, 2, 2}});
  ASSERT_OK_AND_ASSIGN(auto got, RunCall(call2, {a, b, q, k, v}));
  std::vector<double> want_bmm, want_aat, want_sdpa;
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        double acc = 0, aat = 0;
        for (int t = 0; t < 3; ++t) {
          acc += static_cast<double>(a[(n * 2 + i) * 3 + t]) * b[(n * 3 + t) * 2 + j];
          aat += static_cast<double>(a[(n * 2 + i) * 3 + t]) * a[(n * 2 + j) * 3 + t];
        }
        want_bmm.push_back(acc);
        want_aat.push_back(aat);
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    double scores[4], max = -INFINITY, sum = 0;
    for (int j = 0; j < 4; ++j) {
      scores[j] = mask[i * 4 + j];
      for (int t = 0; t < 3; ++t) {
        scores[j] += static_cast<double>(q[i * 3 + t]) * scale[t] * k[j * 3 + t];
      }
      max = std::max(max, scores[j]);
    }
    for (double& sc : scores) sum += (sc = std::exp(sc - max));
    for (int d = 0; d < 2; ++d) {
      double acc = 0;
      for (int j = 0; j < 4; ++j) acc += scores[j] / sum * v[j * 2 + d];
      want_sdpa.push_back(acc);
    }
  }
  ExpectNear(got[0], want_bmm, "bmm");
  ExpectNear(got[1], want_aat, "bmm, b transposed");
  ExpectNear(got[2], want_sdpa, "sdpa");
}

// A channels-last argument: XNNPACK sees it as stored, [N, H, W, C]. (Delegate results are
// row-major: the import refuses others.)
TEST(XnnpackBackendTest, ArgumentsAreSeenAsStored) {
  XnnPayloadWriter w;
  const uint32_t in = w.Input({1, 2, 3, 2}, 0), out = w.Output({1, 2, 3, 2}, 1);
  w.Unary(xfb::Node::Negate, in, out);
  const XnnpackCall call =
      XnnpackCall::Of(w.Build(), {{1, 2, 2, 3}}, {{1, 2, 3, 2}}, {{0, 2, 3, 1}});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(call.pte));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  // [N, C, H, W] = [1, 2, 2, 3] stored channels-last: element (c, h, w) at (h * 3 + w) * 2 + c.
  std::vector<float> stored = Values(12, 0.4);
  TensorRef ref = TensorRef::Contiguous(DType::kFloat32, {1, 2, 2, 3}, stored.data());
  ref.strides = {12, 1, 6, 2};
  ASSERT_OK(method->SetInput(0, TensorView(ref, Device::Host())));
  ASSERT_OK(method->Execute());
  // The result is [N, H, W, C] row-major: the stored order of the argument, negated.
  const TensorView result = method->Output(0);
  ASSERT_EQ(result.numel(), 12);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(result.data_as<float>()[i], -stored[i]) << i;
}

// Weights kept by key: in the data file (.ptd) as a blob without a tensor layout, which the
// Program copies into its named data; a tensor entry of the data file is not named data.
TEST(XnnpackBackendTest, NamedWeightsComeFromTheDataFile) {
  const std::vector<float> weights = {2.0f, -3.0f, 0.5f};
  XnnPayloadWriter w;
  const uint32_t in = w.Input({3}, 0), out = w.Output({3}, 1);
  w.Binary(xfb::Node::Multiply, in, w.NamedConstant({3}, "layer.weight", 12), out);
  const XnnpackCall call = XnnpackCall::Of(w.Build(), {{3}}, {{3}});
  testing::PtdTensor blob;
  blob.key = "layer.weight";
  blob.bytes = testing::FloatBytes(weights);
  blob.with_layout = false;
  testing::PtdTensor tensor;
  tensor.key = "other.tensor";
  tensor.sizes = {1};
  tensor.bytes = testing::FloatBytes({1.0f});
  const std::vector<uint8_t> ptd = testing::BuildPtd({blob, tensor});
  std::vector<uint64_t> aligned((ptd.size() + 7) / 8);
  std::memcpy(aligned.data(), ptd.data(), ptd.size());
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Program> program,
      Program::FromBytes(
          call.pte,
          absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(aligned.data()), ptd.size())));
  aligned.assign(aligned.size(), 0);  // the data file is not needed after the load
  EXPECT_NE(program->named_data().Find("layer.weight"), nullptr);
  EXPECT_EQ(program->named_data().Find("other.tensor"), nullptr);
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {1.0f, 2.0f, 4.0f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {3}, x.data())));
  ASSERT_OK(method->Execute());
  const float* y = method->Output(0).data_as<float>();
  EXPECT_THAT(std::vector<float>(y, y + 3), ::testing::ElementsAre(2.0f, -6.0f, 2.0f));

  // Without the data file the key is missing, and loading says which.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> alone, Program::FromBytes(call.pte));
  EXPECT_THAT(rt.LoadMethod(*alone, "forward").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"layer.weight\"")));
}

// An XNNPACK call after a delegate on cuda:0 (sim:0 without a GPU): the XNNPACK call runs on the
// host, so placement copies the device delegate's result to the host before it, per call, as for
// any host delegate. forward(x) = -(x * x).
TEST(XnnpackBackendTest, PlacementCopiesAroundItFromADeviceDelegate) {
  ProgramBuilder sub;
  MethodBuilder& g = sub.AddMethod("main");
  const ValueId a = g.Input("a", DType::kFloat32, {4});
  g.Output(g.Op("mul", {a, a}));
  ASSERT_OK_AND_ASSIGN(const std::vector<uint8_t> square, sub.Build());
  XnnPayloadWriter w;
  const uint32_t in = w.Input({4}, 0), out = w.Output({4}, 1);
  w.Unary(xfb::Node::Negate, in, out);
  const std::vector<uint8_t> negate = w.Build();

  EtProgram p;
  EtMethod m;
  m.name = "forward";
  m.values = {testing::FloatTensor({4}), testing::FloatTensor({4}), testing::FloatTensor({4})};
  m.inputs = {0};
  m.outputs = {2};
  EtDelegate on_device;
  on_device.backend_id = "FerryGraphBackend";
  on_device.compile_specs.emplace_back("target_device", "cuda:0");
  on_device.payload = square;
  EtDelegate xnnpack;
  xnnpack.backend_id = kXnnpackBackendName;
  xnnpack.payload = negate;
  m.delegates = {on_device, xnnpack};
  EtInstruction first, second;
  first.kind = second.kind = EtInstructionKind::kDelegateCall;
  first.delegate_index = 0;
  first.args = {0, 1};
  second.delegate_index = 1;
  second.args = {1, 2};
  m.instructions = {first, second};
  p.methods.push_back(std::move(m));
  const std::vector<uint8_t> pte = testing::WritePte(p);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(pte));
  Runtime rt;
  ASSERT_OK(rt.RegisterBackend(
      std::make_unique<testing::RenamedBackend>("FerryGraphBackend", MakeGraphBackend())));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  const PlacementPlan& plan = method->plan().placement;
  ASSERT_EQ(plan.nodes.size(), 2u);
  EXPECT_FALSE(plan.nodes[0].device.is_host());
  EXPECT_TRUE(plan.nodes[1].device.is_host());
  int to_device = 0, to_host = 0;
  for (const CopyStep& c : plan.copies) {
    EXPECT_EQ(c.timing, CopyTiming::kPerCall);
    to_device += c.direction == CopyDirection::kHostToDevice;
    to_host += c.direction == CopyDirection::kDeviceToHost && c.node == 1;
  }
  EXPECT_EQ(to_device, 1);  // x, to the device delegate
  EXPECT_EQ(to_host, 1);    // its result, to the XNNPACK call
  std::vector<float> x = {1.5f, -2.0f, 0.5f, 3.0f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  ASSERT_OK(method->Execute());
  const float* y = method->Output(0).data_as<float>();
  EXPECT_THAT(std::vector<float>(y, y + 4), ::testing::ElementsAre(-2.25f, -4.0f, -0.25f, -9.0f));
}

absl::Status LoadStatus(const XnnPayloadWriter& w, std::vector<std::vector<int64_t>> args,
                        std::vector<std::vector<int64_t>> results) {
  const XnnpackCall call = XnnpackCall::Of(w.Build(), args, results);
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Program> program, Program::FromBytes(call.pte));
  Runtime rt;
  return rt.LoadMethod(*program, "forward").status();
}

TEST(XnnpackBackendTest, UnsupportedNodesDatatypesAndFlagsAreRefusedByName) {
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({1, 4, 4, 1}, 0), out = w.Output({1, 2, 2, 1}, 1);
    const uint32_t index =
        w.AddValue({xfb::DataType::Int32, {1, 2, 2, 1}, 0, UINT32_MAX, 0, 0, {}, {}});
    w.Node(xfb::Node::ArgMaxPooling2d, [=](auto& fbb) {
      return xfb::CreateArgMaxPooling2d(fbb, 0, 0, 0, 0, 2, 2, in, out, index, 0).Union();
    });
    EXPECT_THAT(
        LoadStatus(w, {{1, 4, 4, 1}}, {{1, 2, 2, 1}}),
        StatusIs(absl::StatusCode::kUnimplemented,
                 AllOf(HasSubstr("backend \"XnnpackBackend\" init failed"),
                       HasSubstr("XNNPACK node 0 (ArgMaxPooling2d)"), HasSubstr("not supported"))));
  }
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({1, 2, 2, 1}, 0), mid = w.Internal({1, 2, 2, 1});
    const uint32_t out = w.Output({1, 4, 4, 1}, 1);
    w.Unary(xfb::Node::Abs, in, mid);
    w.Node(xfb::Node::StaticResizeBilinear2d, [=](auto& fbb) {
      // 4: TensorFlow's legacy coordinate mapping, which PyTorch exports never ask for.
      return xfb::CreateStaticResizeBilinear2d(fbb, 4, 4, mid, out, 4).Union();
    });
    EXPECT_THAT(
        LoadStatus(w, {{1, 2, 2, 1}}, {{1, 4, 4, 1}}),
        StatusIs(absl::StatusCode::kUnimplemented,
                 AllOf(HasSubstr("node 1 (StaticResizeBilinear2D)"), HasSubstr("flags 0x4"))));
  }
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({4}, 0), out = w.Output({4}, 1);
    w.value(in).dtype = xfb::DataType::Float16;
    w.Unary(xfb::Node::Abs, in, out);
    EXPECT_THAT(LoadStatus(w, {{4}}, {{4}}),
                StatusIs(absl::StatusCode::kUnimplemented,
                         AllOf(HasSubstr("value id 0 is fp16"), HasSubstr("float32 graphs"))));
  }
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({1, 4, 4, 1}, 0), out = w.Output({1, 2, 2, 1}, 1);
    XnnPayloadWriter::Conv p;
    p.padding = {0, 1, 1, 0};
    p.kernel = {2, 2};
    p.stride = {2, 2};
    // Average pooling counts the elements a window covers: extra padding is no ceil_mode there.
    w.Pooling(xfb::Node::AvgPooling2d, p, in, out);
    EXPECT_THAT(LoadStatus(w, {{1, 4, 4, 1}}, {{1, 2, 2, 1}}),
                StatusIs(absl::StatusCode::kUnimplemented, AllOf(HasSubstr("node 0 (AvgPooling2d)"),
                                                                 HasSubstr("asymmetric padding"))));
  }
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({2, 4}, 0), out = w.Output({2, 3}, 1);
    w.FullyConnected(in, w.Constant({3, 4}, Values(12, 0.3)), kNone, out, 4);
    EXPECT_THAT(LoadStatus(w, {{2, 4}}, {{2, 3}}),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("flags 0x4")));
  }
  {
    // The graph has three external values; the call passes one argument and one result.
    XnnPayloadWriter w;
    const uint32_t in = w.Input({4}, 0), out = w.Output({4}, 2);
    w.Input({4}, 1);
    w.Unary(xfb::Node::Abs, in, out);
    EXPECT_THAT(LoadStatus(w, {{4}}, {{4}}),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("3 external values, but the call passes 1 arguments")));
  }
  {
    // The argument's shape is not what the graph reads.
    XnnPayloadWriter w;
    const uint32_t in = w.Input({4}, 0), out = w.Output({4}, 1);
    w.Unary(xfb::Node::Abs, in, out);
    EXPECT_THAT(LoadStatus(w, {{5}}, {{4}}),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("argument 0 is float32[5], but the XNNPACK graph reads it")));
  }
}

// A backend registered under the built-in's name replaces it; a second one is refused.
class RefusingBackend : public Backend {
 public:
  absl::string_view name() const override { return kXnnpackBackendName; }
  bool SupportsDevice(DeviceType) const override { return true; }
  absl::StatusOr<std::unique_ptr<DelegateInstance>> Init(const DelegateInit&) const override {
    return absl::FailedPreconditionError("the application's own XNNPACK");
  }
};

TEST(XnnpackBackendTest, ARegisteredBackendReplacesTheBuiltIn) {
  XnnPayloadWriter w;
  const uint32_t in = w.Input({4}, 0), out = w.Output({4}, 1);
  w.Unary(xfb::Node::Abs, in, out);
  const XnnpackCall call = XnnpackCall::Of(w.Build(), {{4}}, {{4}});
  Runtime rt;
  EXPECT_TRUE(rt.IsBuiltInBackend(kXnnpackBackendName));
  ASSERT_OK_AND_ASSIGN(auto got, RunCall(call, {{-1, 2, -3, 4}}, &rt));
  EXPECT_THAT(got[0], ::testing::ElementsAre(1, 2, 3, 4));

  // The plan names the backend as built in.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(call.pte));
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
    EXPECT_THAT(FormatPlanText(*method), HasSubstr("delegate:XnnpackBackend (built-in)"));
  }

  ASSERT_OK(rt.RegisterBackend(std::make_unique<RefusingBackend>()));
  EXPECT_FALSE(rt.IsBuiltInBackend(kXnnpackBackendName));
  EXPECT_THAT(
      RunCall(call, {{-1, 2, -3, 4}}, &rt).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("the application's own XNNPACK")));
  EXPECT_THAT(rt.RegisterBackend(std::make_unique<RefusingBackend>()),
              StatusIs(absl::StatusCode::kAlreadyExists));

  // A replacement that loads: the plan no longer calls the backend built in.
  Runtime planned;
  ASSERT_OK(planned.RegisterBackend(MakePlanOnlyBackend(kXnnpackBackendName)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, planned.LoadMethod(*program, "forward"));
  const std::string plan = FormatPlanText(*method);
  EXPECT_THAT(plan, HasSubstr("delegate:XnnpackBackend"));
  EXPECT_THAT(plan, ::testing::Not(HasSubstr("built-in")));
}

}  // namespace
}  // namespace ferry
