#include "bench/common/interleaved.h"

#include <algorithm>
#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "ferry/base/status_macros.h"

namespace ferry::bench {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

absl::StatusOr<std::vector<double>> Interleaved(const std::vector<Batch>& sides, int reps,
                                                double target_ms) {
  const size_t n = sides.size();
  std::vector<int64_t> iterations(n, 1);
  auto time_batch = [&](size_t side, int64_t iters) -> absl::StatusOr<double> {
    const Clock::time_point t0 = Clock::now();
    const bool ok = sides[side](iters);
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    if (!ok) return absl::InternalError("a timed call failed");
    return ns;
  };
  for (size_t s = 0; s < n; ++s) {  // calibration, untimed: double until a batch is a tenth
    for (;;) {
      FERRY_ASSIGN_OR_RETURN(double ns, time_batch(s, iterations[s]));
      if (ns >= target_ms * 1e5) {
        iterations[s] =
            std::max<int64_t>(1, static_cast<int64_t>(iterations[s] * target_ms * 1e6 / ns));
        break;
      }
      iterations[s] *= 2;
    }
  }
  std::vector<std::vector<double>> per_call(n);
  for (int r = 0; r < reps; ++r) {
    for (size_t k = 0; k < n; ++k) {
      const size_t s = (k + r) % n;
      FERRY_ASSIGN_OR_RETURN(double ns, time_batch(s, iterations[s]));
      per_call[s].push_back(ns / static_cast<double>(iterations[s]));
    }
  }
  std::vector<double> medians;
  for (auto& v : per_call) medians.push_back(Median(std::move(v)));
  return medians;
}

std::string FormatTime(double ns) {
  if (ns < 1e3) return absl::StrFormat("%.0f ns", ns);
  const char* unit = "us";
  double v = ns / 1e3;
  if (ns >= 1e9) {
    unit = "s";
    v = ns / 1e9;
  } else if (ns >= 1e6) {
    unit = "ms";
    v = ns / 1e6;
  }
  return absl::StrFormat(v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, unit);
}

}  // namespace ferry::bench
