// Each SIMD level this CPU runs gives the elementwise kernels the same bits as a naive loop in the
// test, on contiguous float32 tensors long enough to take the SIMD loops (and ragged lengths
// that leave a remainder), out of place and in place, with tensor and scalar operands. The row
// loops (exp, max, sums) stay within stated bounds of references computed here in double, max with
// the same bits at every level and exp with the same bits at the levels with fused multiply-add
// (AVX2, AVX-512); softmax, rms_norm and mean on [rows, n] tensors stay within them too.
#include "ferry/kernels/internal/simd_loops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ferry/base/tensor.h"
#include "ferry/kernels/op_registry.h"
#include "gtest/gtest.h"
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

// ---- row loops: exp, max, sums; softmax, rms_norm and mean ---------------------------------

// Lengths around the 4-, 8- and 16-lane blocks of the row loops.
const std::vector<int64_t> kRowLengths = {1, 7, 8, 15, 16, 17, 63, 64, 65, 1000};

// Deterministic values in [lo, hi), not a simple progression.
std::vector<float> Spread(int64_t n, int seed, float lo, float hi) {
  std::vector<float> v(n);
  uint32_t state = 2463534242u + static_cast<uint32_t>(seed) * 7919u;
  for (int64_t i = 0; i < n; ++i) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    v[i] = lo + (hi - lo) * static_cast<float>(state >> 8) / 16777216.0f;
  }
  return v;
}

// Distance in units in the last place between two finite floats of the same sign (or zero).
int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof(a));
  std::memcpy(&ib, &b, sizeof(b));
  if ((ia < 0) != (ib < 0)) return (ia & 0x7fffffff) + (ib & 0x7fffffff);
  return std::abs(static_cast<int64_t>(ia) - ib);
}

// Every step-th float bit pattern from 0: both signs, subnormals to the largest floats, NaNs and
// infinities.
std::vector<float> EveryNthBitPattern(uint32_t step) {
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += step) {
    const uint32_t b = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, sizeof(f));
    x.push_back(f);
  }
  return x;
}

// Whether this build has `level` and this CPU runs it.
bool Runs(SimdLevel level) {
  const std::vector<SimdLevel> levels = internal::AvailableSimdLevels();
  return std::find(levels.begin(), levels.end(), level) != levels.end();
}

// exp rounded once from double: correctly rounded but for rare double-rounding ties.
float ReferenceExp(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }

constexpr int64_t kExpMaxUlp = 2;

TEST_P(SimdLoopsTest, ExpIsWithinTwoUlpOfStdExpOverTheWholeFloatRange) {
  const internal::FloatLoops& loops = internal::Loops();
  // Every 251st bit pattern, in chunks of 1000 and a ragged last one.
  const std::vector<float> x = EveryNthBitPattern(251);
  std::vector<float> got(x.size());
  for (size_t i = 0; i < x.size(); i += 1000) {
    const auto len = static_cast<int64_t>(std::min<size_t>(1000, x.size() - i));
    loops.exp(got.data() + i, x.data() + i, len);
  }
  int64_t worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = ReferenceExp(x[i]);
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << "exp(NaN) = " << got[i];
      continue;
    }
    // inf is one ulp above the largest float, 0 one below the smallest subnormal.
    const int64_t ulp = UlpDistance(got[i], want);
    if (ulp > worst) {
      worst = ulp;
      worst_x = x[i];
    }
  }
  EXPECT_LE(worst, kExpMaxUlp) << "at x = " << worst_x;
}

// gelu's tanh form against its definition in double, over -20..20 in small steps and the edges
// (infinities, NaN, the largest floats), in place and out of place, with a ragged tail.
TEST_P(SimdLoopsTest, GeluTanhMatchesItsDefinitionInDouble) {
  const internal::FloatLoops& loops = internal::Loops();
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) * 0.005f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {inf, -inf, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  1e-30f, -1e-30f, 0.0f}) {
    x.push_back(v);
  }
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> got(x.size());
  loops.gelu_tanh(got.data(), x.data(), static_cast<int64_t>(x.size()));
  std::vector<float> in_place = x;
  loops.gelu_tanh(in_place.data(), in_place.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    SCOPED_TRACE(absl::StrCat("x = ", v));
    EXPECT_EQ(std::bit_cast<uint32_t>(in_place[i]), std::bit_cast<uint32_t>(got[i]));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(got[i]));
      continue;
    }
    if (std::isinf(v)) {
      // The definition gives inf * 1 at +inf and -inf * 0, NaN, at -inf (as ATen's does).
      if (v > 0) {
        EXPECT_EQ(got[i], inf);
      } else {
        EXPECT_TRUE(std::isnan(got[i]));
      }
      continue;
    }
    const double want = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(got[i], want, 1e-6 * std::max(1.0, std::fabs(want)));
  }
}

// gelu's exact form against std::erf in double, over -12..12 in small steps (relative accuracy
// where 1 + erf cancels, for negative inputs) and the edges.
TEST_P(SimdLoopsTest, GeluMatchesTheErfFormInDouble) {
  const internal::FloatLoops& loops = internal::Loops();
  std::vector<float> x;
  for (int i = -2400; i <= 2400; ++i) x.push_back(static_cast<float>(i) * 0.005f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {inf, -inf, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  1e-30f, -1e-30f, 0.0f, -30.0f}) {
    x.push_back(v);
  }
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> got(x.size());
  loops.gelu(got.data(), x.data(), static_cast<int64_t>(x.size()));
  std::vector<float> in_place = x;
  loops.gelu(in_place.data(), in_place.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    SCOPED_TRACE(absl::StrCat("x = ", v));
    EXPECT_EQ(std::bit_cast<uint32_t>(in_place[i]), std::bit_cast<uint32_t>(got[i]));
    if (std::isnan(v) || v == -inf) {  // -inf: -inf * 0 in the definition
      EXPECT_TRUE(std::isnan(got[i]));
      continue;
    }
    if (v == inf) {
      EXPECT_EQ(got[i], inf);
      continue;
    }
    const double want = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    // Relative accuracy while the result is a normal float (below it, absolute): 1e-6, plus the
    // float rounding of exp's argument -x^2 / 2, which grows with x^2.
    const double rel = 1e-6 + 2e-7 * v * v;
    EXPECT_NEAR(got[i], want, std::max(rel * std::fabs(want), 1e-37));
  }
}

// AVX2 scales by 2^n in two exact steps, AVX-512 with one instruction; both fuse the same
// multiply-adds, so every bit pattern, subnormal results and NaN included, gives the same bits.
TEST(SimdLoops, ExpGivesTheSameBitsOnAvx2AndAvx512) {
#if defined(__x86_64__)
  if (!Runs(SimdLevel::kAvx512) || !Runs(SimdLevel::kAvx2)) {
    GTEST_SKIP() << "this CPU does not run both AVX2 and AVX-512";
  }
  std::vector<float> x = EveryNthBitPattern(97);
  // Every result from the smallest subnormal to the largest float, densely.
  for (float v = -104.0f; v < 89.0f; v += 0.0009765625f) x.push_back(v);
  std::vector<float> avx2(x.size()), avx512(x.size());
  const auto n = static_cast<int64_t>(x.size());
  internal::simd_avx2::Table().exp(avx2.data(), x.data(), n);
  internal::simd_avx512::Table().exp(avx512.data(), x.data(), n);
  ExpectSameBits(avx512, avx2, "exp");
#else
  GTEST_SKIP() << "AVX2 and AVX-512 are x86 levels";
#endif
}

TEST_P(SimdLoopsTest, ExpHandlesInfinitiesNanAndTheEdgesOfTheRange) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-inf,
                                inf,
                                std::numeric_limits<float>::quiet_NaN(),
                                0.0f,
                                -0.0f,
                                -1e30f,
                                -200.0f,
                                -104.0f,
                                -103.0f,
                                -87.5f,
                                88.7f,
                                88.8f,
                                1e30f,
                                -std::numeric_limits<float>::max()};
  std::vector<float> got(x.size());
  internal::Loops().exp(got.data(), x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_EQ(got[1], inf);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[3], 1.0f);
  EXPECT_EQ(got[4], 1.0f);
  EXPECT_EQ(got[5], 0.0f);
  EXPECT_EQ(got[6], 0.0f);
  EXPECT_EQ(got[7], 0.0f);
  for (size_t i = 8; i < 11; ++i) {  // subnormal, tiny normal, near the largest float
    EXPECT_GT(got[i], 0.0f) << x[i];
    EXPECT_LE(UlpDistance(got[i], ReferenceExp(x[i])), kExpMaxUlp) << x[i];
  }
  EXPECT_EQ(got[11], inf);
  EXPECT_EQ(got[12], inf);
  EXPECT_EQ(got[13], 0.0f);
}

TEST_P(SimdLoopsTest, RowLoopsMatchNaiveReferencesAndTheBaseline) {
  const internal::FloatLoops& loops = internal::Loops();
  const internal::FloatLoops& base = internal::simd_baseline::Table();
  // The levels with fused multiply-add give exp the same bits: AVX-512 is checked against AVX2.
  const internal::FloatLoops* same_exp = nullptr;
#if defined(__x86_64__)
  if (GetParam() == SimdLevel::kAvx512 && Runs(SimdLevel::kAvx2)) {
    same_exp = &internal::simd_avx2::Table();
  }
#endif
  for (int64_t n : kRowLengths) {
    const std::string at = " n=" + std::to_string(n);
    const std::vector<float> x = Spread(n, static_cast<int>(n), -30.0f, 30.0f);
    const std::vector<float> w = Spread(n, 99, 0.5f, 2.0f);

    float max = -std::numeric_limits<float>::infinity();
    for (float v : x) max = std::fmax(max, v);
    EXPECT_EQ(loops.max(x.data(), n), max) << at;

    std::vector<float> e(n), e_base(n);
    const float sum = loops.exp_sum(e.data(), x.data(), max, n);
    const float sum_base = base.exp_sum(e_base.data(), x.data(), max, n);
    if (same_exp != nullptr) {
      std::vector<float> e_same(n);
      same_exp->exp_sum(e_same.data(), x.data(), max, n);
      ExpectSameBits(e, e_same, "exp_sum against AVX2" + at);
    }
    for (int64_t i = 0; i < n; ++i) {
      // Both within 2 ulp of the reference, on the same side of it or not.
      EXPECT_LE(UlpDistance(e[i], e_base[i]), 2 * kExpMaxUlp) << i << at;
    }
    EXPECT_NEAR(sum, sum_base, 1e-6 * sum_base) << at;
    double want_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_LE(UlpDistance(e[i], ReferenceExp(x[i] - max)), kExpMaxUlp) << i << at;
      want_sum += e[i];
    }
    EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << at;

    double want_sq = 0, want_plain = 0;
    for (float v : x) {
      want_plain += v;
      want_sq += static_cast<double>(v) * v;
    }
    EXPECT_NEAR(loops.sum(x.data(), n), want_plain, 1e-12 * want_sq) << at;
    EXPECT_NEAR(loops.sum_squares(x.data(), n), want_sq, 1e-12 * want_sq) << at;

    std::vector<float> scaled(n), want_scaled(n);
    loops.scale_mul(scaled.data(), x.data(), 0.37f, w.data(), n);
    for (int64_t i = 0; i < n; ++i) want_scaled[i] = x[i] * 0.37f * w[i];
    ExpectSameBits(scaled, want_scaled, "scale_mul" + at);
  }
}

// A few rows by a transposed weight, at every block shape the loop has (rows and columns around
// its blocks), row lengths around the vector width (a remainder, none, shorter than a vector,
// none at all), rows of x, w and out longer than the elements they hold, with and without a
// strided bias; against a double reference, within float summation's error.
TEST_P(SimdLoopsTest, RowsByTransposedMatchesADoubleReference) {
  const internal::FloatLoops& loops = internal::Loops();
  for (int64_t rows : {1, 2, 3, 4, 5, 7, 9}) {
    for (int64_t n : {1, 3, 4, 5, 9}) {
      for (int64_t k : {0, 1, 7, 16, 17, 100}) {
        for (bool with_bias : {false, true}) {
          const std::string at = " rows=" + std::to_string(rows) + " n=" + std::to_string(n) +
                                 " k=" + std::to_string(k) + (with_bias ? " bias" : "");
          const int64_t ldx = k + 3, ldw = k + 5, ldo = n + 2, bias_stride = 2;
          const std::vector<float> x = Spread(rows * ldx, static_cast<int>(rows + k), -2, 2);
          const std::vector<float> w = Spread(n * ldw, static_cast<int>(n * 7 + k), -2, 2);
          const std::vector<float> bias = Spread(n * bias_stride, 5, -1, 1);
          std::vector<float> out(rows * ldo, -99.0f);
          loops.rows_by_transposed(out.data(), ldo, x.data(), ldx, rows, w.data(), ldw, n, k,
                                   with_bias ? bias.data() : nullptr, bias_stride);
          for (int64_t i = 0; i < rows; ++i) {
            for (int64_t j = 0; j < ldo; ++j) {
              if (j >= n) {  // past the row's elements: untouched
                EXPECT_EQ(out[i * ldo + j], -99.0f) << i << "," << j << at;
                continue;
              }
              double want = with_bias ? bias[j * bias_stride] : 0.0, magnitude = std::abs(want);
              for (int64_t p = 0; p < k; ++p) {
                want += double(x[i * ldx + p]) * w[j * ldw + p];
                magnitude += std::abs(double(x[i * ldx + p]) * w[j * ldw + p]);
              }
              // Float sums of k + 1 terms: each rounding at most 2^-24 of the running magnitude.
              EXPECT_NEAR(out[i * ldo + j], want, (k + 2) * 0x1p-24 * magnitude + 1e-30)
                  << i << "," << j << at;
            }
          }
        }
      }
    }
  }
}

TEST_P(SimdLoopsTest, MaxSkipsNanLikeFmax) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : kRowLengths) {
    std::vector<float> x = Spread(n, 5, -3.0f, 3.0f);
    for (int64_t i = 0; i < n; i += 3) x[i] = nan;
    float want = -std::numeric_limits<float>::infinity();
    for (float v : x) want = std::fmax(want, v);
    if (std::isnan(want)) want = -std::numeric_limits<float>::infinity();  // all NaN
    EXPECT_EQ(internal::Loops().max(x.data(), n), want) << n;
  }
}

// Runs op on args with one result tensor `out`.
void RunKernel(const OpRegistry& ops, const std::string& op, std::vector<OpArg> args,
               TensorRef& out) {
  TensorRef* res = &out;
  ASSERT_OK(ops.Find(op)->kernel({args.data(), args.size()}, {&res, 1}));
}

// Softmax of `x` ([rows, n], row-major) along its last dimension into `out` (contiguous rows),
// and of the same data seen as the transposed [n, rows] view along dimension 0 into `strided`
// (the strided kernel): the two should agree.
void SoftmaxBothWays(const OpRegistry& ops, std::vector<float>& x, int64_t rows, int64_t n,
                     std::vector<float>& out, std::vector<float>& strided) {
  TensorRef tx = TensorRef::Contiguous(DType::kFloat32, {rows, n}, x.data());
  TensorRef to = TensorRef::Contiguous(DType::kFloat32, {rows, n}, out.data());
  const Scalar last = Scalar::Int(-1), first = Scalar::Int(0);
  OpArg a0, a1;
  a0.tensor = &tx;
  a1.scalar = &last;
  RunKernel(ops, "softmax", {a0, a1}, to);
  // The same data as [n, rows] with strides {1, n}.
  TensorRef txt = TensorRef::Contiguous(DType::kFloat32, {n, rows}, x.data());
  txt.strides[0] = 1;
  txt.strides[1] = n;
  TensorRef tst = TensorRef::Contiguous(DType::kFloat32, {n, rows}, strided.data());
  tst.strides[0] = 1;
  tst.strides[1] = n;
  a0.tensor = &txt;
  a1.scalar = &first;
  RunKernel(ops, "softmax", {a0, a1}, tst);
}

// Softmax along the last dimension of [rows, n], each row against a double reference: elements
// within 2e-6 relative (plus the rounding of the float x - max that both kernels share), each
// row's sum within 1e-6 of 1; and against the strided kernel (softmax along dimension 0 of the
// transposed view of the same data) within twice that bound.
TEST_P(SimdLoopsTest, SoftmaxRowsMatchTheReferenceAndTheStridedKernel) {
  constexpr int64_t kRows = 3;
  for (int64_t n : kRowLengths) {
    const std::string at = " n=" + std::to_string(n);
    std::vector<float> x = Spread(kRows * n, 7, -40.0f, 40.0f);
    std::vector<float> out(kRows * n, -1.0f), strided(kRows * n, -1.0f);
    SoftmaxBothWays(ops_, x, kRows, n, out, strided);
    for (int64_t r = 0; r < kRows; ++r) {
      const float* xr = x.data() + r * n;
      double max = -INFINITY, sum = 0, got_sum = 0;
      for (int64_t j = 0; j < n; ++j) max = std::max<double>(max, xr[j]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(xr[j] - max);
      for (int64_t j = 0; j < n; ++j) {
        const double d = xr[j] - max;
        const double want = std::exp(d) / sum;
        const float got = out[r * n + j];
        got_sum += got;
        // Both kernels subtract in float: x - max rounds by up to |x - max| * 2^-24, which exp
        // turns into as much relative error, on top of the 2e-6.
        const double tol = (2e-6 + std::abs(d) * 0x1p-24) * want + 1e-38;
        ASSERT_NEAR(got, want, tol) << "row " << r << " element " << j << at;
        ASSERT_NEAR(strided[r * n + j], got, 2 * tol) << "strided" << at;
      }
      EXPECT_NEAR(got_sum, 1.0, 1e-6) << "row " << r << at;
    }
  }
}

// What the strided kernel does with infinities and NaN, the contiguous rows do too.
TEST_P(SimdLoopsTest, SoftmaxRowsWithInfinitiesAndNanMatchTheStridedKernel) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr int64_t n = 17;
  std::vector<std::vector<float>> rows(5, Spread(n, 3, -2.0f, 2.0f));
  rows[0][4] = -inf;        // that element 0, the rest finite
  rows[1][16] = inf;        // NaN row (inf - inf)
  rows[2].assign(n, -inf);  // NaN row (-inf - -inf)
  rows[3][9] = nan;         // NaN row
  rows[4][0] = -1e30f;      // underflows to exactly 0
  std::vector<float> x;
  for (const auto& r : rows) x.insert(x.end(), r.begin(), r.end());
  const int64_t kRows = static_cast<int64_t>(rows.size());
  std::vector<float> out(x.size()), strided(x.size());
  SoftmaxBothWays(ops_, x, kRows, n, out, strided);
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(out[4 * n], 0.0f);
  for (int64_t r = 1; r <= 3; ++r) {
    for (int64_t j = 0; j < n; ++j) EXPECT_TRUE(std::isnan(out[r * n + j])) << r << " " << j;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(strided[i])) {
      EXPECT_TRUE(std::isnan(out[i])) << i;
    } else {
      EXPECT_NEAR(out[i], strided[i], 2e-6 * strided[i]) << i;
    }
  }
}

// rms_norm of [rows, n] by a weight of n against a double reference, within 1e-6 relative.
TEST_P(SimdLoopsTest, RmsNormRowsMatchTheReference) {
  constexpr int64_t kRows = 3;
  constexpr double kEps = 1e-5;
  for (int64_t n : kRowLengths) {
    const std::string at = " n=" + std::to_string(n);
    std::vector<float> x = Spread(kRows * n, 11, -4.0f, 4.0f), w = Spread(n, 12, -2.0f, 2.0f);
    std::vector<float> out(kRows * n, -1.0f);
    TensorRef tx = TensorRef::Contiguous(DType::kFloat32, {kRows, n}, x.data());
    TensorRef tw = TensorRef::Contiguous(DType::kFloat32, {n}, w.data());
    TensorRef to = TensorRef::Contiguous(DType::kFloat32, {kRows, n}, out.data());
    const Scalar eps = Scalar::Double(kEps);
    OpArg a0, a1, a2;
    a0.tensor = &tx;
    a1.tensor = &tw;
    a2.scalar = &eps;
    RunKernel(ops_, "rms_norm", {a0, a1, a2}, to);
    for (int64_t r = 0; r < kRows; ++r) {
      double sq = 0;
      for (int64_t j = 0; j < n; ++j) sq += double(x[r * n + j]) * x[r * n + j];
      const double scale = 1.0 / std::sqrt(sq / n + kEps);
      for (int64_t j = 0; j < n; ++j) {
        const double want = double(x[r * n + j]) * scale * w[j];
        ASSERT_NEAR(out[r * n + j], want, 1e-6 * std::abs(want) + 1e-38)
            << "row " << r << " element " << j << at;
      }
    }
  }
}

// mean over the last dimension of [rows, n], and over the last two of [2, rows, n], against
// double references within 1e-6 relative.
TEST_P(SimdLoopsTest, MeanOverContiguousDimensionsMatchesTheReference) {
  constexpr int64_t kRows = 3;
  for (int64_t n : kRowLengths) {
    const std::string at = " n=" + std::to_string(n);
    std::vector<float> x = Spread(2 * kRows * n, 13, -1.0f, 3.0f);
    std::vector<float> rows_out(2 * kRows), blocks_out(2);
    TensorRef tx = TensorRef::Contiguous(DType::kFloat32, {2, kRows, n}, x.data());
    TensorRef tr = TensorRef::Contiguous(DType::kFloat32, {2, kRows}, rows_out.data());
    TensorRef tb = TensorRef::Contiguous(DType::kFloat32, {2}, blocks_out.data());
    const Scalar last = Scalar::IntList({-1}), last_two = Scalar::IntList({1, 2});
    const Scalar keep = Scalar::Int(0);
    OpArg a0, a1, a2;
    a0.tensor = &tx;
    a1.scalar = &last;
    a2.scalar = &keep;
    RunKernel(ops_, "mean", {a0, a1, a2}, tr);
    a1.scalar = &last_two;
    RunKernel(ops_, "mean", {a0, a1, a2}, tb);
    for (int64_t b = 0; b < 2; ++b) {
      double block = 0;
      for (int64_t r = 0; r < kRows; ++r) {
        double row = 0;
        for (int64_t j = 0; j < n; ++j) row += x[(b * kRows + r) * n + j];
        block += row;
        EXPECT_NEAR(rows_out[b * kRows + r], row / n, 1e-6 * std::abs(row / n)) << at;
      }
      EXPECT_NEAR(blocks_out[b], block / (kRows * n), 1e-6 * std::abs(block / (kRows * n))) << at;
    }
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
  for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (Runs(level)) continue;
    EXPECT_THAT(internal::ForceSimdLevel(level),
                testing::StatusIs(absl::StatusCode::kFailedPrecondition,
                                  ::testing::HasSubstr(internal::SimdLevelName(level))));
  }
}

}  // namespace
}  // namespace ferry
