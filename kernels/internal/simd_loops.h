// The float32 inner loops of the elementwise kernels on contiguous data, and of softmax, rms_norm
// and mean along contiguous rows, built three times (for baseline x86-64, for AVX2+FMA and for
// AVX-512) and chosen once per process for the CPU the code runs on; other architectures build the
// baseline only. Nothing here depends on the build machine's CPU.
//
//   const FloatLoops& loops = Loops();
//   loops.add(out, x, y, n);          // out[i] = x[i] + y[i]
//   float m = loops.max(x, n);        // a softmax row: exp(x - m), then scaled by 1 / sum
//   float sum = loops.exp_sum(out, x, m, n);
//   loops.mul_scalar(out, out, 1.0f / sum, n);
//
// The elementwise loops give the same bits at every level: the same IEEE operations per element,
// no contraction. exp fuses its multiply-adds where the level has them (AVX2 and AVX-512, which
// agree bit for bit) and rounds each twice at the baseline; every level is within 2 ulp. The
// reductions (max aside) sum in as many lanes as the level's
// registers hold, then across the lanes, so they round differently per level and from a
// sequential loop: float sums by a few ulp per element, double sums by double rounding. `out` may
// be `x` (or `y`) exactly, for in-place forms; no other overlap. Nothing here allocates.
//
// Thread safety: Loops() and ActiveSimdLevel() may run anywhere; ForceSimdLevel is for tests and
// benchmarks, called while no kernel runs.
#ifndef FERRY_KERNELS_INTERNAL_SIMD_LOOPS_H_
#define FERRY_KERNELS_INTERNAL_SIMD_LOOPS_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace ferry::internal {

enum class SimdLevel : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// "baseline", "avx2", "avx512".
const char* SimdLevelName(SimdLevel level);

struct FloatLoops {
  using Binary = void (*)(float* out, const float* x, const float* y, int64_t n);
  using Scalar = void (*)(float* out, const float* x, float s, int64_t n);
  using Unary = void (*)(float* out, const float* x, int64_t n);
  Binary add, sub, mul, div;
  Scalar add_scalar, sub_scalar, mul_scalar, div_scalar;
  Unary relu;
  // out[i] = exp(x[i]), within 2 ulp of the correctly rounded value; exp(-inf) = 0,
  // exp(inf) = inf, NaN stays NaN; underflows to 0 below about -103.97, overflows above 88.72.
  Unary exp;
  // out[i] = gelu's tanh approximation of x[i], through `exp` (within 1e-6 of it, relative to
  // max(1, |result|)); out may be x.
  Unary gelu_tanh;
  // out[i] = gelu(x[i]) = 0.5 x (1 + erf(x / sqrt(2))), through `exp` and a fit of erfc: within
  // 1e-6 + 2e-7 x^2 of it, relative (exp's argument -x^2 / 2 rounds); out may be x.
  Unary gelu;
  // The largest element, skipping NaN as std::fmax does; -inf for n = 0 or all NaN.
  float (*max)(const float* x, int64_t n);
  // out[i] = exp(x[i] - shift) (as `exp`), returning the float sum of the out[i].
  float (*exp_sum)(float* out, const float* x, float shift, int64_t n);
  // The sum of the x[i], and of their squares, in double.
  double (*sum)(const float* x, int64_t n);
  double (*sum_squares)(const float* x, int64_t n);
  // out[i] = (x[i] * s) * w[i], rms_norm's last step.
  void (*scale_mul)(float* out, const float* x, float s, const float* w, int64_t n);
  // out[i * ldo + j] = sum over p < k of x[i * ldx + p] * w[j * ldw + p], plus bias[j *
  // bias_stride] when bias is not null, for i < rows and j < n: linear's x w^T over rows of
  // contiguous elements. The products are summed in the level's lanes (fused where the level has
  // fused multiply-add), then across them. `out` overlaps neither input.
  void (*rows_by_transposed)(float* out, int64_t ldo, const float* x, int64_t ldx, int64_t rows,
                             const float* w, int64_t ldw, int64_t n, int64_t k, const float* bias,
                             int64_t bias_stride);
};

// Defined once per level (kernels/internal/simd_loops_body.inc).
namespace simd_baseline { const FloatLoops& Table(); }
namespace simd_avx2 { const FloatLoops& Table(); }
namespace simd_avx512 { const FloatLoops& Table(); }

// Chooses the level (once) and returns its loops.
const FloatLoops& SelectLoops();

inline std::atomic<const FloatLoops*> g_active_loops{nullptr};

// The loops of the active level.
inline const FloatLoops& Loops() {
  const FloatLoops* loops = g_active_loops.load(std::memory_order_relaxed);
  return loops != nullptr ? *loops : SelectLoops();
}

SimdLevel ActiveSimdLevel();
// The levels this build has and this CPU runs, baseline first.
std::vector<SimdLevel> AvailableSimdLevels();
// Uses `level` from now on; FailedPrecondition naming it when this build or CPU lacks it.
absl::Status ForceSimdLevel(SimdLevel level);

}  // namespace ferry::internal

#endif  // FERRY_KERNELS_INTERNAL_SIMD_LOOPS_H_
