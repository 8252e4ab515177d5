// The ExecuTorch mappings of the network layers (loader/executorch/ops/nn.cc), in the programs
// they make up: a CNN block (convolution -> batch norm -> relu -> max pool -> adaptive average
// pool) and a transformer block (layer norm -> bmm -> softmax -> gelu), each written in
// ExecuTorch's format with its multi-output calls as the exporter writes them, run, and checked
// against a double-precision reference computed here; refusals naming the instruction.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "ferry/loader/executorch/importer.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/et_program_parts.h"
#include "tests/testing/pte_writer.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::Bool;
using ::ferry::testing::Constant;
using ::ferry::testing::Double;
using ::ferry::testing::DoubleList;
using ::ferry::testing::FloatTensor;
using ::ferry::testing::Int;
using ::ferry::testing::Int64Tensor;
using ::ferry::testing::IntList;
using ::ferry::testing::KernelCall;
using ::ferry::testing::MethodStatus;
using ::ferry::testing::OneMethod;
using ::ferry::testing::StatusIs;
using ::ferry::testing::TensorList;
using ::ferry::testing::ThroughFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<float> Ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(static_cast<int>((i * 7 + 3) % 11) - 5) * scale + offset;
  }
  return v;
}

// x [1, 3, 6, 6] -> conv 3x3 (pad 1) with bias -> [1, 4, 6, 6] -> batch norm -> relu
// -> max_pool2d_with_indices 2x2 -> [1, 4, 3, 3] -> _adaptive_avg_pool2d [1, 1] -> [1, 4, 1, 1].
struct CnnBlock {
  std::vector<float> w = Ramp(4 * 3 * 3 * 3, 0.1f, 0.05f);
  std::vector<float> b = {0.1f, -0.2f, 0.3f, 0.0f};
  std::vector<float> gamma = {1.0f, 0.5f, -1.5f, 2.0f};
  std::vector<float> beta = {0.0f, 0.25f, 0.5f, -0.5f};
  std::vector<float> mean = {0.2f, -0.1f, 0.0f, 0.3f};
  std::vector<float> var = {1.0f, 0.5f, 2.0f, 0.25f};

  EtProgram Program(bool transposed = false) const {
    return OneMethod(
        {
            FloatTensor({1, 3, 6, 6}),  // 0 x
            Constant({4, 3, 3, 3}, w),  // 1 weight
            Constant({4}, b),           // 2 bias
            Int(1),                     // 3
            Int(0),                     // 4
            IntList({3, 3}),            // 5 stride, dilation [1, 1]
            IntList({3, 3}),            // 6 padding [1, 1]
            Bool(transposed),           // 7 transposed
            IntList({4, 4}),            // 8 output_padding [0, 0]
            FloatTensor({1, 4, 6, 6}),  // 9 conv out
            Constant({4}, gamma),       // 10
            Constant({4}, beta),        // 11
            Constant({4}, mean),        // 12
            Constant({4}, var),         // 13
            Double(0.1),                // 14 momentum
            Double(1e-5),               // 15 eps
            FloatTensor({1, 4, 6, 6}),  // 16 bn out
            FloatTensor({0}),           // 17 save_mean
            FloatTensor({0}),           // 18 save_invstd
            TensorList({16, 17, 18}),   // 19 returned
            FloatTensor({1, 4, 6, 6}),  // 20 relu
            Int(2),                     // 21
            IntList({21, 21}),          // 22 [2, 2]
            IntList({4, 4}),            // 23 [0, 0]
            Bool(false),                // 24 ceil_mode
            FloatTensor({1, 4, 3, 3}),  // 25 pooled
            Int64Tensor({1, 4, 3, 3}),  // 26 indices
            TensorList({25, 26}),       // 27 returned
            IntList({3, 3}),            // 28 output_size [1, 1]
            FloatTensor({1, 4, 1, 1}),  // 29 global
        },
        {0}, {25, 29},
        {{"aten::convolution", "out"},
         {"aten::_native_batch_norm_legit_no_training", "out"},
         {"aten::relu", "out"},
         {"aten::max_pool2d_with_indices", "out"},
         {"aten::_adaptive_avg_pool2d", "out"}},
        {
            KernelCall(0, {0, 1, 2, 5, 6, 5, 7, 8, 3, 9, 9}),
            KernelCall(1, {9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}),
            KernelCall(2, {16, 20, 20}),
            KernelCall(3, {20, 22, 22, 23, 5, 24, 25, 26, 27}),
            KernelCall(4, {25, 28, 29, 29}),
        });
  }
};

TEST(EtNnOps, ACnnBlockRunsAgainstANaiveReference) {
  const CnnBlock block;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(block.Program()));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = Ramp(3 * 6 * 6, 0.3f, -0.1f);
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {1, 3, 6, 6}, x.data())));
  ASSERT_OK(method->Execute());
  ASSERT_THAT(method->Output(0).sizes(), ElementsAre(1, 4, 3, 3));
  ASSERT_THAT(method->Output(1).sizes(), ElementsAre(1, 4, 1, 1));

  // conv -> batch norm -> relu, per element of [4, 6, 6].
  std::vector<double> act(4 * 36);
  for (int o = 0; o < 4; ++o) {
    for (int y = 0; y < 6; ++y) {
      for (int xx = 0; xx < 6; ++xx) {
        double acc = block.b[o];
        for (int c = 0; c < 3; ++c) {
          for (int ky = 0; ky < 3; ++ky) {
            for (int kx = 0; kx < 3; ++kx) {
              const int iy = y - 1 + ky, ix = xx - 1 + kx;
              if (iy < 0 || iy >= 6 || ix < 0 || ix >= 6) continue;
              acc += double{x[(c * 6 + iy) * 6 + ix]} * block.w[((o * 3 + c) * 3 + ky) * 3 + kx];
            }
          }
        }
        const double bn =
            (acc - block.mean[o]) / std::sqrt(double{block.var[o]} + 1e-5) * block.gamma[o] +
            block.beta[o];
        act[(o * 6 + y) * 6 + xx] = std::max(bn, 0.0);
      }
    }
  }
  const float* pooled = method->Output(0).data_as<float>();
  const float* global = method->Output(1).data_as<float>();
  for (int o = 0; o < 4; ++o) {
    double sum = 0;
    for (int py = 0; py < 3; ++py) {
      for (int px = 0; px < 3; ++px) {
        double best = -INFINITY;
        for (int ky = 0; ky < 2; ++ky) {
          for (int kx = 0; kx < 2; ++kx) {
            best = std::max(best, act[(o * 6 + py * 2 + ky) * 6 + px * 2 + kx]);
          }
        }
        EXPECT_NEAR(pooled[(o * 3 + py) * 3 + px], best, 1e-4) << o << " " << py << " " << px;
        sum += best;
      }
    }
    EXPECT_NEAR(global[o], sum / 9, 1e-4) << "channel " << o;
  }
}

// convolution with transposed true: x [1, 4, 3, 3], weight [4, 3 / groups... ] in two groups:
// weight [4, 1, 3, 3] (in channels, out per group, kh, kw) gives 2 outputs, stride 2, padding 1,
// output_padding 1, dilation 1 -> [1, 2, 6, 6]; against the scatter definition in double.
TEST(EtNnOps, TransposedConvolutionRunsAgainstANaiveReference) {
  const std::vector<float> w = Ramp(4 * 1 * 3 * 3, 0.1f, 0.05f), b = {0.5f, -0.25f};
  EtProgram p = OneMethod(
      {
          FloatTensor({1, 4, 3, 3}),  // 0 x
          Constant({4, 1, 3, 3}, w),  // 1 weight
          Constant({2}, b),           // 2 bias
          Int(1),                     // 3
          Int(2),                     // 4
          IntList({4, 4}),            // 5 stride [2, 2]
          IntList({3, 3}),            // 6 padding, output_padding, dilation [1, 1]
          Bool(true),                 // 7 transposed
          FloatTensor({1, 2, 6, 6}),  // 8 out
      },
      {0}, {8}, {{"aten::convolution", "out"}}, {KernelCall(0, {0, 1, 2, 5, 6, 6, 7, 6, 4, 8, 8})});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = Ramp(4 * 9, 0.2f, -0.1f);
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {1, 4, 3, 3}, x.data())));
  ASSERT_OK(method->Execute());
  std::vector<double> want(2 * 36);
  for (int o = 0; o < 2; ++o) {
    for (int i = 0; i < 36; ++i) want[o * 36 + i] = b[o];
  }
  // Input channel c belongs to group c / 2 and reaches output channel (c / 2) * 1 + 0.
  for (int c = 0; c < 4; ++c) {
    for (int iy = 0; iy < 3; ++iy) {
      for (int ix = 0; ix < 3; ++ix) {
        for (int ky = 0; ky < 3; ++ky) {
          for (int kx = 0; kx < 3; ++kx) {
            const int oy = iy * 2 - 1 + ky, ox = ix * 2 - 1 + kx;
            if (oy < 0 || oy >= 6 || ox < 0 || ox >= 6) continue;
            want[(c / 2) * 36 + oy * 6 + ox] +=
                double{x[(c * 3 + iy) * 3 + ix]} * w[(c * 3 + ky) * 3 + kx];
          }
        }
      }
    }
  }
  const TensorView y = method->Output(0);
  ASSERT_THAT(y.sizes(), ElementsAre(1, 2, 6, 6));
  for (int i = 0; i < 72; ++i) EXPECT_NEAR(y.data_as<float>()[i], want[i], 1e-5) << i;
}

// upsample_bilinear2d.vec(x [1, 1, 2, 2], None, align_corners, scale_factors): half-pixel with
// the scales [2, 2] (to [4, 4]) and align_corners without (to [3, 3]), checked by hand.
TEST(EtNnOps, UpsampleBilinearHalfPixelAndAlignCorners) {
  EtProgram p = OneMethod(
      {
          FloatTensor({1, 1, 2, 2}),  // 0 x
          EtValue{},                  // 1 None
          Bool(false),                // 2
          DoubleList({2.0, 2.0}),     // 3
          FloatTensor({1, 1, 4, 4}),  // 4 out
          Bool(true),                 // 5
          FloatTensor({1, 1, 3, 3}),  // 6 out
      },
      {0}, {4, 6}, {{"aten::upsample_bilinear2d", "vec_out"}},
      {KernelCall(0, {0, 1, 2, 3, 4, 4}), KernelCall(0, {0, 1, 5, 1, 6, 6})});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {0, 4, 8, 12};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {1, 1, 2, 2}, x.data())));
  ASSERT_OK(method->Execute());
  // Half-pixel, ratio 1/2: columns map to 0, 0.25, 0.75, 1 (clamped at 0 and at the last).
  const float* half = method->Output(0).data_as<float>();
  EXPECT_THAT(std::vector<float>(half, half + 4), ElementsAre(0, 1, 3, 4));
  EXPECT_THAT(std::vector<float>(half + 12, half + 16), ElementsAre(8, 9, 11, 12));
  EXPECT_FLOAT_EQ(half[5], 0.75f * (0.75f * 0 + 0.25f * 4) + 0.25f * (0.75f * 8 + 0.25f * 12));
  // Align corners: the middle is the mean of the four.
  const float* corners = method->Output(1).data_as<float>();
  EXPECT_THAT(std::vector<float>(corners, corners + 9), ElementsAre(0, 2, 4, 4, 6, 8, 8, 10, 12));
}

TEST(EtNnOps, AMismatchedReturnedListIsRefusedNamingTheInstruction) {
  const CnnBlock block;
  EtProgram p = block.Program();
  p.methods[0].values[19] = TensorList({16, 18, 17});
  EXPECT_THAT(MethodStatus(ThroughFile(p)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instruction 1 (aten::_native_batch_norm_legit_no_training.out): "
                                 "the returned value is value 19, not a tensor list of the "
                                 "outputs (values 16, 17, 18)")));
  EtProgram short_call = block.Program();
  short_call.methods[0].instructions[3] = KernelCall(3, {20, 22, 22, 23, 5, 24, 25, 27});
  EXPECT_THAT(MethodStatus(ThroughFile(short_call)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the call passes 8 arguments, but "
                                 "aten::max_pool2d_with_indices.out takes 6, then its 2 outputs "
                                 "and the list of them it returns")));
}

// x [2, 3, 4] -> native_layer_norm over [4] -> ln; scores = bmm(ln, k) [2, 3, 3] -> softmax over
// the last dim -> gelu (tanh approximation).
TEST(EtNnOps, ATransformerBlockRunsAgainstANaiveReference) {
  const std::vector<float> gamma = {1.0f, -0.5f, 2.0f, 0.75f};
  const std::vector<float> beta = {0.1f, 0.0f, -0.2f, 0.3f};
  const std::vector<float> k = Ramp(2 * 4 * 3, 0.2f, 0.0f);
  EtProgram p = OneMethod(
      {
          FloatTensor({2, 3, 4}),   // 0 x
          Int(4),                   // 1
          IntList({1}),             // 2 normalized_shape [4]
          Constant({4}, gamma),     // 3
          Constant({4}, beta),      // 4
          Double(1e-5),             // 5 eps
          FloatTensor({2, 3, 4}),   // 6 ln
          FloatTensor({2, 3, 1}),   // 7 mean
          FloatTensor({2, 3, 1}),   // 8 rstd
          TensorList({6, 7, 8}),    // 9 returned
          Constant({2, 4, 3}, k),   // 10 k
          FloatTensor({2, 3, 3}),   // 11 scores
          Int(-1),                  // 12 dim
          Bool(false),              // 13 half_to_float
          FloatTensor({2, 3, 3}),   // 14 probs
          testing::String("tanh"),  // 15 approximate
          FloatTensor({2, 3, 3}),   // 16 out
      },
      {0}, {16},
      {{"aten::native_layer_norm", "out"},
       {"aten::bmm", "out"},
       {"aten::_softmax", "out"},
       {"aten::gelu", "out"}},
      {
          KernelCall(0, {0, 2, 3, 4, 5, 6, 7, 8, 9}),
          KernelCall(1, {6, 10, 11, 11}),
          KernelCall(2, {11, 12, 13, 14, 14}),
          KernelCall(3, {14, 15, 16, 16}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = Ramp(24, 0.4f, 0.2f);
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3, 4}, x.data())));
  ASSERT_OK(method->Execute());
  ASSERT_THAT(method->Output(0).sizes(), ElementsAre(2, 3, 3));
  const float* out = method->Output(0).data_as<float>();
  for (int b = 0; b < 2; ++b) {
    double ln[3][4];
    for (int r = 0; r < 3; ++r) {
      const float* row = &x[(b * 3 + r) * 4];
      double mean = 0, var = 0;
      for (int j = 0; j < 4; ++j) mean += row[j] / 4.0;
      for (int j = 0; j < 4; ++j) var += (row[j] - mean) * (row[j] - mean) / 4.0;
      for (int j = 0; j < 4; ++j) {
        ln[r][j] = (row[j] - mean) / std::sqrt(var + 1e-5) * gamma[j] + beta[j];
      }
    }
    for (int r = 0; r < 3; ++r) {
      double s[3], max = -INFINITY, sum = 0;
      for (int c = 0; c < 3; ++c) {
        s[c] = 0;
        for (int j = 0; j < 4; ++j) s[c] += ln[r][j] * k[(b * 4 + j) * 3 + c];
        max = std::max(max, s[c]);
      }
      for (double& v : s) sum += std::exp(v - max);
      for (int c = 0; c < 3; ++c) {
        const double prob = std::exp(s[c] - max) / sum;
        const double gelu =
            0.5 * prob *
            (1 + std::tanh(std::sqrt(2 / M_PI) * (prob + 0.044715 * prob * prob * prob)));
        EXPECT_NEAR(out[(b * 3 + r) * 3 + c], gelu, 1e-5) << b << " " << r << " " << c;
      }
    }
  }
}

}  // namespace
}  // namespace ferry
