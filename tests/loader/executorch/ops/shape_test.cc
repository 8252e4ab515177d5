// The ExecuTorch mappings of the shape ops (loader/executorch/ops/shape.cc): the view ops that
// ExecuTorch copies (expand, slice, squeeze, unsqueeze) each make a fresh tensor, and cat; run
// against values computed here.
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
using ::ferry::testing::Double;
using ::ferry::testing::FloatTensor;
using ::ferry::testing::Int;
using ::ferry::testing::IntList;
using ::ferry::testing::KernelCall;
using ::ferry::testing::OneMethod;
using ::ferry::testing::ProducerOp;
using ::ferry::testing::StatusIs;
using ::ferry::testing::TensorList;
using ::ferry::testing::ThroughFile;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// x [2, 1, 3]:
//   e = expand_copy(x, [2, 4, 3]);  s = slice_copy(e, 1, 1, None, 2)       -> [2, 2, 3]
//   q = squeeze_copy.dim(x, 1)      -> [2, 3];  u = unsqueeze_copy(q, 0)  -> [1, 2, 3]
//   r = squeeze_copy.dims(u, [0, -2]) -> [2, 3] (dim -2 has size 2 and stays)
//   c = cat([q, r], 0)              -> [4, 3]
TEST(EtShapeOps, CopiedViewsAndCatRunAgainstANaiveReference) {
  EtProgram p = OneMethod(
      {
          FloatTensor({2, 1, 3}),  // 0 x
          Int(2), Int(4), Int(3),  // 1..3
          IntList({1, 2, 3}),      // 4 [2, 4, 3]
          Int(-1),                 // 5
          Int(0),                  // 6
          FloatTensor({2, 4, 3}),  // 7 e
          Int(1),                  // 8
          EtValue{},               // 9 None
          FloatTensor({2, 2, 3}),  // 10 s
          FloatTensor({2, 3}),     // 11 q
          FloatTensor({1, 2, 3}),  // 12 u
          Int(-2),                 // 13
          IntList({6, 13}),        // 14 [0, -2]
          FloatTensor({2, 3}),     // 15 r
          TensorList({11, 15}),    // 16
          FloatTensor({4, 3}),     // 17 c
          Bool(false),             // 18 implicit
      },
      {0}, {10, 12, 17},
      {{"aten::expand_copy", "out"},
       {"aten::slice_copy", "Tensor_out"},
       {"aten::squeeze_copy", "dim_out"},
       {"aten::unsqueeze_copy", "out"},
       {"aten::squeeze_copy", "dims_out"},
       {"aten::cat", "out"}},
      {
          KernelCall(0, {0, 4, 18, 7, 7}),
          KernelCall(1, {7, 8, 8, 9, 1, 10, 10}),
          KernelCall(2, {0, 8, 11, 11}),
          KernelCall(3, {11, 6, 12, 12}),
          KernelCall(4, {12, 14, 15, 15}),
          KernelCall(5, {16, 6, 17, 17}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  ASSERT_OK_AND_ASSIGN(const MethodDef* def_ptr, program->method("forward"));
  const MethodDef& def = *def_ptr;
  // Every result is a fresh tensor, never a view of its argument.
  EXPECT_EQ(ProducerOp(def, def.outputs[0]), "clone");
  EXPECT_EQ(ProducerOp(def, def.outputs[1]), "clone");
  EXPECT_EQ(ProducerOp(def, def.outputs[2]), "cat");
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {1.5f, -2.0f, 0.25f, 4.0f, -0.5f, 3.0f};  // x[i][0][k] = x[i * 3 + k]
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 1, 3}, x.data())));
  ASSERT_OK(method->Execute());
  const TensorView s = method->Output(0);
  const TensorView u = method->Output(1);
  const TensorView c = method->Output(2);
  ASSERT_THAT(s.sizes(), ElementsAre(2, 2, 3));
  ASSERT_THAT(u.sizes(), ElementsAre(1, 2, 3));
  ASSERT_THAT(c.sizes(), ElementsAre(4, 3));
  EXPECT_NE(s.data(), static_cast<void*>(x.data()));
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 3; ++k) {
      const float want = x[i * 3 + k];
      // s[i][j][k] = e[i][1 + 2j][k] = x[i][0][k].
      EXPECT_EQ(s.data_as<float>()[(i * 2 + 0) * 3 + k], want);
      EXPECT_EQ(s.data_as<float>()[(i * 2 + 1) * 3 + k], want);
      EXPECT_EQ(u.data_as<float>()[i * 3 + k], want);
      EXPECT_EQ(c.data_as<float>()[i * 3 + k], want);
      EXPECT_EQ(c.data_as<float>()[(2 + i) * 3 + k], want);
    }
  }
}

// constant_pad_nd(x [2, 3], [1, 0, -1, 1], 0.5): one column before the last dim, the first row
// cropped and one appended: [2, 4].
TEST(EtShapeOps, ConstantPadNdPadsAndCrops) {
  EtProgram p =
      OneMethod({FloatTensor({2, 3}), IntList({2, 3, 4, 2}), Int(1), Int(0), Int(-1), Double(0.5),
                 FloatTensor({2, 4})},
                {0}, {6}, {{"aten::constant_pad_nd", "out"}}, {KernelCall(0, {0, 1, 5, 6, 6})});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->Execute());
  const TensorView y = method->Output(0);
  ASSERT_THAT(y.sizes(), ElementsAre(2, 4));
  const float* d = y.data_as<float>();
  EXPECT_THAT(std::vector<float>(d, d + 8), ElementsAre(0.5f, 4, 5, 6, 0.5f, 0.5f, 0.5f, 0.5f));
}

// x [2, 3, 4]: a = select_copy(x, 1, -1) [2, 4]; b = select_copy(x, 0, 1) [3, 4].
TEST(EtShapeOps, SelectCopyRunsAgainstTheIndexedElements) {
  EtProgram p = OneMethod(
      {FloatTensor({2, 3, 4}), Int(1), Int(-1), FloatTensor({2, 4}), Int(0), FloatTensor({3, 4})},
      {0}, {3, 5}, {{"aten::select_copy", "int_out"}},
      {KernelCall(0, {0, 1, 2, 3, 3}), KernelCall(0, {0, 4, 1, 5, 5})});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i) * 0.5f - 3.0f;
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3, 4}, x.data())));
  ASSERT_OK(method->Execute());
  const float* a = method->Output(0).data_as<float>();
  const float* b = method->Output(1).data_as<float>();
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 4; ++k) EXPECT_EQ(a[i * 4 + k], x[(i * 3 + 2) * 4 + k]) << i << k;
  }
  for (int j = 0; j < 3; ++j) {
    for (int k = 0; k < 4; ++k) EXPECT_EQ(b[j * 4 + k], x[(3 + j) * 4 + k]) << j << k;
  }
  // An index past the dim is refused when the method loads, naming the node.
  EtProgram out_of_range = p;
  out_of_range.methods[0].values[2] = Int(3);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> bad, ThroughFile(out_of_range));
  EXPECT_THAT(rt.LoadMethod(*bad, "forward").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("aten::select_copy.int_out (instruction 0)"),
                             HasSubstr("index 3) is out of range for dim 1 of size 3"))));
}

}  // namespace
}  // namespace ferry
