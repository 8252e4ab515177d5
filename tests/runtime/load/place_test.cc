// Load phases 2 and 3 (runtime/load/place.cc): a declared device runs where the load's device map
// sends it, and the plan labels it as declared; every planned buffer's layout is its own, so an
// output that is a view reads as one (its strides), with the values of the all-host computation.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/method_harness.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;

// forward(x) = relu(x) in a delegate declared on cuda:0.
void ReluOnCuda0(ProgramBuilder& pb) {
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 3});
  m.Output(m.GraphDelegate("cuda:0", {x}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("relu", {in[0]}, "r")};
  })[0]);
}

const ArenaInfo* ArenaOn(const Method& method, Device device) {
  for (const ArenaInfo& a : method.plan().arenas) {
    if (a.device == device) return &a;
  }
  return nullptr;
}

TEST(Place, ADeclaredDeviceRunsWhereTheMapSendsItLabelledAsDeclared) {
  ProgramBuilder pb;
  ReluOnCuda0(pb);
  MethodHarness h(pb);
  // No GPU in this test's process: the default map runs cuda:0 on sim:0.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> by_default, h.Load());
  const ValueId out = by_default->def().outputs[0];
  EXPECT_EQ(by_default->plan().placement.value_homes[out], Device::Sim(0));
  ASSERT_NE(ArenaOn(*by_default, Device::Sim(0)), nullptr);
  EXPECT_EQ(ArenaOn(*by_default, Device::Sim(0))->device_label, "cuda:0 (as sim:0)");
  // The caller's map sends it elsewhere.
  LoadOptions options;
  options.device_map = absl::flat_hash_map<Device, Device>{{Device::Cuda(0), Device::Sim(1)}};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> mapped, h.Load(options));
  EXPECT_EQ(mapped->plan().placement.value_homes[out], Device::Sim(1));
  EXPECT_EQ(ArenaOn(*mapped, Device::Sim(0)), nullptr);
  ASSERT_NE(ArenaOn(*mapped, Device::Sim(1)), nullptr);
  EXPECT_EQ(ArenaOn(*mapped, Device::Sim(1))->device_label, "cuda:0 (as sim:1)");
  ASSERT_OK_AND_ASSIGN(auto placed, h.Run(*mapped));
  ASSERT_OK_AND_ASSIGN(auto host, h.RunAllHost());
  EXPECT_EQ(placed, host);
}

TEST(Place, AnOutputThatIsAViewReadsThroughItsStrides) {
  // out = transpose(relu(x)): a view of relu's result.
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 3});
  m.Output(m.Op("transpose", {m.Op("relu", {x}), m.Int(0), m.Int(1)}));
  MethodHarness h(pb);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, h.Load());
  std::vector<float> in = {1, -2, 3, -4, 5, -6};  // x[i][j] = in[3 * i + j]
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, in.data())));
  ASSERT_OK(method->Execute());
  const TensorView out = method->Output(0);
  ASSERT_THAT(out.sizes(), ElementsAre(3, 2));
  ASSERT_THAT(out.strides(), ElementsAre(1, 3));  // relu's [2, 3] row-major memory, transposed
  for (int j = 0; j < 3; ++j) {
    for (int i = 0; i < 2; ++i) {
      const float want = in[3 * i + j] > 0 ? in[3 * i + j] : 0;
      EXPECT_EQ(out.data_as<float>()[j * out.strides()[0] + i * out.strides()[1]], want)
          << "out[" << j << "][" << i << "]";
    }
  }
}

}  // namespace
}  // namespace ferry::testing
