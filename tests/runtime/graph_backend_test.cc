// The graph backend shares one verified sub-program among delegates whose payloads have the same
// bytes. Sharing must never mix up payloads, must not outlive the instances that use a program,
// and must not remember a payload that failed to load.
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ferry/loader/program.h"
#include "ferry/loader/program_builder.h"
#include "ferry/runtime/runtime.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

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
