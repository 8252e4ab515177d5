// Methods of one LoadedProgram handing a device output to the next method with no copy, and an
// output on another device refused naming both. (The replicas and shared states the methods
// share are tested with the phase that plans them, tests/runtime/load/plan_arenas_test.cc.)
#include <cstdint>
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
using ::testing::HasSubstr;

// produce: x + w in a delegate on sim:0; consume0 / consume1: relu(y) in a delegate on sim:0 /
// sim:1.
std::unique_ptr<Program> HandOffProgram() {
  ProgramBuilder pb;
  {
    MethodBuilder& m = pb.AddMethod("produce");
    ValueId x = m.Input("x", DType::kFloat32, {4});
    ValueId w = m.ConstantF32("w", {4}, {-5, 1, -1, 5});
    m.Output(m.GraphDelegate("sim:0", {x, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op("add", {in[0], in[1]})};
    })[0]);
  }
  for (const char* device : {"sim:0", "sim:1"}) {
    MethodBuilder& m = pb.AddMethod(std::string("consume") + device[4]);
    ValueId y = m.Input("y", DType::kFloat32, {4});
    m.Output(m.GraphDelegate(device, {y}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op("relu", {in[0]})};
    })[0]);
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(*bytes);
  EXPECT_TRUE(program.ok()) << program.status();
  return *std::move(program);
}

uint64_t CopiesOn(const Runtime& rt, Device d) {
  const DeviceCounters c = rt.devices().Find(d)->counters();
  return c.h2d_copies + c.d2h_copies + c.d2d_copies;
}

TEST(HandOff, ADeviceOutputFeedsTheNextMethodWithNoCopy) {
  Runtime rt;
  std::unique_ptr<Program> program = HandOffProgram();
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  LoadOptions keep;
  keep.skip_h2d_for_method_inputs = true;
  keep.skip_d2h_for_method_outputs = true;
  LoadOptions out_on_device;
  out_on_device.skip_d2h_for_method_outputs = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> produce,
                       loaded->LoadMethod("produce", out_on_device));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> consume, loaded->LoadMethod("consume0", keep));
  ASSERT_EQ(produce->plan().outputs[0].device, Device::Sim(0));
  ASSERT_EQ(consume->plan().inputs[0].device, Device::Sim(0));

  std::vector<float> x = {1, 2, 3, 4};
  ASSERT_OK(produce->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  const uint64_t before = CopiesOn(rt, Device::Sim(0));
  ASSERT_OK(produce->Execute());
  EXPECT_EQ(CopiesOn(rt, Device::Sim(0)) - before, 1u);  // x to the device, nothing else
  const TensorView handed = produce->Output(0);
  ASSERT_EQ(handed.device(), Device::Sim(0));
  ASSERT_OK(consume->SetInput(0, handed));
  ASSERT_OK(consume->Execute());
  EXPECT_EQ(CopiesOn(rt, Device::Sim(0)) - before, 1u);  // the hand-off copied nothing
  ASSERT_OK_AND_ASSIGN(std::vector<double> out, ReadValues(rt, consume->Output(0)));
  EXPECT_EQ(out, (std::vector<double>{0, 3, 2, 9}));  // relu(x + w)
}

TEST(HandOff, AnOutputOnAnotherDeviceIsRefusedNamingBothDevices) {
  Runtime rt;
  std::unique_ptr<Program> program = HandOffProgram();
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  LoadOptions keep;
  keep.skip_h2d_for_method_inputs = true;
  keep.skip_d2h_for_method_outputs = true;
  LoadOptions out_on_device;
  out_on_device.skip_d2h_for_method_outputs = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> produce,
                       loaded->LoadMethod("produce", out_on_device));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> consume, loaded->LoadMethod("consume1", keep));
  std::vector<float> x = {1, 2, 3, 4};
  ASSERT_OK(produce->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  ASSERT_OK(produce->Execute());
  EXPECT_THAT(consume->SetInput(0, produce->Output(0)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       // Named as declared: the program says sim:1, not cuda:1.
                       ::testing::AllOf(HasSubstr("must be on sim:1, but"),
                                        HasSubstr("is on sim:0"))));
  // Nothing was bound: the input is still unset.
  EXPECT_THAT(consume->Execute(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                           HasSubstr("is not set")));
}

}  // namespace
}  // namespace ferry
