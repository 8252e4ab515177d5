// Shorthands for the conformance cases of docs/placement.md.
//
// `a`, `b`, `c` are float32 [2, 2] inputs (16 bytes); D0/D1 are graph-backend delegate calls with
// target_device "cuda:0"/"cuda:1", Dcpu with "cpu" and Dnone with none. A delegate of several
// arguments adds them (elementwise, so placement invariance is bit-exact); a delegate of one
// argument doubles it.
//
// The cases run where the program says: `cuda:N` on the machine's GPU N where it has one (and Ferry
// is built with CUDA), else on the stand-in sim:N. ConformanceHarness loads with that map, and the
// expectations name the device through Dev(N), so one suite holds on a machine without a GPU, with
// one GPU (cuda:1 then runs on sim:1, beside the real cuda:0) and with several.
#ifndef FERRY_TESTS_CONFORMANCE_CONFORMANCE_UTIL_H_
#define FERRY_TESTS_CONFORMANCE_CONFORMANCE_UTIL_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/memory/device_registry.h"
#include "gtest/gtest.h"
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

inline const std::string kHostName = "host";

// The sim devices a harness has (RuntimeOptions::sim.count): the cases use cuda:0 to cuda:3.
inline constexpr int kConformanceDevices = 4;

// Whether this machine has the GPU cuda:N, asked once per process.
inline bool MachineHasCuda(int n) {
  static const std::vector<bool> present = [] {
    DeviceRegistryOptions options;
    options.sim.count = 0;
    std::unique_ptr<DeviceRegistry> devices = DeviceRegistry::CreateDefault(options);
    std::vector<bool> found(kConformanceDevices);
    for (int i = 0; i < kConformanceDevices; ++i) {
      found[i] = devices->Find(Device::Cuda(i)) != nullptr;
    }
    return found;
  }();
  return n >= 0 && n < kConformanceDevices && present[n];
}

// The device a node declared on `cuda:N` runs on in these cases, and its name.
inline Device Dev(int n) { return MachineHasCuda(n) ? Device::Cuda(n) : Device::Sim(n); }
inline std::string DevName(int n) { return Dev(n).ToString(); }

// A MethodHarness that loads with the cases' device map (absent GPUs on their sim stand-ins)
// unless a case passes its own.
class ConformanceHarness : public MethodHarness {
 public:
  explicit ConformanceHarness(const ProgramBuilder& builder) : MethodHarness(builder) {
    absl::flat_hash_map<Device, Device> map;
    for (int n = 0; n < kConformanceDevices; ++n) {
      if (!MachineHasCuda(n)) map[Device::Cuda(n)] = Device::Sim(n);
    }
    set_device_map(std::move(map));
  }
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_CONFORMANCE_CONFORMANCE_UTIL_H_
