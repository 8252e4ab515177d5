// The ExecuTorch importer (loader/executorch/importer.cc): each write of a value ExecuTorch reuses
// as an `out` becomes a value of its own, and instructions that read a value no one wrote or pass
// the wrong number of arguments are refused naming the instruction; a refused method leaves the
// program's others whole. The ops' own mappings are tested per family in ops/.
#include <cstdint>
#include <memory>
#include <string>
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

using ::ferry::testing::Constant;
using ::ferry::testing::FloatTensor;
using ::ferry::testing::ImportMethodStatus;
using ::ferry::testing::Int;
using ::ferry::testing::KernelCall;
using ::ferry::testing::OneMethod;
using ::ferry::testing::ReusedOut;
using ::ferry::testing::ThroughFile;
using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(EtImporter, EachWriteOfAReusedValueIsItsOwnValue) {
  ASSERT_OK_AND_ASSIGN(EtImport imported, ImportExecuTorchProgram(ReusedOut(1)));
  ASSERT_EQ(imported.methods.size(), 1u);
  const MethodDef& m = imported.methods[0];
  ASSERT_EQ(m.nodes.size(), 2u);
  const ValueId first = m.nodes[0].results[0];
  const ValueId second = m.nodes[1].results[0];
  EXPECT_NE(first, second);
  EXPECT_THAT(m.nodes[1].args, ElementsAre(first, first));
  EXPECT_THAT(m.outputs, ElementsAre(second));

  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(m));
  std::vector<float> x = {1.5f, -3.0f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2}, x.data())));
  ASSERT_OK(method->Execute());
  const float* out = method->Output(0).data_as<float>();
  EXPECT_EQ(out[0], 4 * x[0]);
  EXPECT_EQ(out[1], 4 * x[1]);
}

TEST(EtImporter, AReadBeforeAnyWriteIsRefused) {
  EtProgram p = ReusedOut(1);
  p.methods[0].inputs = {};
  EXPECT_THAT(ImportMethodStatus(p),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instruction 0 (aten::add.out): value 0 is read before any "
                                 "instruction writes it")));
}

TEST(EtImporter, AWrongArgumentCountIsRefused) {
  EtProgram p = ReusedOut(1);
  p.methods[0].instructions[0].args = {0, 0, 1, 1};
  EXPECT_THAT(ImportMethodStatus(p),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instruction 0 (aten::add.out): the call passes 4 arguments")));
}

// "bad" calls an op Ferry does not map and reads a constant of its own; "good" adds its input to a
// constant; both come from one file.
EtProgram GoodAndBad(const std::vector<float>& w, const std::vector<float>& v) {
  EtProgram p = OneMethod({FloatTensor({4}), Constant({4}, v), FloatTensor({4})}, {0}, {2},
                          {{"aten::convolution_backward", "out"}},
                          {KernelCall(0, {0, 1, 2, 2})});
  p.methods[0].name = "bad";
  EtMethod good = OneMethod({FloatTensor({4}), Constant({4}, w), Int(1), FloatTensor({4})}, {0},
                            {3}, {{"aten::add", "out"}}, {KernelCall(0, {0, 1, 2, 3, 3})})
                      .methods[0];
  good.name = "good";
  p.methods.push_back(std::move(good));
  return p;
}

TEST(EtImporter, ARefusedMethodLeavesTheOthersWhole) {
  const std::vector<float> w = {1, 2, 3, 4};
  const std::vector<float> v = {9, 9, 9, 9};
  ASSERT_OK_AND_ASSIGN(EtImport imported, ImportExecuTorchProgram(GoodAndBad(w, v)));
  EXPECT_THAT(imported.method_order, ElementsAre("bad", "good"));
  ASSERT_EQ(imported.methods.size(), 1u);
  EXPECT_EQ(imported.methods[0].name, "good");
  ASSERT_EQ(imported.refused.size(), 1u);
  EXPECT_EQ(imported.refused[0].name, "bad");
  EXPECT_THAT(imported.refused[0].status,
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("method \"bad\", instruction 0 "
                                 "(aten::convolution_backward.out)")));
  // Only the imported method's constant is copied.
  EXPECT_EQ(imported.constant_bytes, 64u);
  const ValueDef& copied = imported.methods[0].values[1];
  EXPECT_EQ(std::vector<float>(reinterpret_cast<const float*>(copied.data.data()),
                               reinterpret_cast<const float*>(copied.data.data()) + 4),
            w);
}

TEST(EtImporter, AProgramLoadsWithARefusedMethodAndRunsTheOthers) {
  const std::vector<float> w = {1, 2, 3, 4};
  const std::vector<float> v = {9, 9, 9, 9};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(GoodAndBad(w, v)));
  EXPECT_THAT(program->method_names(), ElementsAre("bad", "good"));
  EXPECT_THAT(program->method("bad").status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("method \"bad\"")));
  EXPECT_THAT(program->method("other").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"bad\", \"good\"")));
  Runtime rt;
  EXPECT_THAT(rt.LoadMethod(*program, "bad"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("(aten::convolution_backward.out)")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> good, rt.LoadMethod(*program, "good"));
  std::vector<float> x = {10, 20, 30, 40};
  ASSERT_OK(good->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  ASSERT_OK(good->Execute());
  const float* out = good->Output(0).data_as<float>();
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{11, 22, 33, 44}));
}

}  // namespace
}  // namespace ferry
