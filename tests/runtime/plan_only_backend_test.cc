// Plan-only stand-ins for backends nobody registered (runtime/plan_only_backend.cc): a program
// whose delegate names an unknown backend does not load, loads for planning once the stand-ins
// are registered (each missing name once, none for a registered one), and refuses to run, naming
// the backend and what to do.
#include <memory>
#include <string>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// forward(x) = npu(relu(x)), then npu again and the graph backend; "npu" is registered nowhere.
std::unique_ptr<Program> NpuProgram() {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 3});
  ValueId r = m.Op("relu", {x});
  const TensorMeta meta{DType::kFloat32, {2, 3}, {}};
  ValueId a = m.Delegate("NpuBackend", "sim:0", {1, 2, 3}, {r}, {meta})[0];
  ValueId b = m.Delegate("NpuBackend", "sim:0", {4}, {a}, {meta})[0];
  m.Output(m.GraphDelegate(std::nullopt, {b}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("neg", {in[0]})};
  })[0]);
  return std::move(Program::FromBytes(std::move(pb.Build()).value())).value();
}

TEST(PlanOnlyBackend, AnUnknownBackendIsALoadErrorUntilItsStandInIsRegistered) {
  std::unique_ptr<Program> program = NpuProgram();
  Runtime rt;
  EXPECT_THAT(rt.LoadMethod(*program, "forward"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("NpuBackend")));
  EXPECT_THAT(rt.RegisterPlanOnlyBackends(*program), ElementsAre("NpuBackend"));
  EXPECT_THAT(rt.RegisterPlanOnlyBackends(*program), IsEmpty());  // registered now
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  // Planned from what the program declares: the delegates' results are sim:0 buffers.
  EXPECT_EQ(method->plan().outputs.size(), 1u);
}

TEST(PlanOnlyBackend, APlannedCallRefusesToRunNamingTheBackend) {
  std::unique_ptr<Program> program = NpuProgram();
  Runtime rt;
  rt.RegisterPlanOnlyBackends(*program);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x(6, 1.0f);
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  EXPECT_THAT(method->Execute(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("backend \"NpuBackend\" is not registered"),
                             HasSubstr("Runtime::RegisterBackend"))));
}

}  // namespace
}  // namespace ferry
