// Method loading as a whole (runtime/method_loader.cc runs the phases of runtime/load/): a load
// records how long placement and materialization took, an error in any phase is returned as the
// load's status, and the runtime loads the same method again afterwards.
#include <memory>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<Program> ReluChain(int n) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId v = m.Input("x", DType::kFloat32, {64});
  for (int i = 0; i < n; ++i) v = m.Op("relu", {v});
  m.Output(v);
  return std::move(Program::FromBytes(std::move(pb.Build()).value())).value();
}

TEST(MethodLoader, ALoadRecordsItsTimings) {
  std::unique_ptr<Program> program = ReluChain(200);
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  const LoadTimings& t = method->plan().timings;
  EXPECT_GT(t.placement_us, 0);
  EXPECT_GE(t.planning_us, 0);
  EXPECT_GT(t.materialization_us, 0);
}

TEST(MethodLoader, APhasesErrorIsTheLoadsAndTheRuntimeLoadsAgain) {
  std::unique_ptr<Program> program = ReluChain(3);
  Runtime rt;
  // Phase 6 (CheckBudgets) refuses a host arena over the caller's limit.
  LoadOptions tight;
  tight.memory_limits[Device::Host()] = 16;
  EXPECT_THAT(rt.LoadMethod(*program, "forward", tight),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("method \"forward\"")));
  // Phase 0 (CheckTableMemory) refuses tables over the caller's limit.
  LoadOptions no_tables;
  no_tables.table_memory_limit_bytes = 1;
  EXPECT_THAT(rt.LoadMethod(*program, "forward", no_tables),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("of tables")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x(64, -1.0f);
  x[5] = 2.5f;
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {64}, x.data())));
  ASSERT_OK(method->Execute());
  EXPECT_EQ(method->Output(0).data_as<float>()[5], 2.5f);
  EXPECT_EQ(method->Output(0).data_as<float>()[0], 0.0f);
}

}  // namespace
}  // namespace ferry
