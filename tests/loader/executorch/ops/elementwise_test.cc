// The ExecuTorch mappings of the elementwise ops (loader/executorch/ops/elementwise.cc): add, sub,
// mul, div and relu imported from a .pte file and run against values computed here; an alpha
// other than 1 refused naming the instruction. copy and copy_ are run in index_test.cc.
#include <cstdint>
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

using ::ferry::testing::FloatTensor;
using ::ferry::testing::Int;
using ::ferry::testing::KernelCall;
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
      {{"aten::add", "out"}, {"aten::sub", "out"}, {"aten::mul", "out"}, {"aten::div", "out"},
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

TEST(EtElementwiseOps, AlphaOtherThanOneIsRefused) {
  EXPECT_THAT(ImportExecuTorchProgram(ReusedOut(2)),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("method \"forward\", instruction 0 (aten::add.out): alpha is 2; "
                                 "only alpha = 1 is supported")));
  EtProgram sub = ReusedOut(1);
  sub.methods[0].operators = {{"aten::sub", "out"}};
  sub.methods[0].values[2] = Int(2);
  EXPECT_THAT(ThroughFile(sub),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("method \"forward\", instruction 0 (aten::sub.out): alpha is 2; "
                                 "only alpha = 1 is supported")));
}

}  // namespace
}  // namespace ferry
