// The ExecuTorch mappings of the dtype ops (loader/executorch/ops/dtype.cc): eq.Scalar and where,
// and _to_dim_order_copy as a cast between float32, int32 and bool, run against values computed
// here, and the narrower, unsigned and 16-bit float dtypes ExecuTorch writes read, cast and
// carried; a bool tensor handed to an op that does not take bool refused at load naming the
// instruction.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
using ::ferry::testing::BoolTensor;
using ::ferry::testing::Double;
using ::ferry::testing::FloatTensor;
using ::ferry::testing::Int;
using ::ferry::testing::Int32Tensor;
using ::ferry::testing::KernelCall;
using ::ferry::testing::MethodStatus;
using ::ferry::testing::OneMethod;
using ::ferry::testing::StatusIs;
using ::ferry::testing::TensorOf;
using ::ferry::testing::ThroughFile;
using ::testing::AllOf;
using ::testing::HasSubstr;

// x, y [2, 3]: hit = eq.Scalar(x, 0.5); w = where(hit, y, x).
TEST(EtDTypeOps, EqAndWhereRunAgainstANaiveReference) {
  EtProgram p = OneMethod(
      {
          FloatTensor({2, 3}),  // 0 x
          FloatTensor({2, 3}),  // 1 y
          Double(0.5),          // 2
          BoolTensor({2, 3}),   // 3 hit
          FloatTensor({2, 3}),  // 4 w
      },
      {0, 1}, {3, 4}, {{"aten::eq", "Scalar_out"}, {"aten::where", "self_out"}},
      {
          KernelCall(0, {0, 2, 3, 3}),
          KernelCall(1, {3, 1, 0, 4, 4}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 3.0f, 0.5f, 0.5f};
  std::vector<float> y = {10, 20, 30, 40, 50, 60};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kFloat32, {2, 3}, y.data())));
  ASSERT_OK(method->Execute());
  ASSERT_EQ(method->Output(0).dtype(), DType::kBool);
  const uint8_t* hit = method->Output(0).data_as<uint8_t>();
  const float* w = method->Output(1).data_as<float>();
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(hit[k], x[k] == 0.5f ? 1 : 0) << k;
    EXPECT_EQ(w[k], x[k] == 0.5f ? y[k] : x[k]) << k;
  }
}

// x, y [2, 3]: each comparison of x with y (Tensor) and with 0.5 (Scalar), as bool outputs.
TEST(EtDTypeOps, ComparisonsRunAgainstTheirDefinitions) {
  const char* names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  std::vector<EtValue> values = {FloatTensor({2, 3}), FloatTensor({2, 3}), Double(0.5)};
  std::vector<EtOperator> operators;
  std::vector<EtInstruction> calls;
  std::vector<int32_t> outputs;
  for (const char* name : names) {
    for (bool tensor : {true, false}) {
      const int32_t op = static_cast<int32_t>(operators.size());
      const int32_t out = static_cast<int32_t>(values.size());
      values.push_back(BoolTensor({2, 3}));
      operators.push_back({absl::StrCat("aten::", name), tensor ? "Tensor_out" : "Scalar_out"});
      calls.push_back(KernelCall(op, {0, tensor ? 1 : 2, out, out}));
      outputs.push_back(out);
    }
  }
  EtProgram p = OneMethod(values, {0, 1}, outputs, operators, calls);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 3.0f, 0.5f, 0.25f};
  std::vector<float> y = {0.5f, 1.0f, 2.0f, -3.0f, 0.75f, 0.25f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kFloat32, {2, 3}, y.data())));
  ASSERT_OK(method->Execute());
  const auto ref = [](int c, double a, double b) {
    switch (c) {
      case 0:
        return a == b;
      case 1:
        return a != b;
      case 2:
        return a < b;
      case 3:
        return a <= b;
      case 4:
        return a > b;
      default:
        return a >= b;
    }
  };
  for (int c = 0; c < 6; ++c) {
    for (int t = 0; t < 2; ++t) {
      const uint8_t* got = method->Output(c * 2 + t).data_as<uint8_t>();
      for (int k = 0; k < 6; ++k) {
        EXPECT_EQ(got[k], ref(c, x[k], t == 0 ? y[k] : 0.5) ? 1 : 0)
            << names[c] << (t == 0 ? ".Tensor" : ".Scalar") << " element " << k;
      }
    }
  }
}

// ExecuTorch's ScalarType numbers for the dtypes read here.
constexpr int8_t kEtUInt8 = 0, kEtInt8 = 1, kEtInt16 = 2, kEtHalf = 5, kEtDouble = 7,
                 kEtBFloat16 = 15, kEtUInt16 = 27;

// h float16 [3] and q uint8 [3] inputs: f = h as float32; d = f as float64; c = clone(q); u =
// q as uint16; b = f as bfloat16; s = q as int16; i = q as int8 (wrapping above 127).
TEST(EtDTypeOps, NarrowAndSixteenBitFloatDTypesAreReadCastAndCarried) {
  EtProgram p = OneMethod(
      {
          TensorOf(kEtHalf, DType::kFloat16, 2, {3}),       // 0 h
          TensorOf(kEtUInt8, DType::kUInt8, 1, {3}),        // 1 q
          Bool(false),                                      // 2 non_blocking
          EtValue{},                                        // 3 None dim_order
          FloatTensor({3}),                                 // 4 f
          TensorOf(kEtDouble, DType::kFloat64, 8, {3}),     // 5 d
          TensorOf(kEtUInt8, DType::kUInt8, 1, {3}),        // 6 c
          TensorOf(kEtUInt16, DType::kUInt16, 2, {3}),      // 7 u
          TensorOf(kEtBFloat16, DType::kBFloat16, 2, {3}),  // 8 b
          TensorOf(kEtInt16, DType::kInt16, 2, {3}),        // 9 s
          TensorOf(kEtInt8, DType::kInt8, 1, {3}),          // 10 i
      },
      {0, 1}, {4, 5, 6, 7, 8, 9, 10},
      {{"dim_order_ops::_to_dim_order_copy", "out"}, {"aten::clone", "out"}},
      {
          KernelCall(0, {0, 2, 3, 4, 4}),
          KernelCall(0, {4, 2, 3, 5, 5}),
          KernelCall(1, {1, 3, 6, 6}),
          KernelCall(0, {1, 2, 3, 7, 7}),
          KernelCall(0, {4, 2, 3, 8, 8}),
          KernelCall(0, {1, 2, 3, 9, 9}),
          KernelCall(0, {1, 2, 3, 10, 10}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  EXPECT_EQ(method->plan().inputs[0].dtype, DType::kFloat16);
  EXPECT_EQ(method->plan().inputs[0].bytes, 6u);
  // float16 1.5 (0x3E00), -0.25 (0xB400), 65504 (0x7BFF, the largest finite).
  std::vector<uint16_t> h = {0x3E00, 0xB400, 0x7BFF};
  std::vector<uint8_t> q = {7, 200, 255};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat16, {3}, h.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kUInt8, {3}, q.data())));
  ASSERT_OK(method->Execute());
  const std::vector<double> halves = {1.5, -0.25, 65504};
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(method->Output(0).data_as<float>()[k], halves[k]);
    EXPECT_EQ(method->Output(1).data_as<double>()[k], halves[k]);
    EXPECT_EQ(method->Output(2).data_as<uint8_t>()[k], q[k]);
    EXPECT_EQ(method->Output(3).data_as<uint16_t>()[k], q[k]);
    EXPECT_EQ(method->Output(5).data_as<int16_t>()[k], q[k]);
  }
  // bfloat16 of 1.5, -0.25 and 65504 (65504 = 1.9990234375 * 2^15 rounds to 2^16 = 0x4780).
  const uint16_t* b = method->Output(4).data_as<uint16_t>();
  EXPECT_EQ(b[0], 0x3FC0);
  EXPECT_EQ(b[1], 0xBE80);
  EXPECT_EQ(b[2], 0x4780);
  const int8_t* i = method->Output(6).data_as<int8_t>();
  EXPECT_EQ(i[0], 7);
  EXPECT_EQ(i[1], 200 - 256);
  EXPECT_EQ(i[2], -1);
}

// x float32 [4]: i = x as int32; b = i as bool; f = b as float32; n = eq.Scalar(i, -2) as float32.
TEST(EtDTypeOps, CastsOfComputedTensorsRun) {
  EtProgram p = OneMethod(
      {
          FloatTensor({4}),   // 0 x
          Bool(false),        // 1 non_blocking
          EtValue{},          // 2 None dim_order
          Int32Tensor({4}),   // 3 i
          BoolTensor({4}),    // 4 b
          FloatTensor({4}),   // 5 f
          Int(-2),            // 6
          BoolTensor({4}),    // 7 eq
          FloatTensor({4}),   // 8 n
      },
      {0}, {3, 5, 8},
      {{"dim_order_ops::_to_dim_order_copy", "out"}, {"aten::eq", "Scalar_out"}},
      {
          KernelCall(0, {0, 1, 2, 3, 3}),
          KernelCall(0, {3, 1, 2, 4, 4}),
          KernelCall(0, {4, 1, 2, 5, 5}),
          KernelCall(1, {3, 6, 7, 7}),
          KernelCall(0, {7, 1, 2, 8, 8}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {-2.75f, 0.5f, 3.25f, -0.25f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  ASSERT_OK(method->Execute());
  ASSERT_EQ(method->Output(0).dtype(), DType::kInt32);
  const int32_t* i = method->Output(0).data_as<int32_t>();
  const float* f = method->Output(1).data_as<float>();
  const float* n = method->Output(2).data_as<float>();
  for (int k = 0; k < 4; ++k) {
    const int32_t truncated = static_cast<int32_t>(std::trunc(x[k]));
    EXPECT_EQ(i[k], truncated) << k;
    EXPECT_EQ(f[k], truncated != 0 ? 1.0f : 0.0f) << k;
    EXPECT_EQ(n[k], truncated == -2 ? 1.0f : 0.0f) << k;
  }
}

TEST(EtDTypeOps, OpsThatDoNotTakeBoolAreRefusedAtLoad) {
  // hit = eq.Scalar(x, 1); y = add(hit, hit): add takes float32 and int64 only.
  EtProgram p = OneMethod(
      {FloatTensor({2}), Int(1), BoolTensor({2}), BoolTensor({2})}, {0}, {3},
      {{"aten::eq", "Scalar_out"}, {"aten::add", "out"}},
      {KernelCall(0, {0, 1, 2, 2}), KernelCall(1, {2, 2, 1, 3, 3})});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  EXPECT_THAT(rt.LoadMethod(*program, "forward"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("aten::add.out (instruction 1)"),
                             HasSubstr("add: argument 0 has dtype bool, which add does not "
                                       "support"))));
}

// x float32 [4] -> quantize_per_tensor.out(x, 0.5, 3, -128, 127, int8) -> q int8 ->
// dequantize_per_tensor.out(q, 0.5, 3, -128, 127, int8, None) -> y float32; and the .Tensor_out
// forms with scale (float64 [1]) and zero point (int64 [1]) inputs.
TEST(EtDTypeOps, QuantizeAndDequantizePerTensorRunAgainstHandCheckedValues) {
  EtProgram p = OneMethod(
      {
          FloatTensor({4}),                              // 0 x
          Double(0.5),                                   // 1 scale
          Int(3),                                        // 2 zero_point
          Int(-128),                                     // 3
          Int(127),                                      // 4
          Int(kEtInt8),                                  // 5 dtype
          TensorOf(kEtInt8, DType::kInt8, 1, {4}),       // 6 q
          EtValue{},                                     // 7 out_dtype None
          FloatTensor({4}),                              // 8 y
          TensorOf(kEtDouble, DType::kFloat64, 8, {1}),  // 9 scale tensor
          TensorOf(4, DType::kInt64, 8, {1}),            // 10 zero point tensor
          TensorOf(kEtInt8, DType::kInt8, 1, {4}),       // 11 qt
          FloatTensor({4}),                              // 12 yt
      },
      {0, 9, 10}, {6, 8, 11, 12},
      {{"quantized_decomposed::quantize_per_tensor", "out"},
       {"quantized_decomposed::dequantize_per_tensor", "out"},
       {"quantized_decomposed::quantize_per_tensor", "Tensor_out"},
       {"quantized_decomposed::dequantize_per_tensor", "Tensor_out"}},
      {
          KernelCall(0, {0, 1, 2, 3, 4, 5, 6, 6}),
          KernelCall(1, {6, 1, 2, 3, 4, 5, 7, 8, 8}),
          KernelCall(2, {0, 9, 10, 3, 4, 5, 11, 11}),
          KernelCall(3, {11, 9, 10, 3, 4, 5, 7, 12, 12}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  // x * 2 + 3, rounded half to even and clamped: 1 -> 5, -1.26 -> 0, 100 -> 127, 0.25 -> 3.
  std::vector<float> x = {1.0f, -1.26f, 100.0f, 0.25f};
  std::vector<double> scale = {0.5};
  std::vector<int64_t> zp = {3};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kFloat64, {1}, scale.data())));
  ASSERT_OK(method->SetInput(2, TensorView::Host(DType::kInt64, {1}, zp.data())));
  ASSERT_OK(method->Execute());
  const int8_t want_q[] = {5, 0, 127, 3};
  const float want_y[] = {1.0f, -1.5f, 62.0f, 0.0f};  // (q - 3) * 0.5
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(method->Output(0).data_as<int8_t>()[k], want_q[k]);
    EXPECT_EQ(method->Output(1).data_as<float>()[k], want_y[k]);
    EXPECT_EQ(method->Output(2).data_as<int8_t>()[k], want_q[k]);
    EXPECT_EQ(method->Output(3).data_as<float>()[k], want_y[k]);
  }
  // A dtype argument that is not out's dtype.
  EtProgram mismatched = p;
  mismatched.methods[0].values[5] = Int(kEtUInt8);
  EXPECT_THAT(MethodStatus(ThroughFile(mismatched)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instruction 0 (quantized_decomposed::quantize_per_tensor.out): "
                                 "dtype is uint8, but out is int8")));
}

}  // namespace
}  // namespace ferry
