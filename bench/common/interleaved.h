// Timing for the side-by-side tools (bench/peers, bench/blas): contenders take turns in one loop,
// so that a noisy machine slows them alike, and the figure is the median over the turns.
//
//   std::vector<Batch> sides = {[&](int64_t n) { for (...) a(); return true; }, ...};
//   absl::StatusOr<std::vector<double>> ns = Interleaved(sides, /*reps=*/15, /*target_ms=*/5);
#ifndef FERRY_BENCH_COMMON_INTERLEAVED_H_
#define FERRY_BENCH_COMMON_INTERLEAVED_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry::bench {

// Runs `iterations` calls; false when one failed.
using Batch = std::function<bool(int64_t iterations)>;

// The median of `v` (not empty).
double Median(std::vector<double> v);

// Nanoseconds per call of each side, medians over `reps` repetitions in which the sides take
// turns (repetition r starts with side r mod sides), each repetition one batch per side of about
// `target_ms`, sized by an untimed calibration first. InternalError when a batch fails.
absl::StatusOr<std::vector<double>> Interleaved(const std::vector<Batch>& sides, int reps,
                                                double target_ms);

// Three significant digits (two below 10 ns), in ns, us, ms or s.
std::string FormatTime(double ns);

}  // namespace ferry::bench

#endif  // FERRY_BENCH_COMMON_INTERLEAVED_H_
