// The example decoder block (bench/example/) against a straightforward reference written here:
// several consecutive calls, each advancing the KV cache, on the host and with the attention
// delegate on cuda:0 (sim:0 here, guarded).
#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench/example/decoder_block.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "tests/testing/reference_decoder.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using namespace ::ferry::example;  // NOLINT

using ::ferry::testing::ReferenceDecoder;

class ExampleProgramTest : public ::testing::TestWithParam<std::optional<std::string>> {};

TEST_P(ExampleProgramTest, ConsecutiveCallsMatchTheReference) {
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, BuildDecoderProgram(GetParam()));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  ReferenceDecoder reference(MakeDecoderWeights(), kSeq);
  for (int64_t step = 0; step < 5; ++step) {
    DecoderInputs in = MakeDecoderInputs(step);
    ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {1, kModel}, in.x.data())));
    ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kInt64, {1}, in.pos.data())));
    ASSERT_OK(method->SetInput(2, TensorView::Host(DType::kFloat32, {1, kSeq}, in.mask.data())));
    ASSERT_OK(method->Execute());
    std::vector<float> expected = reference.Step(in.x, in.pos[0], in.mask.data());
    TensorView out = method->Output(0);
    ASSERT_EQ(out.device(), Device::Host());
    ASSERT_EQ(out.numel(), kModel);
    for (int64_t i = 0; i < kModel; ++i) {
      EXPECT_NEAR(out.data_as<float>()[i], expected[i], 1e-4) << "step " << step << " i " << i;
    }
  }
}

// "per call h2d norm1" must name one value: the example's names are unique, and the loader has
// nothing to warn about them.
TEST_P(ExampleProgramTest, ValueNamesAreUnique) {
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, BuildDecoderProgram(GetParam()));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::set<std::string> names;
  for (const ValueDef& v : method->def().values) {
    EXPECT_TRUE(names.insert(v.name).second) << "\"" << v.name << "\" names two values";
  }
  for (const Diagnostic& d : method->plan().placement.diagnostics) {
    EXPECT_THAT(d.message, ::testing::Not(::testing::HasSubstr("share a name")));
  }
}

INSTANTIATE_TEST_SUITE_P(Placements, ExampleProgramTest,
                         ::testing::Values(std::nullopt, std::optional<std::string>("cuda:0")),
                         [](const auto& info) {
                           return info.param.has_value() ? std::string("OnDevice")
                                                         : std::string("AllHost");
                         });

TEST(ExampleProgram, CacheLivesOnTheDeviceWithNoPerCallCopies) {
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, BuildDecoderProgram());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  const PlacementPlan& plan = method->plan().placement;
  const MethodDef& def = method->def();
  for (size_t v = 0; v < def.values.size(); ++v) {
    if (def.values[v].kind == ValueKind::kState) {
      EXPECT_EQ(plan.value_homes[v], Device::Sim(0)) << def.values[v].name;
    }
  }
  for (const CopyStep& c : plan.copies) {
    const ValueDef& value = def.values[c.value];
    if (value.kind == ValueKind::kState || value.kind == ValueKind::kConstant) {
      EXPECT_EQ(c.timing, CopyTiming::kOnce) << value.name;
    }
  }
  // Per call: the normed activation, pos and mask go in, the attention output comes back.
  EXPECT_EQ(plan.per_call_copies(), 4);
  EXPECT_EQ(plan.per_call_bytes(), static_cast<size_t>(kModel * 4 + 8 + kSeq * 4 + kModel * 4));
}

}  // namespace
}  // namespace ferry
