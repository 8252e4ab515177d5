// matmul and linear through the host BLAS (when Ferry is built with OpenBLAS) and through Ferry's
// own loops agree with a double-precision reference computed here, to 1e-4 relative, for the
// layouts a BLAS takes (row-major and transposed operands, batches, leading dimensions, bias)
// and for those it does not (which must fall back). Each case also checks which path ran.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ferry/kernels/internal/host_blas.h"
#include "ferry/kernels/op_registry.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

std::vector<float> Values(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(static_cast<int>((i * 7919 + seed * 104729) % 2001) - 1000) / 1000.0f;
  }
  return v;
}

// A strided view of `data` with the given sizes and strides (in elements).
TensorRef View(std::vector<float>& data, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  TensorRef t = TensorRef::Contiguous(DType::kFloat32, sizes, data.data());
  for (size_t d = 0; d < strides.size(); ++d) t.strides[d] = strides[d];
  return t;
}

float At(const TensorRef& t, std::vector<int64_t> idx) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides[d];
  return t.data_as<const float>()[off];
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), 1e-4 * std::max(1.0, std::fabs(want[i])))
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

// x [rows, in] (row-major) times w^T (w [out, in], any strides) plus bias[out] when given, in
// double.
std::vector<double> ReferenceLinear(int64_t rows, int64_t in, int64_t outf,
                                    const std::vector<float>& xd, const TensorRef& w,
                                    const float* bias) {
  std::vector<double> want(rows * outf);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t f = 0; f < outf; ++f) {
      double acc = bias != nullptr ? bias[f] : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += double(xd[r * in + i]) * At(w, {f, i});
      want[r * outf + f] = acc;
    }
  }
  return want;
}

// Runs linear(x, w[, bias]) into o; returns the products the calling thread handed to the BLAS.
int64_t RunLinear(const OpRegistry& ops, TensorRef& x, TensorRef& w, TensorRef* bias,
                  TensorRef& o) {
  OpArg args[3];
  args[0].tensor = &x;
  args[1].tensor = &w;
  args[2].tensor = bias;
  TensorRef* res = &o;
  const int64_t before = internal::HostSgemmCalls();
  EXPECT_OK(ops.Find("linear")->kernel({args, bias != nullptr ? 3u : 2u}, {&res, 1}));
  return internal::HostSgemmCalls() - before;
}

class HostBlasTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { internal::UseHostBlas(GetParam()); }
  void TearDown() override { internal::UseHostBlas(true); }
  // Whether a product of the eligible kind must have gone to the BLAS.
  bool ExpectBlas() const { return GetParam() && internal::HaveHostBlas(); }
  OpRegistry ops_ = OpRegistry::WithBuiltIns();
};

// out[b, m, n] = a[b, m, k] x bmat[b, k, n] for a batch of 3, with either operand transposed.
TEST_P(HostBlasTest, MatmulMatchesTheReferenceInEveryLayout) {
  constexpr int64_t B = 3, M = 40, K = 50, N = 60;
  for (int layout = 0; layout < 4; ++layout) {
    const bool ta = layout & 1, tb = layout & 2;
    std::vector<float> ad = Values(B * M * K, 1 + layout), bd = Values(B * K * N, 2 + layout);
    // A transposed operand is a [.., cols, rows] row-major buffer read through swapped strides.
    TensorRef a = ta ? View(ad, {B, M, K}, {M * K, 1, M}) : View(ad, {B, M, K}, {M * K, K, 1});
    TensorRef b = tb ? View(bd, {B, K, N}, {K * N, 1, K}) : View(bd, {B, K, N}, {K * N, N, 1});
    std::vector<float> out(B * M * N, -7.0f);
    TensorRef o = TensorRef::Contiguous(DType::kFloat32, {B, M, N}, out.data());
    std::vector<double> want(B * M * N);
    for (int64_t bi = 0; bi < B; ++bi) {
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          double acc = 0;
          for (int64_t kk = 0; kk < K; ++kk) acc += double(At(a, {bi, i, kk})) * At(b, {bi, kk, j});
          want[(bi * M + i) * N + j] = acc;
        }
      }
    }
    OpArg args[2];
    args[0].tensor = &a;
    args[1].tensor = &b;
    TensorRef* res = &o;
    const int64_t before = internal::HostSgemmCalls();
    ASSERT_OK(ops_.Find("matmul")->kernel({args, 2}, {&res, 1}));
    ExpectClose(out, want, "matmul layout " + std::to_string(layout));
    EXPECT_EQ(internal::HostSgemmCalls() - before, ExpectBlas() ? B : 0) << layout;
  }
}

TEST_P(HostBlasTest, MatmulWithABroadcastOperandFallsBackToFerrysLoops) {
  constexpr int64_t M = 40, K = 50, N = 60;
  std::vector<float> ad = Values(K, 3), bd = Values(K * N, 4);
  TensorRef a = View(ad, {M, K}, {0, 1});  // one row broadcast over M rows
  TensorRef b = View(bd, {K, N}, {N, 1});
  std::vector<float> out(M * N);
  TensorRef o = TensorRef::Contiguous(DType::kFloat32, {M, N}, out.data());
  std::vector<double> want(M * N);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < K; ++kk) acc += double(ad[kk]) * bd[kk * N + j];
      want[i * N + j] = acc;
    }
  }
  OpArg args[2];
  args[0].tensor = &a;
  args[1].tensor = &b;
  TensorRef* res = &o;
  const int64_t before = internal::HostSgemmCalls();
  ASSERT_OK(ops_.Find("matmul")->kernel({args, 2}, {&res, 1}));
  ExpectClose(out, want, "broadcast matmul");
  EXPECT_EQ(internal::HostSgemmCalls(), before);
}

// out[2, 20, F] = x[2, 20, I] w[F, I]^T + bias, with w row-major or a transposed view.
TEST_P(HostBlasTest, LinearMatchesTheReferenceWithAndWithoutBias) {
  constexpr int64_t R0 = 2, R1 = 20, I = 64, F = 48;
  for (int variant = 0; variant < 4; ++variant) {
    const bool transposed_w = variant & 1, with_bias = variant & 2;
    std::vector<float> xd = Values(R0 * R1 * I, 5 + variant), wd = Values(F * I, 6 + variant),
                       bdata = Values(F, 7);
    TensorRef x = TensorRef::Contiguous(DType::kFloat32, {R0, R1, I}, xd.data());
    TensorRef w = transposed_w ? View(wd, {F, I}, {1, F}) : View(wd, {F, I}, {I, 1});
    TensorRef bias = TensorRef::Contiguous(DType::kFloat32, {F}, bdata.data());
    std::vector<float> out(R0 * R1 * F, -3.0f);
    TensorRef o = TensorRef::Contiguous(DType::kFloat32, {R0, R1, F}, out.data());
    const std::vector<double> want =
        ReferenceLinear(R0 * R1, I, F, xd, w, with_bias ? bdata.data() : nullptr);
    const int64_t blas_calls = RunLinear(ops_, x, w, with_bias ? &bias : nullptr, o);
    ExpectClose(out, want, "linear variant " + std::to_string(variant));
    EXPECT_EQ(blas_calls, ExpectBlas() ? 1 : 0) << variant;
  }
}

// A linear of up to 16 contiguous rows (a decode step) by a weight of at least 256 * 256
// elements, and of up to 64 by one of at least 1024 * 1024, runs Ferry's own loop with the BLAS
// on or off; more rows go to the BLAS when it is on. Leading dimensions [rows, 1] collapse to rows.
TEST_P(HostBlasTest, FewRowsRunFerrysOwnLoopAndMatchTheReference) {
  struct Case {
    int64_t rows, in, outf;
    bool own;  // Ferry's loop even with the BLAS on
  };
  for (const Case& c :
       {Case{1, 256, 260, true}, Case{3, 256, 260, true}, Case{16, 256, 260, true},
        Case{17, 256, 260, false}, Case{40, 1024, 1024, true}, Case{65, 1024, 1024, false}}) {
    const std::string what = "linear of " + std::to_string(c.rows) + " rows by [" +
                             std::to_string(c.outf) + ", " + std::to_string(c.in) + "]";
    std::vector<float> xd = Values(c.rows * c.in, 21), wd = Values(c.outf * c.in, 22),
                       bdata = Values(c.outf, 23);
    TensorRef x = TensorRef::Contiguous(DType::kFloat32, {c.rows, 1, c.in}, xd.data());
    TensorRef w = TensorRef::Contiguous(DType::kFloat32, {c.outf, c.in}, wd.data());
    TensorRef bias = TensorRef::Contiguous(DType::kFloat32, {c.outf}, bdata.data());
    std::vector<float> out(c.rows * c.outf, -5.0f);
    TensorRef o = TensorRef::Contiguous(DType::kFloat32, {c.rows, 1, c.outf}, out.data());
    const std::vector<double> want = ReferenceLinear(c.rows, c.in, c.outf, xd, w, bdata.data());
    const int64_t blas_calls = RunLinear(ops_, x, w, &bias, o);
    ExpectClose(out, want, what);
    EXPECT_EQ(blas_calls, ExpectBlas() && !c.own ? 1 : 0) << what;
  }
}

TEST_P(HostBlasTest, SmallProductsStayInFerrysLoops) {
  std::vector<float> xd = Values(4 * 8, 8), wd = Values(8 * 8, 9), out(4 * 8);
  TensorRef x = TensorRef::Contiguous(DType::kFloat32, {4, 8}, xd.data());
  TensorRef w = TensorRef::Contiguous(DType::kFloat32, {8, 8}, wd.data());
  TensorRef o = TensorRef::Contiguous(DType::kFloat32, {4, 8}, out.data());
  OpArg args[2];
  args[0].tensor = &x;
  args[1].tensor = &w;
  TensorRef* res = &o;
  const int64_t before = internal::HostSgemmCalls();
  ASSERT_OK(ops_.Find("linear")->kernel({args, 2}, {&res, 1}));
  EXPECT_EQ(internal::HostSgemmCalls(), before);
  std::vector<double> want(4 * 8);
  for (int r = 0; r < 4; ++r) {
    for (int f = 0; f < 8; ++f) {
      double acc = 0;
      for (int i = 0; i < 8; ++i) acc += double(xd[r * 8 + i]) * wd[f * 8 + i];
      want[r * 8 + f] = acc;
    }
  }
  ExpectClose(out, want, "small linear");
}

INSTANTIATE_TEST_SUITE_P(BlasOnAndOff, HostBlasTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "Blas" : "FerryLoops");
                         });

// HostSgemm itself, around the row count where it turns from sgemv per row to sgemm: every
// combination of transposed operands, with and without accumulating, with leading dimensions
// larger than the rows they hold, into an output that holds NaN where it does not accumulate.
TEST(HostBlas, FewRowsGoThroughMatrixVectorProductsAndAgreeWithTheReference) {
  if (!internal::HaveHostBlas()) GTEST_SKIP() << "built without a host BLAS";
  constexpr int64_t K = 70, N = 50, kPad = 3;
  for (int64_t m = 1; m <= internal::kHostBlasMaxGemvRows + 1; ++m) {
    for (int variant = 0; variant < 8; ++variant) {
      const bool ta = variant & 1, tb = variant & 2, accumulate = variant & 4;
      const std::string what = "m=" + std::to_string(m) + " variant " + std::to_string(variant);
      // op(a) [m, K]: a as [m, lda] rows, or with ta a [K, lda] buffer read transposed; likewise b.
      const int64_t lda = (ta ? m : K) + kPad, ldb = (tb ? K : N) + kPad, ldc = N + kPad;
      std::vector<float> ad = Values((ta ? K : m) * lda, 11 + variant);
      std::vector<float> bd = Values((tb ? N : K) * ldb, 12 + variant);
      std::vector<float> c = Values(m * ldc, 13 + variant);
      if (!accumulate) std::fill(c.begin(), c.end(), std::nanf(""));
      const std::vector<float> c_before = c;
      std::vector<double> want(m * N);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          double acc = accumulate ? c[i * ldc + j] : 0.0;
          for (int64_t p = 0; p < K; ++p) {
            acc += double(ta ? ad[p * lda + i] : ad[i * lda + p]) *
                   (tb ? bd[j * ldb + p] : bd[p * ldb + j]);
          }
          want[i * N + j] = acc;
        }
      }
      const int64_t rows_before = internal::HostSgemvRows();
      internal::HostSgemm(ta, tb, m, N, K, ad.data(), lda, bd.data(), ldb, accumulate, c.data(),
                          ldc);
      EXPECT_EQ(internal::HostSgemvRows() - rows_before,
                m <= internal::kHostBlasMaxGemvRows ? m : 0)
          << what;
      std::vector<float> got(m * N);
      for (int64_t i = 0; i < m; ++i) {
        std::copy(c.begin() + i * ldc, c.begin() + i * ldc + N, got.begin() + i * N);
        for (int64_t j = N; j < ldc; ++j) {  // the padding past each row is left alone
          if (accumulate) {
            EXPECT_EQ(c[i * ldc + j], c_before[i * ldc + j]) << what;
          } else {
            EXPECT_TRUE(std::isnan(c[i * ldc + j])) << what;
          }
        }
      }
      ExpectClose(got, want, what);
    }
  }
}

TEST(HostBlas, NamesTheKernelsItPicked) {
  const std::string kernels = internal::HostBlasKernels();
  if (!internal::HaveHostBlas()) {
    EXPECT_EQ(kernels, "none");
  } else {
    EXPECT_FALSE(kernels.empty());
    EXPECT_NE(kernels, "none");
  }
}

TEST(HostBlas, ThreadsDefaultToOneAndFollowTheSetting) {
  if (!internal::HaveHostBlas()) GTEST_SKIP() << "built without a host BLAS";
  EXPECT_EQ(internal::HostBlasThreads(), 1);
  internal::SetHostBlasThreads(2);
  EXPECT_EQ(internal::HostBlasThreads(), 2);
  internal::SetHostBlasThreads(0);
  EXPECT_EQ(internal::HostBlasThreads(), 1);
}

}  // namespace
}  // namespace ferry
