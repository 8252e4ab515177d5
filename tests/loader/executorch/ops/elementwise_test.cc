// The ExecuTorch mappings of the elementwise ops (loader/executorch/ops/elementwise.cc): add, sub,
// mul, div, relu and the unary ops (neg, abs, exp, log, sin, cos, tanh, sigmoid, silu, sqrt,
// rsqrt, gelu), clamp and hardtanh, the Scalar overloads of add, sub, mul and div, pow with a
// scalar exponent and full_like imported from a .pte file and run against values computed here in
// double; an alpha other than 1, gelu's tanh form and a clamp without bounds refused naming the
// instruction. copy and copy_ are run in index_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

using ::ferry::testing::Double;
using ::ferry::testing::FloatTensor;
using ::ferry::testing::ImportMethodStatus;
using ::ferry::testing::Int;
using ::ferry::testing::Int64Tensor;
using ::ferry::testing::KernelCall;
using ::ferry::testing::MethodStatus;
using ::ferry::testing::OneMethod;
using ::ferry::testing::ReusedOut;
using ::ferry::testing::StatusIs;
using ::ferry::testing::ThroughFile;
using ::testing::HasSubstr;

// x, y [2, 3]: a = add(x, y); s = sub(x, y); m = mul(x, y); d = div(x, y); r = relu(x).
TEST(EtElementwiseOps, AddSubMulDivReluRunAgainstANaiveReference) {
  EtProgram p = OneMethod(
      {
          FloatTensor({2, 3}),  // 0 x
          FloatTensor({2, 3}),  // 1 y
          Int(1),               // 2 alpha
          FloatTensor({2, 3}),  // 3 a
          FloatTensor({2, 3}),  // 4 s
          FloatTensor({2, 3}),  // 5 m
          FloatTensor({2, 3}),  // 6 d
          FloatTensor({2, 3}),  // 7 r
      },
      {0, 1}, {3, 4, 5, 6, 7},
      {{"aten::add", "out"},
       {"aten::sub", "out"},
       {"aten::mul", "out"},
       {"aten::div", "out"},
       {"aten::relu", "out"}},
      {
          KernelCall(0, {0, 1, 2, 3, 3}),
          KernelCall(1, {0, 1, 2, 4, 4}),
          KernelCall(2, {0, 1, 5, 5}),
          KernelCall(3, {0, 1, 6, 6}),
          KernelCall(4, {0, 7, 7}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {1.5f, -2.0f, 0.0f, 3.25f, -0.5f, 4.0f};
  std::vector<float> y = {0.5f, 4.0f, -1.0f, -2.0f, 0.25f, 3.0f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kFloat32, {2, 3}, y.data())));
  ASSERT_OK(method->Execute());
  for (int k = 0; k < 6; ++k) {
    const double a = x[k], b = y[k];
    SCOPED_TRACE(absl::StrCat("element ", k));
    EXPECT_NEAR(method->Output(0).data_as<float>()[k], a + b, 1e-6);
    EXPECT_NEAR(method->Output(1).data_as<float>()[k], a - b, 1e-6);
    EXPECT_NEAR(method->Output(2).data_as<float>()[k], a * b, 1e-6);
    EXPECT_NEAR(method->Output(3).data_as<float>()[k], a / b, 1e-6);
    EXPECT_EQ(method->Output(4).data_as<float>()[k], a > 0 ? a : 0.0);
  }
}

// x [2, 3] and p [2, 3] > 0: each unary op once, log, sqrt and rsqrt of p, the others of x.
TEST(EtElementwiseOps, UnaryOpsRunAgainstANaiveReference) {
  struct Unary {
    const char* name;
    bool positive;  // reads p
    double (*reference)(double);
  };
  const Unary ops[] = {
      {"neg", false, [](double v) { return -v; }},
      {"abs", false, [](double v) { return std::fabs(v); }},
      {"exp", false, [](double v) { return std::exp(v); }},
      {"log", true, [](double v) { return std::log(v); }},
      {"sin", false, [](double v) { return std::sin(v); }},
      {"cos", false, [](double v) { return std::cos(v); }},
      {"tanh", false, [](double v) { return std::tanh(v); }},
      {"sigmoid", false, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"silu", false, [](double v) { return v / (1 + std::exp(-v)); }},
      {"sqrt", true, [](double v) { return std::sqrt(v); }},
      {"rsqrt", true, [](double v) { return 1 / std::sqrt(v); }},
      {"floor", false, [](double v) { return std::floor(v); }},
      {"ceil", false, [](double v) { return std::ceil(v); }},
      {"gelu", false, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"hardswish", false, [](double v) { return v * std::clamp(v + 3, 0.0, 6.0) / 6; }},
      {"hardsigmoid", false, [](double v) { return std::clamp(v + 3, 0.0, 6.0) / 6; }},
  };
  EtValue none;
  none.kind = EtValueKind::kString;
  none.string_value = "none";
  std::vector<EtValue> values = {FloatTensor({2, 3}), FloatTensor({2, 3}), none};
  std::vector<EtOperator> operators;
  std::vector<EtInstruction> calls;
  std::vector<int32_t> outputs;
  for (int32_t i = 0; i < static_cast<int32_t>(std::size(ops)); ++i) {
    const int32_t out = static_cast<int32_t>(values.size());
    values.push_back(FloatTensor({2, 3}));
    operators.push_back({absl::StrCat("aten::", ops[i].name), "out"});
    const int32_t self = ops[i].positive ? 1 : 0;
    calls.push_back(std::string(ops[i].name) == "gelu" ? KernelCall(i, {self, 2, out, out})
                                                       : KernelCall(i, {self, out, out}));
    outputs.push_back(out);
  }
  EtProgram p = OneMethod(values, {0, 1}, outputs, operators, calls);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {-2.5f, -0.75f, 0.0f, 0.3f, 1.25f, 3.0f};
  std::vector<float> pos = {0.01f, 0.5f, 1.0f, 2.0f, 7.5f, 100.0f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kFloat32, {2, 3}, pos.data())));
  ASSERT_OK(method->Execute());
  for (size_t i = 0; i < std::size(ops); ++i) {
    const float* got = method->Output(i).data_as<float>();
    for (int k = 0; k < 6; ++k) {
      const double want = ops[i].reference(ops[i].positive ? pos[k] : x[k]);
      EXPECT_NEAR(got[k], want, 1e-5 * std::max(1.0, std::fabs(want)))
          << ops[i].name << ", element " << k;
    }
  }
}

// x [4]: l = leaky_relu(x, 0.2); e = elu(x, 1.5, 2, 0.5).
TEST(EtElementwiseOps, LeakyReluAndEluRunAgainstTheirDefinitions) {
  EtProgram p = OneMethod({FloatTensor({4}), Double(0.2), FloatTensor({4}), Double(1.5), Int(2),
                           Double(0.5), FloatTensor({4})},
                          {0}, {2, 6}, {{"aten::leaky_relu", "out"}, {"aten::elu", "out"}},
                          {KernelCall(0, {0, 1, 2, 2}), KernelCall(1, {0, 3, 4, 5, 6, 6})});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {-2.0f, -0.5f, 0.0f, 1.5f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  ASSERT_OK(method->Execute());
  for (int k = 0; k < 4; ++k) {
    const double v = x[k];
    EXPECT_NEAR(method->Output(0).data_as<float>()[k], v > 0 ? v : 0.2 * v, 1e-6) << k;
    EXPECT_NEAR(method->Output(1).data_as<float>()[k], v > 0 ? 2 * v : 3 * (std::exp(v / 2) - 1),
                1e-5)
        << k;
  }
}

TEST(EtElementwiseOps, GeluApproximationsOtherThanNoneAndTanhAreRefused) {
  EtValue fast;
  fast.kind = EtValueKind::kString;
  fast.string_value = "fast";
  EtProgram p = OneMethod({FloatTensor({2}), fast, FloatTensor({2})}, {0}, {2},
                          {{"aten::gelu", "out"}}, {KernelCall(0, {0, 1, 2, 2})});
  EXPECT_THAT(MethodStatus(ThroughFile(p)),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("instruction 0 (aten::gelu.out): approximate is \"fast\"; only "
                                 "\"none\" and \"tanh\" are supported")));
  p.methods[0].values[1] = Int(0);
  EXPECT_THAT(MethodStatus(ThroughFile(p)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("approximate is a value of kind int, not a string")));
}

// x [6]: lo = clamp(x, None, 0.5); both = clamp(x, -1, 2); ht = hardtanh(x, -1, 1).
TEST(EtElementwiseOps, ClampAndHardtanhRunAgainstANaiveReference) {
  EtProgram p = OneMethod(
      {
          FloatTensor({6}),  // 0 x
          EtValue{},         // 1 None
          Double(0.5),       // 2
          Int(-1),           // 3
          Int(2),            // 4
          Int(1),            // 5
          FloatTensor({6}),  // 6 lo
          FloatTensor({6}),  // 7 both
          FloatTensor({6}),  // 8 ht
      },
      {0}, {6, 7, 8}, {{"aten::clamp", "out"}, {"aten::hardtanh", "out"}},
      {
          KernelCall(0, {0, 1, 2, 6, 6}),
          KernelCall(0, {0, 3, 4, 7, 7}),
          KernelCall(1, {0, 3, 5, 8, 8}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {-3.0f, -1.5f, -0.25f, 0.75f, 1.5f, 2.5f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {6}, x.data())));
  ASSERT_OK(method->Execute());
  for (int k = 0; k < 6; ++k) {
    const double v = x[k];
    EXPECT_EQ(method->Output(0).data_as<float>()[k], std::min(v, 0.5)) << k;
    EXPECT_EQ(method->Output(1).data_as<float>()[k], std::min(std::max(v, -1.0), 2.0)) << k;
    EXPECT_EQ(method->Output(2).data_as<float>()[k], std::min(std::max(v, -1.0), 1.0)) << k;
  }
}

// x [2, 3]: add/sub/mul/div with a number, pow(x, 2) and pow(x, 0.5) of |x|, full_like(x, 1.5)
// and full_like to int64 (out's dtype).
TEST(EtElementwiseOps, ScalarOverloadsPowAndFullLikeRunAgainstANaiveReference) {
  EtProgram p = OneMethod(
      {
          FloatTensor({2, 3}),  // 0 x
          Double(0.5),          // 1
          Int(1),               // 2 alpha
          Int(3),               // 3
          FloatTensor({2, 3}),  // 4 x + 0.5
          FloatTensor({2, 3}),  // 5 x - 3
          FloatTensor({2, 3}),  // 6 x * 3
          FloatTensor({2, 3}),  // 7 x / 0.5
          Int(2),               // 8
          FloatTensor({2, 3}),  // 9 x ** 2
          FloatTensor({2, 3}),  // 10 |x|
          FloatTensor({2, 3}),  // 11 |x| ** 0.5
          Double(1.5),          // 12
          EtValue{},            // 13 memory_format None
          FloatTensor({2, 3}),  // 14 full_like 1.5
          Int64Tensor({2, 3}),  // 15 full_like 3 as int64
      },
      {0}, {4, 5, 6, 7, 9, 11, 14, 15},
      {{"aten::add", "Scalar_out"},
       {"aten::sub", "Scalar_out"},
       {"aten::mul", "Scalar_out"},
       {"aten::div", "Scalar_out"},
       {"aten::pow", "Tensor_Scalar_out"},
       {"aten::abs", "out"},
       {"aten::full_like", "out"}},
      {
          KernelCall(0, {0, 1, 2, 4, 4}),
          KernelCall(1, {0, 3, 2, 5, 5}),
          KernelCall(2, {0, 3, 6, 6}),
          KernelCall(3, {0, 1, 7, 7}),
          KernelCall(4, {0, 8, 9, 9}),
          KernelCall(5, {0, 10, 10}),
          KernelCall(4, {10, 1, 11, 11}),
          KernelCall(6, {0, 12, 13, 14, 14}),
          KernelCall(6, {0, 3, 13, 15, 15}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {1.5f, -2.0f, 0.0f, 3.25f, -0.5f, 4.0f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->Execute());
  for (int k = 0; k < 6; ++k) {
    const double v = x[k];
    SCOPED_TRACE(absl::StrCat("element ", k));
    EXPECT_NEAR(method->Output(0).data_as<float>()[k], v + 0.5, 1e-6);
    EXPECT_NEAR(method->Output(1).data_as<float>()[k], v - 3, 1e-6);
    EXPECT_NEAR(method->Output(2).data_as<float>()[k], v * 3, 1e-6);
    EXPECT_NEAR(method->Output(3).data_as<float>()[k], v / 0.5, 1e-6);
    EXPECT_NEAR(method->Output(4).data_as<float>()[k], v * v, 1e-6);
    EXPECT_NEAR(method->Output(5).data_as<float>()[k], std::sqrt(std::fabs(v)), 1e-6);
    EXPECT_EQ(method->Output(6).data_as<float>()[k], 1.5f);
    EXPECT_EQ(method->Output(7).data_as<int64_t>()[k], 3);
  }
  EXPECT_EQ(method->Output(7).dtype(), DType::kInt64);
}

// x [2, 3]: zeros_like(x) and ones_like(x) as int64 (out's dtype), whatever x holds.
TEST(EtElementwiseOps, ZerosLikeAndOnesLikeFillOutsShapeAndDType) {
  EtProgram p =
      OneMethod({FloatTensor({2, 3}), EtValue{}, FloatTensor({2, 3}), Int64Tensor({2, 3})}, {0},
                {2, 3}, {{"aten::zeros_like", "out"}, {"aten::ones_like", "out"}},
                {KernelCall(0, {0, 1, 2, 2}), KernelCall(1, {0, 1, 3, 3})});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {1.5f, -2.0f, 0.0f, 3.25f, -0.5f, 4.0f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->Execute());
  ASSERT_EQ(method->Output(1).dtype(), DType::kInt64);
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(method->Output(0).data_as<float>()[k], 0.0f) << k;
    EXPECT_EQ(method->Output(1).data_as<int64_t>()[k], 1) << k;
  }
}

TEST(EtElementwiseOps, ClampWithoutBoundsIsRefused) {
  EtProgram p = OneMethod({FloatTensor({2}), EtValue{}, FloatTensor({2})}, {0}, {2},
                          {{"aten::clamp", "out"}}, {KernelCall(0, {0, 1, 1, 2, 2})});
  EXPECT_THAT(MethodStatus(ThroughFile(p)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instruction 0 (aten::clamp.out): min and max are both None")));
}

TEST(EtElementwiseOps, AlphaOtherThanOneIsRefused) {
  EXPECT_THAT(ImportMethodStatus(ReusedOut(2)),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("method \"forward\", instruction 0 (aten::add.out): alpha is 2; "
                                 "only alpha = 1 is supported")));
  EtProgram sub = ReusedOut(1);
  sub.methods[0].operators = {{"aten::sub", "out"}};
  sub.methods[0].values[2] = Int(2);
  EXPECT_THAT(MethodStatus(ThroughFile(sub)),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("method \"forward\", instruction 0 (aten::sub.out): alpha is 2; "
                                 "only alpha = 1 is supported")));
}

}  // namespace
}  // namespace ferry
