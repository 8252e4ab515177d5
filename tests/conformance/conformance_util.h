// Shorthands for the conformance cases of docs/placement.md.
//
// `a`, `b`, `c` are float32 [2, 2] inputs (16 bytes); D0/D1 are graph-backend delegate calls with
// target_device "cuda:0"/"cuda:1" (sim:0/sim:1 without a GPU), Dcpu with "cpu" and Dnone with none.
// A delegate of several arguments adds them (elementwise, so placement invariance is bit-exact); a
// delegate of one argument doubles it.
#ifndef FERRY_TESTS_CONFORMANCE_CONFORMANCE_UTIL_H_
#define FERRY_TESTS_CONFORMANCE_CONFORMANCE_UTIL_H_

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ferry/loader/program_builder.h"
#include "tests/testing/method_harness.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {

inline std::vector<ValueId> AddAll(MethodBuilder& g, absl::Span<const ValueId> in) {
  ValueId v = in[0];
  if (in.size() == 1) return {g.Op("mul", {v, g.Double(2.0)})};
  for (size_t i = 1; i < in.size(); ++i) v = g.Op("add", {v, in[i]});
  return {v};
}

// A delegate call named `name` whose single result is also named `name`.
inline ValueId Call(MethodBuilder& m, std::optional<std::string> device, const std::string& name,
                    std::vector<ValueId> args, DelegateOptions options = {}) {
  options.name = name;
  std::vector<ValueId> r = m.GraphDelegate(std::move(device), std::move(args), AddAll, options);
  return r.empty() ? -1 : r[0];
}

inline constexpr size_t k16 = 16;
inline const std::optional<std::string> kD0 = "cuda:0";
inline const std::optional<std::string> kD1 = "cuda:1";
inline const std::optional<std::string> kCpu = "cpu";
inline const std::optional<std::string> kNone = std::nullopt;

// A method "forward" with the three inputs of docs/placement.md's notation.
struct Fixture {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId b = m.Input("b", DType::kFloat32, {2, 2});
  ValueId c = m.Input("c", DType::kFloat32, {2, 2});
};

// Runs the method `calls` times and compares every output with the all-host run (P14):
// bit-exact, since the cases use elementwise ops only.
inline void ExpectSameAsHost(MethodHarness& h, Method& method, int calls = 1) {
  ASSERT_OK_AND_ASSIGN(auto placed, h.Run(method, calls));
  ASSERT_OK_AND_ASSIGN(auto host, h.RunAllHost(calls));
  EXPECT_EQ(placed, host);
}

inline const std::string kSim0 = "sim:0";
inline const std::string kSim1 = "sim:1";
inline const std::string kHostName = "host";

}  // namespace ferry::testing

#endif  // FERRY_TESTS_CONFORMANCE_CONFORMANCE_UTIL_H_
