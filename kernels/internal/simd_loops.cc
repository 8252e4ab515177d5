#include "ferry/kernels/internal/simd_loops.h"

#include "absl/strings/str_cat.h"

namespace ferry::internal {
namespace {

bool CpuRuns(SimdLevel level) {
#if defined(FERRY_SIMD_X86)
  switch (level) {
    case SimdLevel::kBaseline:
      return true;
    case SimdLevel::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case SimdLevel::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  }
  return false;
#else
  return level == SimdLevel::kBaseline;
#endif
}

const FloatLoops& TableOf(SimdLevel level) {
#if defined(FERRY_SIMD_X86)
  if (level == SimdLevel::kAvx512) return simd_avx512::Table();
  if (level == SimdLevel::kAvx2) return simd_avx2::Table();
#endif
  return simd_baseline::Table();
}

std::atomic<int> g_level{-1};

}  // namespace

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kBaseline:
      return "baseline";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::vector<SimdLevel> AvailableSimdLevels() {
  std::vector<SimdLevel> out;
  for (SimdLevel level : {SimdLevel::kBaseline, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (CpuRuns(level)) out.push_back(level);
  }
  return out;
}

const FloatLoops& SelectLoops() {
  const SimdLevel best = AvailableSimdLevels().back();
  // Racing first calls choose the same level.
  int expected = -1;
  g_level.compare_exchange_strong(expected, static_cast<int>(best));
  const FloatLoops& loops = TableOf(static_cast<SimdLevel>(g_level.load()));
  g_active_loops.store(&loops, std::memory_order_relaxed);
  return loops;
}

SimdLevel ActiveSimdLevel() {
  if (g_level.load() < 0) SelectLoops();
  return static_cast<SimdLevel>(g_level.load());
}

absl::Status ForceSimdLevel(SimdLevel level) {
  if (!CpuRuns(level)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SIMD level ", SimdLevelName(level), " is not available in this build on this CPU"));
  }
  g_level.store(static_cast<int>(level));
  g_active_loops.store(&TableOf(level), std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace ferry::internal
