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
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using namespace ::ferry::example;  // NOLINT

// y[o] = sum_i x[i] * w[o * in + i]
std::vector<float> Linear(const std::vector<float>& x, const std::vector<float>& w, int64_t out) {
  const int64_t in = static_cast<int64_t>(x.size());
  std::vector<float> y(out, 0.0f);
  for (int64_t o = 0; o < out; ++o) {
    double acc = 0;
    for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(x[i]) * w[o * in + i];
    y[o] = static_cast<float>(acc);
  }
  return y;
}

std::vector<float> RmsNorm(const std::vector<float>& x, const std::vector<float>& w) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(ss / x.size() + kEps);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(x[i] * scale * w[i]);
  return y;
}

class ReferenceDecoder {
 public:
  ReferenceDecoder() : w_(MakeDecoderWeights()), k_(kSeq * kModel, 0.0f), v_(kSeq * kModel, 0.0f) {}

  std::vector<float> Step(const DecoderInputs& in) {
    const int64_t pos = in.pos[0];
    std::vector<float> h = RmsNorm(in.x, w_.norm1);
    std::vector<float> q = Linear(h, w_.wq, kModel);
    std::vector<float> k = Linear(h, w_.wk, kModel);
    std::vector<float> v = Linear(h, w_.wv, kModel);
    std::copy(k.begin(), k.end(), k_.begin() + pos * kModel);
    std::copy(v.begin(), v.end(), v_.begin() + pos * kModel);
    std::vector<float> ctx(kModel, 0.0f);
    for (int64_t head = 0; head < kHeads; ++head) {
      std::vector<double> scores(kSeq);
      double max = -INFINITY;
      for (int64_t t = 0; t < kSeq; ++t) {
        double dot = 0;
        for (int64_t d = 0; d < kHeadDim; ++d) {
          dot += static_cast<double>(q[head * kHeadDim + d]) * k_[t * kModel + head * kHeadDim + d];
        }
        scores[t] = dot / std::sqrt(static_cast<double>(kHeadDim)) + in.mask[t];
        max = std::max(max, scores[t]);
      }
      double sum = 0;
      for (double& s : scores) sum += (s = std::exp(s - max));
      for (int64_t d = 0; d < kHeadDim; ++d) {
        double acc = 0;
        for (int64_t t = 0; t < kSeq; ++t) {
          acc += scores[t] / sum * v_[t * kModel + head * kHeadDim + d];
        }
        ctx[head * kHeadDim + d] = static_cast<float>(acc);
      }
    }
    std::vector<float> o = Linear(ctx, w_.wo, kModel);
    std::vector<float> a(kModel);
    for (int64_t i = 0; i < kModel; ++i) a[i] = in.x[i] + o[i];
    std::vector<float> h2 = RmsNorm(a, w_.norm2);
    std::vector<float> g = Linear(h2, w_.w1, kHidden);
    std::vector<float> u = Linear(h2, w_.w3, kHidden);
    for (int64_t i = 0; i < kHidden; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    std::vector<float> f = Linear(g, w_.w2, kModel);
    for (int64_t i = 0; i < kModel; ++i) a[i] += f[i];
    return a;
  }

 private:
  DecoderWeights w_;
  std::vector<float> k_, v_;
};

class ExampleProgramTest : public ::testing::TestWithParam<std::optional<std::string>> {};

TEST_P(ExampleProgramTest, ConsecutiveCallsMatchTheReference) {
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, BuildDecoderProgram(GetParam()));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  ReferenceDecoder reference;
  for (int64_t step = 0; step < 5; ++step) {
    DecoderInputs in = MakeDecoderInputs(step);
    ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {1, kModel}, in.x.data())));
    ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kInt64, {1}, in.pos.data())));
    ASSERT_OK(method->SetInput(2, TensorView::Host(DType::kFloat32, {1, kSeq}, in.mask.data())));
    ASSERT_OK(method->Execute());
    std::vector<float> expected = reference.Step(in);
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
