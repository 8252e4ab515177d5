// Load phases 10 and 11 (runtime/load/build_steps.cc): the steps a call runs copy a delegate's
// arguments to its device and its result back once per call, in an order that lets the host read
// the device's result; and the caller's description of inputs and outputs names each with its
// dtype, shape and device.
#include <memory>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

// forward(a, b) = neg(add(a, b) on sim:0) on the host.
std::unique_ptr<Program> AddOnSimThenNeg() {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {4});
  ValueId b = m.Input("b", DType::kFloat32, {4});
  ValueId t = m.GraphDelegate("sim:0", {a, b}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("add", {in[0], in[1]})};
  })[0];
  m.Output(m.Op("neg", {t}, "n"));
  return std::move(Program::FromBytes(std::move(pb.Build()).value())).value();
}

TEST(BuildSteps, EachCallCopiesInAndOutOnceAndTheHostReadsTheDevicesResult) {
  std::unique_ptr<Program> program = AddOnSimThenNeg();
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  DeviceRuntime* sim = rt.devices().Find(Device::Sim(0));
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, a.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kFloat32, {4}, b.data())));
  sim->ResetCounters();
  for (int call = 1; call <= 3; ++call) {
    a[0] = static_cast<float>(call);  // each call reads the caller's memory anew
    ASSERT_OK(method->Execute());
    EXPECT_EQ(sim->counters().h2d_copies, 2u * call);
    EXPECT_EQ(sim->counters().d2h_copies, 1u * call);
    const float* out = method->Output(0).data_as<float>();
    EXPECT_EQ(std::vector<float>(out, out + 4),
              (std::vector<float>{-(call + 10.0f), -22, -33, -44}));
  }
}

TEST(BuildSteps, InputsAndOutputsAreDescribedForTheCaller) {
  std::unique_ptr<Program> program = AddOnSimThenNeg();
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  const MethodPlan& plan = method->plan();
  ASSERT_EQ(plan.inputs.size(), 2u);
  EXPECT_EQ(plan.inputs[0].name, "a");
  EXPECT_EQ(plan.inputs[1].name, "b");
  EXPECT_EQ(plan.inputs[0].dtype, DType::kFloat32);
  EXPECT_THAT(plan.inputs[0].sizes, ElementsAre(4));
  EXPECT_EQ(plan.inputs[0].bytes, 16u);
  EXPECT_TRUE(plan.inputs[0].device.is_host());  // copied to sim:0 by the method
  ASSERT_EQ(plan.outputs.size(), 1u);
  EXPECT_EQ(plan.outputs[0].name, "n");
  EXPECT_TRUE(plan.outputs[0].device.is_host());
  EXPECT_EQ(method->num_inputs(), 2u);
  EXPECT_EQ(method->num_outputs(), 1u);
}

}  // namespace
}  // namespace ferry
