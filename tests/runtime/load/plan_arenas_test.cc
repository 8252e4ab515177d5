// Load phase 5 (runtime/load/plan_arenas.cc) in a LoadedProgram: the methods share each
// constant's replica on a device, made once however many methods read it and freed with the last
// of them; a state marked shared is one buffer for every method that uses it, outside each
// arena, and a method that would place it elsewhere is refused naming both. Counts come from the
// sim devices' own counters; outputs are checked against sums computed here.
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

// Methods sharing the state "acc" (float32[4], initially 1..4):
//   bump:        acc += x on sim:0, returns acc
//   twice:       acc += acc on sim:0, returns acc
//   host_bump:   acc += x by a host op (P11 puts the state on the host)
//   wide:        a shared "acc" of another shape, read on sim:0
std::unique_ptr<Program> SharedStateProgram() {
  ProgramBuilder pb;
  auto in_place = [](const char* op, bool with_input) {
    return [op, with_input](MethodBuilder& g, absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op(op, {in[0], with_input ? in[1] : in[0]})};
    };
  };
  {
    MethodBuilder& m = pb.AddMethod("bump");
    ValueId x = m.Input("x", DType::kFloat32, {4});
    ValueId acc = m.SharedStateF32("acc", {4}, {1, 2, 3, 4});
    m.Output(m.GraphDelegate("sim:0", {acc, x}, in_place("add_", true))[0]);
  }
  {
    MethodBuilder& m = pb.AddMethod("twice");
    ValueId acc = m.SharedStateF32("acc", {4}, {1, 2, 3, 4});
    m.Output(m.GraphDelegate("sim:0", {acc}, in_place("add_", false))[0]);
  }
  {
    MethodBuilder& m = pb.AddMethod("host_bump");
    ValueId x = m.Input("x", DType::kFloat32, {4});
    ValueId acc = m.SharedStateF32("acc", {4}, {1, 2, 3, 4});
    m.Output(m.Op("add_", {acc, x}));
  }
  {
    MethodBuilder& m = pb.AddMethod("wide");
    ValueId acc = m.SharedStateF32("acc", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
    m.Output(m.GraphDelegate("sim:0", {acc}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op("relu", {in[0]})};
    })[0]);
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(*bytes);
  EXPECT_TRUE(program.ok()) << program.status();
  return *std::move(program);
}

std::vector<float> RunOnce(Method& method, std::vector<float> x = {}) {
  if (!x.empty()) {
    EXPECT_OK(method.SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  }
  EXPECT_OK(method.Execute());
  const float* out = method.Output(0).data_as<float>();
  return out == nullptr ? std::vector<float>{} : std::vector<float>(out, out + 4);
}

TEST(SharedState, OneBufferForTheMethodsThatShareIt) {
  Runtime rt;
  std::unique_ptr<Program> program = SharedStateProgram();
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  DeviceRuntime& sim0 = *rt.devices().Find(Device::Sim(0));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> bump, loaded->LoadMethod("bump"));
  const uint64_t copies = sim0.counters().h2d_copies;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> twice, loaded->LoadMethod("twice"));
  EXPECT_EQ(sim0.counters().h2d_copies, copies);  // no second initial copy
  EXPECT_EQ(ArenaOn(*twice, Device::Sim(0)).shared_state_bytes, 16u);
  EXPECT_THAT(loaded->shared_state_bytes(),
              ::testing::ElementsAre(std::make_pair(Device::Sim(0), size_t{16})));

  // The same sequence on the host, as the reference.
  std::vector<float> acc = {1, 2, 3, 4};
  const std::vector<float> x = {10, 20, 30, 40};
  auto host_bump = [&] { for (int i = 0; i < 4; ++i) acc[i] += x[i]; };
  auto host_twice = [&] { for (int i = 0; i < 4; ++i) acc[i] += acc[i]; };
  host_bump();
  EXPECT_EQ(RunOnce(*bump, x), acc);
  host_twice();
  EXPECT_EQ(RunOnce(*twice), acc);  // reads what bump wrote
  host_bump();
  EXPECT_EQ(RunOnce(*bump, x), acc);  // and bump reads what twice wrote
  host_twice();
  EXPECT_EQ(RunOnce(*twice), acc);
}

TEST(SharedState, AMethodThatWouldPlaceItElsewhereIsRefusedNamingBoth) {
  Runtime rt;
  std::unique_ptr<Program> program = SharedStateProgram();
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> bump, loaded->LoadMethod("bump"));
  EXPECT_THAT(loaded->LoadMethod("host_bump"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("method \"host_bump\""),
                                        HasSubstr("shared state \"acc\""),
                                        HasSubstr("method \"bump\" placed it on sim:0"))));
  EXPECT_THAT(loaded->LoadMethod("wide"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("float32[8]"), HasSubstr("float32[4]"),
                                        HasSubstr("method \"bump\""))));
  // The state is untouched by the refused loads.
  EXPECT_EQ(RunOnce(*bump, {1, 1, 1, 1}), (std::vector<float>{2, 3, 4, 5}));
}

TEST(SharedState, MethodsLoadedOnTheirOwnKeepTheirOwnState) {
  Runtime rt;
  std::unique_ptr<Program> program = SharedStateProgram();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> bump, rt.LoadMethod(*program, "bump"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> twice, rt.LoadMethod(*program, "twice"));
  EXPECT_EQ(RunOnce(*bump, {10, 10, 10, 10}), (std::vector<float>{11, 12, 13, 14}));
  EXPECT_EQ(RunOnce(*twice), (std::vector<float>{2, 4, 6, 8}));  // its own acc, from 1..4
}

TEST(SharedState, OnlyAStateCanBeShared) {
  // A constant marked shared in the JSON form is refused by the verifier.
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId c = m.ConstantF32("c", {1}, {1});
  m.Output(m.Op("relu", {c}));
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, pb.Build());
  ASSERT_OK_AND_ASSIGN(std::string json, Program::ToJson(bytes));
  const std::string marker = "\"data_segment\": 0";
  const size_t at = json.find(marker);
  ASSERT_NE(at, std::string::npos) << json;
  json.insert(at + marker.size(), ", \"shared\": true");
  EXPECT_THAT(Program::FromJson(json),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("marked shared")));
}

}  // namespace
}  // namespace ferry
