// The float32 inner loops of the elementwise kernels on contiguous data, built three times (for
// baseline x86-64, for AVX2+FMA and for AVX-512) and chosen once per process for the CPU the code
// runs on; other architectures build the baseline only. Nothing here depends on the build
// machine's CPU.
//
//   const FloatLoops& loops = Loops();
//   loops.add(out, x, y, n);          // out[i] = x[i] + y[i]
//
// Every loop gives the same bits at every level: one IEEE operation per element, no reassociation
// and no contraction. `out` may be `x` (or `y`) exactly, for in-place forms; no other overlap.
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
