// Each SIMD level this CPU runs gives the elementwise kernels the same bits as a naive loop in the
// test, on contiguous float32 tensors long enough to take the SIMD loops (and ragged lengths
// that leave a remainder), out of place and in place, with tensor and scalar operands.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ferry/kernels/internal/simd_loops.h"
#include "ferry/kernels/op_registry.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using internal::SimdLevel;

// Resets the level to the process's choice when the test ends.
class SimdLoopsTest : public ::testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    saved_ = internal::ActiveSimdLevel();
    ASSERT_OK(internal::ForceSimdLevel(GetParam()));
    ASSERT_EQ(internal::ActiveSimdLevel(), GetParam());
  }
  void TearDown() override { ASSERT_OK(internal::ForceSimdLevel(saved_)); }
  SimdLevel saved_ = SimdLevel::kBaseline;
  OpRegistry ops_ = OpRegistry::WithBuiltIns();
};

std::vector<float> Values(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>((i * 37 + seed * 11) % 101) / 7.0f - 7.0f;
  }
  if (n > 3) {
    v[1] = std::numeric_limits<float>::quiet_NaN();
    v[2] = -0.0f;
    v[3] = std::numeric_limits<float>::infinity();
  }
  return v;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(SameBits(got[i], want[i]) || (std::isnan(got[i]) && std::isnan(want[i])))
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

const std::vector<int64_t> kLengths = {1, 255, 256, 257, 1000, 4099, 65536};

TEST_P(SimdLoopsTest, BinaryOpsMatchANaiveLoop) {
  const std::vector<std::pair<std::string, std::function<float(float, float)>>> cases = {
      {"add", [](float a, float b) { return a + b; }},
      {"sub", [](float a, float b) { return a - b; }},
      {"mul", [](float a, float b) { return a * b; }},
      {"div", [](float a, float b) { return a / b; }}};
  for (const auto& [op, f] : cases) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = Values(n, 1), y = Values(n, 2);
      std::vector<float> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = f(x[i], y[i]);
      std::vector<float> a = x, b = y, out(n, 123.0f);
      TensorRef ta = TensorRef::Contiguous(DType::kFloat32, {n}, a.data());
      TensorRef tb = TensorRef::Contiguous(DType::kFloat32, {n}, b.data());
      TensorRef to = TensorRef::Contiguous(DType::kFloat32, {n}, out.data());
      OpArg args[2];
      args[0].tensor = &ta;
      args[1].tensor = &tb;
      TensorRef* res = &to;
      ASSERT_OK(ops_.Find(op)->kernel({args, 2}, {&res, 1}));
      ExpectSameBits(out, want, op + " n=" + std::to_string(n));
      ExpectSameBits(a, x, op + " input untouched");
      // In place: the result is argument 0.
      TensorRef* self = &ta;
      ASSERT_OK(ops_.Find(op + "_")->kernel({args, 2}, {&self, 1}));
      ExpectSameBits(a, want, op + "_ n=" + std::to_string(n));
      // A scalar right-hand side.
      const Scalar s = Scalar::Double(1.75);
      OpArg scalar_args[2];
      scalar_args[0].tensor = &tb;
      scalar_args[1].scalar = &s;
      std::vector<float> want_scalar(n);
      for (int64_t i = 0; i < n; ++i) want_scalar[i] = f(y[i], 1.75f);
      ASSERT_OK(ops_.Find(op)->kernel({scalar_args, 2}, {&res, 1}));
      ExpectSameBits(out, want_scalar, op + " scalar n=" + std::to_string(n));
    }
  }
}

TEST_P(SimdLoopsTest, ReluMatchesANaiveLoopKeepingNanAndNegativeZero) {
  for (int64_t n : kLengths) {
    const std::vector<float> x = Values(n, 3);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = x[i] < 0.0f ? 0.0f : x[i];
    std::vector<float> a = x, out(n, 5.0f);
    TensorRef ta = TensorRef::Contiguous(DType::kFloat32, {n}, a.data());
    TensorRef to = TensorRef::Contiguous(DType::kFloat32, {n}, out.data());
    OpArg arg;
    arg.tensor = &ta;
    TensorRef* res = &to;
    ASSERT_OK(ops_.Find("relu")->kernel({&arg, 1}, {&res, 1}));
    ExpectSameBits(out, want, "relu n=" + std::to_string(n));
    if (n > 3) {
      EXPECT_TRUE(std::isnan(out[1]));
      EXPECT_TRUE(std::signbit(out[2]));  // -0 stays -0
    }
    TensorRef* self = &ta;
    ASSERT_OK(ops_.Find("relu_")->kernel({&arg, 1}, {&self, 1}));
    ExpectSameBits(a, want, "relu_ n=" + std::to_string(n));
  }
}

std::string LevelName(const ::testing::TestParamInfo<SimdLevel>& info) {
  return internal::SimdLevelName(info.param);
}

INSTANTIATE_TEST_SUITE_P(EveryLevelThisCpuRuns, SimdLoopsTest,
                         ::testing::ValuesIn(internal::AvailableSimdLevels()), LevelName);

TEST(SimdLevels, BaselineIsAlwaysAvailableAndTheBestIsActive) {
  const std::vector<SimdLevel> levels = internal::AvailableSimdLevels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), SimdLevel::kBaseline);
  EXPECT_EQ(internal::ActiveSimdLevel(), levels.back());
}

TEST(SimdLevels, ALevelTheCpuLacksIsRefused) {
  const std::vector<SimdLevel> levels = internal::AvailableSimdLevels();
  for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (std::find(levels.begin(), levels.end(), level) != levels.end()) continue;
    EXPECT_THAT(internal::ForceSimdLevel(level),
                testing::StatusIs(absl::StatusCode::kFailedPrecondition,
                                  ::testing::HasSubstr(internal::SimdLevelName(level))));
  }
}

}  // namespace
}  // namespace ferry
