// The ExecuTorch importer (loader/executorch/importer.cc): each write of a value ExecuTorch reuses
// as an `out` becomes a value of its own, and instructions that read a value no one wrote or pass
// the wrong number of arguments are refused naming the instruction. The ops' own mappings are
// tested per family in ops/.
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
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ReusedOut;
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
  EXPECT_THAT(ImportExecuTorchProgram(p),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instruction 0 (aten::add.out): value 0 is read before any "
                                 "instruction writes it")));
}

TEST(EtImporter, AWrongArgumentCountIsRefused) {
  EtProgram p = ReusedOut(1);
  p.methods[0].instructions[0].args = {0, 0, 1, 1};
  EXPECT_THAT(ImportExecuTorchProgram(p),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instruction 0 (aten::add.out): the call passes 4 arguments")));
}

}  // namespace
}  // namespace ferry
