// Program-level residency: the methods of a LoadedProgram share each constant's replica on a
// device, made once however many methods read it and freed with the last of them. Counts come
// from the sim devices' own counters; outputs are checked against sums computed here.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ferry/loader/program.h"
#include "ferry/loader/program_builder.h"
#include "ferry/runtime/runtime.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

const std::vector<float> kWeights = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

// Methods `prefill` and `decode` (a delegate on sim:0) and `other` (on sim:1), each adding its
// input to the same 4x4 constant.
std::unique_ptr<Program> ThreeMethods() {
  ProgramBuilder pb;
  const std::vector<std::pair<std::string, std::string>> methods = {
      {"prefill", "sim:0"}, {"decode", "sim:0"}, {"other", "sim:1"}};
  for (const auto& [name, device] : methods) {
    MethodBuilder& m = pb.AddMethod(name);
    ValueId x = m.Input("x", DType::kFloat32, {4, 4});
    ValueId w = m.ConstantF32("w", {4, 4}, kWeights);
    m.Output(m.GraphDelegate(device, {x, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op("add", {in[0], in[1]})};
    })[0]);
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(*bytes);
  EXPECT_TRUE(program.ok()) << program.status();
  return *std::move(program);
}

// Runs `method` on x = 0.5 * i and checks x + w.
void ExpectAddsTheWeights(Method& method) {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = 0.5f * i;
  ASSERT_OK(method.SetInput(0, TensorView::Host(DType::kFloat32, {4, 4}, x.data())));
  ASSERT_OK(method.Execute());
  const float* out = method.Output(0).data_as<float>();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], x[i] + kWeights[i]) << i;
}

const ArenaInfo& ArenaOn(const Method& method, Device device) {
  for (const ArenaInfo& a : method.plan().arenas) {
    if (a.device == device) return a;
  }
  static const ArenaInfo none;
  ADD_FAILURE() << "no arena on " << device.ToString();
  return none;
}

TEST(LoadedProgram, EqualConstantDataIsStoredOnce) {
  std::unique_ptr<Program> program = ThreeMethods();
  auto data_of_w = [&](const std::string& name) {
    const MethodDef& m = **program->method(name);
    for (const ValueDef& v : m.values) {
      if (v.name == "w") return v.data.data();
    }
    return static_cast<const uint8_t*>(nullptr);
  };
  ASSERT_NE(data_of_w("prefill"), nullptr);
  EXPECT_EQ(data_of_w("prefill"), data_of_w("decode"));
  EXPECT_EQ(data_of_w("prefill"), data_of_w("other"));
}

TEST(LoadedProgram, TwoMethodsOnOneDeviceShareOneReplica) {
  Runtime rt;
  std::unique_ptr<Program> program = ThreeMethods();
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  DeviceRuntime& sim0 = *rt.devices().Find(Device::Sim(0));
  const DeviceCounters start = sim0.counters();

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> prefill, loaded->LoadMethod("prefill"));
  const DeviceCounters after_prefill = sim0.counters();
  EXPECT_EQ(after_prefill.h2d_copies - start.h2d_copies, 1u);  // the replica of w
  EXPECT_EQ(ArenaOn(*prefill, Device::Sim(0)).constant_bytes, 64u);
  EXPECT_EQ(ArenaOn(*prefill, Device::Sim(0)).shared_constant_bytes, 0u);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> decode, loaded->LoadMethod("decode"));
  const DeviceCounters after_decode = sim0.counters();
  // Only decode's arena: no constant region, no copy of w.
  EXPECT_EQ(after_decode.h2d_copies, after_prefill.h2d_copies);
  EXPECT_EQ(after_decode.allocations - after_prefill.allocations, 1u);
  EXPECT_EQ(ArenaOn(*decode, Device::Sim(0)).constant_bytes, 0u);
  EXPECT_EQ(ArenaOn(*decode, Device::Sim(0)).shared_constant_bytes, 64u);
  EXPECT_THAT(loaded->replica_bytes(),
              ::testing::ElementsAre(std::make_pair(Device::Sim(0), size_t{64})));

  ExpectAddsTheWeights(*prefill);
  ExpectAddsTheWeights(*decode);
}

TEST(LoadedProgram, MethodsOnTwoDevicesMakeTwoReplicas) {
  Runtime rt;
  std::unique_ptr<Program> program = ThreeMethods();
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  const uint64_t sim1_before = rt.devices().Find(Device::Sim(1))->counters().h2d_copies;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> prefill, loaded->LoadMethod("prefill"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> other, loaded->LoadMethod("other"));
  EXPECT_EQ(rt.devices().Find(Device::Sim(1))->counters().h2d_copies - sim1_before, 1u);
  EXPECT_EQ(ArenaOn(*other, Device::Sim(1)).constant_bytes, 64u);
  EXPECT_THAT(loaded->replica_bytes(),
              ::testing::ElementsAre(std::make_pair(Device::Sim(0), size_t{64}),
                                     std::make_pair(Device::Sim(1), size_t{64})));
  ExpectAddsTheWeights(*other);
}

TEST(LoadedProgram, AReplicaLivesUntilTheLastMethodThatReadsIt) {
  Runtime rt;
  std::unique_ptr<Program> program = ThreeMethods();
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  DeviceRuntime& sim0 = *rt.devices().Find(Device::Sim(0));
  const uint64_t baseline = sim0.counters().allocated_bytes;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> prefill, loaded->LoadMethod("prefill"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> decode, loaded->LoadMethod("decode"));
  prefill.reset();  // made the replica; decode still reads it
  ExpectAddsTheWeights(*decode);
  EXPECT_THAT(loaded->replica_bytes(),
              ::testing::ElementsAre(std::make_pair(Device::Sim(0), size_t{64})));
  // A method loaded now shares the replica decode holds.
  const uint64_t copies = sim0.counters().h2d_copies;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> again, loaded->LoadMethod("prefill"));
  EXPECT_EQ(sim0.counters().h2d_copies, copies);
  ExpectAddsTheWeights(*again);
  loaded.reset();  // methods outlive the LoadedProgram
  ExpectAddsTheWeights(*again);
  decode.reset();
  again.reset();
  EXPECT_EQ(sim0.counters().allocated_bytes, baseline);
}

TEST(LoadedProgram, MethodsLoadedOnTheirOwnMakeTheirOwnReplicas) {
  Runtime rt;
  std::unique_ptr<Program> program = ThreeMethods();
  DeviceRuntime& sim0 = *rt.devices().Find(Device::Sim(0));
  const uint64_t before = sim0.counters().h2d_copies;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> prefill, rt.LoadMethod(*program, "prefill"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> decode, rt.LoadMethod(*program, "decode"));
  EXPECT_EQ(sim0.counters().h2d_copies - before, 2u);
  EXPECT_EQ(ArenaOn(*decode, Device::Sim(0)).constant_bytes, 64u);
}

TEST(LoadedProgram, AnUnknownMethodIsNotFound) {
  Runtime rt;
  std::unique_ptr<Program> program = ThreeMethods();
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  EXPECT_THAT(loaded->LoadMethod("forward"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("forward")));
}

}  // namespace
}  // namespace ferry
