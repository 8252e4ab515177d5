// The ExecuTorch mappings of mean and sum (loader/executorch/ops/reduce.cc): over some dims with
// keepdim and over all of them, run against values computed here; a reduction to another dtype
// refused naming the instruction.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
using ::ferry::testing::FloatTensor;
using ::ferry::testing::Int;
using ::ferry::testing::IntList;
using ::ferry::testing::KernelCall;
using ::ferry::testing::OneMethod;
using ::ferry::testing::MethodStatus;
using ::ferry::testing::StatusIs;
using ::ferry::testing::ThroughFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// x [2, 3]: rows = mean(x, [1], keepdim); all = mean(x, None).
TEST(EtReduceOps, MeanRunsAgainstANaiveReference) {
  EtProgram p = OneMethod(
      {
          FloatTensor({2, 3}),  // 0 x
          Int(1),               // 1
          IntList({1}),         // 2 [1]
          Bool(true),           // 3 keepdim
          EtValue{},            // 4 None
          FloatTensor({2, 1}),  // 5 rows
          Bool(false),          // 6
          FloatTensor({}),      // 7 all
      },
      {0}, {5, 7}, {{"aten::mean", "out"}},
      {
          KernelCall(0, {0, 2, 3, 4, 5, 5}),
          KernelCall(0, {0, 4, 6, 4, 7, 7}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 3.0f, 0.5f, 0.25f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->Execute());
  ASSERT_THAT(method->Output(0).sizes(), ElementsAre(2, 1));
  ASSERT_THAT(method->Output(1).sizes(), ElementsAre());
  double total = 0;
  for (int i = 0; i < 2; ++i) {
    double sum = 0;
    for (int k = 0; k < 3; ++k) sum += x[i * 3 + k];
    total += sum;
    EXPECT_NEAR(method->Output(0).data_as<float>()[i], sum / 3, 1e-6) << "row " << i;
  }
  EXPECT_NEAR(method->Output(1).data_as<float>()[0], total / 6, 1e-6);
}

// x [2, 3]: cols = sum(x, [0], keepdim false); all = sum(x, None).
TEST(EtReduceOps, SumRunsAgainstANaiveReference) {
  EtProgram p = OneMethod(
      {
          FloatTensor({2, 3}),  // 0 x
          Int(0),               // 1
          IntList({1}),         // 2 [0]
          Bool(false),          // 3 keepdim
          EtValue{},            // 4 None
          FloatTensor({3}),     // 5 cols
          FloatTensor({}),      // 6 all
      },
      {0}, {5, 6}, {{"aten::sum", "IntList_out"}},
      {
          KernelCall(0, {0, 2, 3, 4, 5, 5}),
          KernelCall(0, {0, 4, 3, 4, 6, 6}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 3.0f, 0.5f, 0.25f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->Execute());
  ASSERT_THAT(method->Output(0).sizes(), ElementsAre(3));
  double total = 0;
  for (int k = 0; k < 3; ++k) {
    const double col = double{x[k]} + x[3 + k];
    total += col;
    EXPECT_NEAR(method->Output(0).data_as<float>()[k], col, 1e-6) << "column " << k;
  }
  EXPECT_NEAR(method->Output(1).data_as<float>()[0], total, 1e-6);
}

TEST(EtReduceOps, AMeanToAnotherDtypeIsRefused) {
  EtProgram mean = OneMethod({FloatTensor({2}), EtValue{}, Bool(false), Int(4), FloatTensor({})},
                             {0}, {4}, {{"aten::mean", "out"}}, {KernelCall(0, {0, 1, 2, 3, 4, 4})});
  EXPECT_THAT(MethodStatus(ThroughFile(mean)),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("instruction 0 (aten::mean.out): dtype is int64; only a float32 "
                                 "mean is supported")));
}

}  // namespace
}  // namespace ferry
