// The graph backend shares one verified sub-program among delegates whose payloads have the same
// bytes, and its constants per device. Sharing must never mix up payloads, must not outlive the
// instances that use a program, and must not remember a payload that failed to load; a sub-graph
// may not write its constants or undeclared arguments in place.
#include <memory>
#include <vector>

#include "ferry/base/status_macros.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ValueId Binary(MethodBuilder& m, const char* op, ValueId x, ValueId y) {
  return m.GraphDelegate("cuda:0", {x, y}, [op](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op(op, {in[0], in[1]})};
  })[0];
}

// out = ((x * w + w) * w + w) ..., `layers` times, with `mul` and `add` delegates whose payloads
// have the same length and differ in one op name.
std::vector<uint8_t> Layers(int layers) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId v = m.Input("x", DType::kFloat32, {4});
  ValueId w = m.ConstantF32("w", {4}, {2, 2, 2, 2});
  for (int i = 0; i < layers; ++i) v = Binary(m, "add", Binary(m, "mul", v, w), w);
  m.Output(v);
  return std::move(pb.Build()).value();
}

std::vector<float> RunLayers(const Runtime& rt, const Program& program, std::vector<float> x) {
  auto method = rt.LoadMethod(program, "forward");
  EXPECT_OK(method.status());
  if (!method.ok()) return {};
  EXPECT_OK((*method)->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  EXPECT_OK((*method)->Execute());
  const float* out = (*method)->Output(0).data_as<float>();
  return std::vector<float>(out, out + 4);
}

// forward(x) = delegate(... delegate(x)), `layers` calls on cuda:0 of one payload whose "main"
// adds a constant of `elements` floats (1.0) carried in the payload.
std::vector<uint8_t> ConstantLayers(int layers, int64_t elements) {
  ProgramBuilder sub;
  MethodBuilder& g = sub.AddMethod("main");
  const ValueId in = g.Input("x", DType::kFloat32, {elements});
  g.Output(g.Op("add", {in, g.ConstantF32("c", {elements}, std::vector<float>(elements, 1.0f))}));
  const std::vector<uint8_t> payload = std::move(sub.Build()).value();
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId v = m.Input("x", DType::kFloat32, {elements});
  for (int i = 0; i < layers; ++i) {
    v = m.Delegate(kGraphBackendName, "cuda:0", payload, {v},
                   {TensorMeta{DType::kFloat32, {elements}, {}}})[0];
  }
  m.Output(v);
  return std::move(pb.Build()).value();
}

TEST(GraphBackendTest, ASubProgramsConstantsAreCopiedToADeviceOnce) {
  // 40 layers with a 1 MiB constant each on a 12 MiB device: 40 MiB if every instance copied
  // its own, 1 MiB shared (plus the arena the chain's results take).
  constexpr int kLayers = 40;
  constexpr int64_t kElements = 1 << 18;
  auto program = std::move(Program::FromBytes(ConstantLayers(kLayers, kElements))).value();
  RuntimeOptions options;
  options.sim.bytes = size_t{12} << 20;
  Runtime rt(options);
  auto loaded = rt.LoadMethod(*program, "forward");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto method = *std::move(loaded);
  std::vector<float> x(kElements, 0.5f);
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {kElements}, x.data())));
  ASSERT_OK(method->Execute());
  const float* out = method->Output(0).data_as<float>();
  EXPECT_EQ(out[0], 0.5f + kLayers);
  EXPECT_EQ(out[kElements - 1], 0.5f + kLayers);
  // A second call reads the same constants: nothing wrote them.
  ASSERT_OK(method->Execute());
  EXPECT_EQ(method->Output(0).data_as<float>()[0], 0.5f + kLayers);
}

// A payload whose "main" adds a constant (2.0) to its float32 [4] input: in place into the
// input when `write_input`, else into the constant.
std::vector<uint8_t> InPlacePayload(bool write_input) {
  ProgramBuilder pb;
  MethodBuilder& g = pb.AddMethod("main");
  const ValueId x = g.Input("x", DType::kFloat32, {4});
  const ValueId c = g.ConstantF32("c", {4}, {2, 2, 2, 2});
  g.Output(write_input ? g.Op("add_", {x, c}) : g.Op("add_", {c, x}));
  return std::move(pb.Build()).value();
}

absl::StatusOr<std::unique_ptr<Program>> InPlaceProgram(bool write_input,
                                                        std::vector<int32_t> written_args) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  const ValueId t = m.Op("relu", {m.Input("x", DType::kFloat32, {4})});
  DelegateOptions options;
  options.name = "in_place";
  options.written_args = std::move(written_args);
  m.Output(m.Delegate(kGraphBackendName, "cpu", InPlacePayload(write_input), {t},
                      {TensorMeta{DType::kFloat32, {4}, {}}}, options)[0]);
  FERRY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, pb.Build());
  return Program::FromBytes(bytes);
}

TEST(GraphBackendTest, InPlaceWritesToConstantsOrUndeclaredArgumentsAreRefused) {
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto to_constant, InPlaceProgram(/*write_input=*/false, {}));
  EXPECT_THAT(rt.LoadMethod(*to_constant, "forward"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("in_place"), HasSubstr("sub-graph node 0"),
                             HasSubstr("writes in place to sub-graph constant \"c\""))));
  ASSERT_OK_AND_ASSIGN(auto undeclared, InPlaceProgram(/*write_input=*/true, {}));
  EXPECT_THAT(rt.LoadMethod(*undeclared, "forward"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("writes in place to sub-graph input 0 (argument 0)"),
                             HasSubstr("does not declare argument 0 written"))));
  // Declared, it runs: relu(x) + 2, written through the argument.
  ASSERT_OK_AND_ASSIGN(auto declared, InPlaceProgram(/*write_input=*/true, {0}));
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*declared, "forward"));
  std::vector<float> x = {-1, 2, -3, 4};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  ASSERT_OK(method->Execute());
  const float* out = method->Output(0).data_as<float>();
  EXPECT_THAT(std::vector<float>(out, out + 4), ElementsAre(2, 4, 2, 6));
}

TEST(GraphBackendTest, IdenticalPayloadsAreSharedWithoutMixingUpOps) {
  auto program = std::move(Program::FromBytes(Layers(3))).value();
  Runtime rt;
  // x -> 2x + 2, three times: 1 -> 4 -> 10 -> 22; -1 -> 0 -> 2 -> 6.
  EXPECT_THAT(RunLayers(rt, *program, {1, -1, 0, 0.5f}), ElementsAre(22, 6, 14, 18));
}

TEST(GraphBackendTest, MethodsSharingPayloadsOutliveEachOther) {
  auto program = std::move(Program::FromBytes(Layers(2))).value();
  Runtime rt;
  std::vector<float> x = {1, 2, 3, 4};
  auto first = std::move(rt.LoadMethod(*program, "forward")).value();
  auto second = std::move(rt.LoadMethod(*program, "forward")).value();
  first.reset();  // the shared sub-programs stay alive for `second`
  ASSERT_OK(second->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  ASSERT_OK(second->Execute());
  const float* out = second->Output(0).data_as<float>();
  // x -> 2x + 2 twice: 4x + 6.
  EXPECT_THAT(std::vector<float>(out, out + 4), ElementsAre(10, 14, 18, 22));
  second.reset();
  // Every instance is gone; the next load parses the payloads again.
  EXPECT_THAT(RunLayers(rt, *program, x), ElementsAre(10, 14, 18, 22));
}

TEST(GraphBackendTest, ProgramsFromDifferentFilesWithTheSamePayloadAreShared) {
  Runtime rt;
  auto a = std::move(Program::FromBytes(Layers(1))).value();
  auto b = std::move(Program::FromBytes(Layers(1))).value();
  auto method_a = std::move(rt.LoadMethod(*a, "forward")).value();
  auto method_b = std::move(rt.LoadMethod(*b, "forward")).value();
  // b's delegates share the sub-programs parsed for a; they must not point into a's bytes.
  method_a.reset();
  a.reset();
  std::vector<float> x = {0, 1, 2, 3};
  ASSERT_OK(method_b->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  ASSERT_OK(method_b->Execute());
  const float* out = method_b->Output(0).data_as<float>();
  EXPECT_THAT(std::vector<float>(out, out + 4), ElementsAre(2, 4, 6, 8));
}

TEST(GraphBackendTest, ABadPayloadIsRefusedEveryTime) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {4});
  ValueId y = m.Delegate("graph", "cuda:0", std::vector<uint8_t>(64, 7), {x},
                         {TensorMeta{DType::kFloat32, {4}, {}}})[0];
  m.Output(y);
  auto program = std::move(Program::FromBytes(std::move(pb.Build()).value())).value();
  Runtime rt;
  for (int attempt = 0; attempt < 2; ++attempt) {
    EXPECT_THAT(rt.LoadMethod(*program, "forward"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("init failed")));
  }
}

// The sub-graph's own plan: `a` is last read directly by the view `v`, but `v` is read two nodes
// later and returned, so `a`'s scratch must outlive the scratch values made after it; `d` is
// returned twice (written into the first result, copied into the second); a view and an input
// are returned through copies. Expected values are computed here from x and w.
TEST(GraphBackendTest, SubGraphResultsViewsAndRepeatedOutputsComeOutRight) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {8});
  ValueId w = m.ConstantF32("w", {8}, {0.5f, 1.5f, -2, 3, 0.25f, -1, 4, 2});
  std::vector<ValueId> outs =
      m.GraphDelegate("cuda:0", {x, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        ValueId a = g.Op("add", {in[0], in[1]});
        ValueId v = g.Op("view", {a, g.IntList({8})});
        ValueId b = g.Op("mul", {in[0], in[1]});
        ValueId c = g.Op("neg", {b});
        ValueId d = g.Op("add", {v, c});
        return std::vector<ValueId>{d, d, v, b, in[0]};
      });
  ASSERT_EQ(outs.size(), 5u);
  for (ValueId o : outs) m.Output(o);
  auto program = std::move(Program::FromBytes(std::move(pb.Build()).value())).value();
  Runtime rt;
  auto method = rt.LoadMethod(*program, "forward");
  ASSERT_OK(method.status());
  std::vector<float> xs = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> ws = {0.5f, 1.5f, -2, 3, 0.25f, -1, 4, 2};
  ASSERT_OK((*method)->SetInput(0, TensorView::Host(DType::kFloat32, {8}, xs.data())));
  ASSERT_OK((*method)->Execute());
  std::vector<std::vector<float>> want(5);
  for (size_t i = 0; i < 8; ++i) {
    want[0].push_back(xs[i] + ws[i] - xs[i] * ws[i]);
    want[2].push_back(xs[i] + ws[i]);
    want[3].push_back(xs[i] * ws[i]);
  }
  want[1] = want[0];
  want[4] = xs;
  for (int o = 0; o < 5; ++o) {
    const float* got = (*method)->Output(o).data_as<float>();
    EXPECT_EQ(std::vector<float>(got, got + 8), want[o]) << "output " << o;
  }
}

}  // namespace
}  // namespace ferry::testing
