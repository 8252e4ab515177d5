// Load phase 6 (runtime/load/check_budgets.cc): every device's planned memory against its capacity
// and the caller's limits before anything is allocated: refusals name the device, the bytes and
// the largest values; near the limit, a warning, and the plan shows the totals.
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/devices/host/host_device.h"
#include "ferry/memory/devices/sim/sim_device.h"
#include "ferry/runtime/plan_printer.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// relu of an input of `elements` floats, on the host or (with a device) inside a delegate there:
// its result is planned in that device's arena.
std::unique_ptr<Program> ReluProgram(int64_t rows, int64_t cols,
                                     std::optional<std::string> device) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {rows, cols});
  if (device.has_value()) {
    DelegateOptions options;
    options.name = "big_delegate";
    m.Output(m.GraphDelegate(device, {x}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op("relu", {in[0]}, "big")};
    }, options)[0]);
  } else {
    m.Output(m.Op("relu", {x}, "big"));
  }
  std::vector<uint8_t> bytes = std::move(pb.Build()).value();
  return std::move(Program::FromBytes(bytes)).value();
}

TEST(MemoryBudget, TensorLargerThanTheHostIsRefusedBeforeAnyAllocation) {
  // 2^45 float32 = 128 TiB: no machine this runs on has it.
  std::unique_ptr<Program> program = ReluProgram(int64_t{1} << 25, int64_t{1} << 20, std::nullopt);
  Runtime rt;
  auto* host = static_cast<HostDevice*>(rt.devices().Find(Device::Host()));
  const uint64_t allocations = host->counters().allocations;
  const size_t resident = ResidentBytes();
  absl::StatusOr<std::unique_ptr<Method>> method = rt.LoadMethod(*program, "forward");
  EXPECT_THAT(method, StatusIs(absl::StatusCode::kResourceExhausted,
                               AllOf(HasSubstr("method \"forward\" does not fit"),
                                     HasSubstr("host"), HasSubstr("\"big\""),
                                     HasSubstr("128.00 TiB"), HasSubstr("Nothing was allocated"))));
  EXPECT_EQ(host->counters().allocations, allocations);
  EXPECT_LT(ResidentBytes() - std::min(ResidentBytes(), resident), size_t{10} << 20);
}


TEST(MemoryBudget, SimDeviceCapacityIsAConfigurableSize) {
  RuntimeOptions options;
  options.sim.bytes = size_t{1} << 20;
  Runtime rt(options);
  auto* sim0 = static_cast<SimDevice*>(rt.devices().Find(Device::Sim(0)));
  // 512 x 1024 float32 = 2 MiB: twice the device.
  std::unique_ptr<Program> program = ReluProgram(512, 1024, "cuda:0");
  EXPECT_THAT(rt.LoadMethod(*program, "forward"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("cuda:0 (as sim:0)"), HasSubstr("the device has available"),
                             HasSubstr("1.0 MiB"), HasSubstr("\"x\""))));
  EXPECT_EQ(sim0->counters().allocations, 0u);
  // Half the size fits (input copy and result: 2 x 256 KiB).
  std::unique_ptr<Program> small = ReluProgram(128, 512, "cuda:0");
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*small, "forward"));
  EXPECT_GT(sim0->counters().allocations, 0u);
}

TEST(MemoryBudget, CallerLimitsPerDeviceAreHonoured) {
  std::unique_ptr<Program> program = ReluProgram(64, 64, "cuda:0");  // 16 KiB per tensor
  Runtime rt;
  LoadOptions options;
  options.memory_limits[Device::Sim(0)] = 16 << 10;
  EXPECT_THAT(rt.LoadMethod(*program, "forward", options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("LoadOptions::memory_limits allows 16.0 KiB"),
                             HasSubstr("needs 32.0 KiB"))));
  options.memory_limits[Device::Sim(0)] = 32 << 10;
  EXPECT_OK(rt.LoadMethod(*program, "forward", options).status());
  options.memory_limits[Device::Host()] = 1024;  // the host arena holds the d2h copy of the result
  EXPECT_THAT(rt.LoadMethod(*program, "forward", options),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("does not fit in host")));
}

TEST(MemoryBudget, NearTheLimitWarnsAndThePlanShowsTheTotals) {
  std::unique_ptr<Program> program = ReluProgram(64, 64, "cuda:0");  // 32 KiB on sim:0
  Runtime rt;
  LoadOptions options;
  options.memory_limits[Device::Sim(0)] = 36 << 10;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward", options));
  std::vector<std::string> warnings;
  for (const Diagnostic& d : method->plan().placement.diagnostics) warnings.push_back(d.message);
  EXPECT_THAT(warnings, ::testing::Contains(AllOf(HasSubstr("32.0 KiB on cuda:0 (as sim:0)"),
                                                  HasSubstr("89%"),
                                                  HasSubstr("its memory limit allows"))));
  const std::string text = FormatPlanText(*method);
  EXPECT_THAT(text, HasSubstr("memory (arena and constants, per device)"));
  EXPECT_THAT(text, HasSubstr("limit 36.0 KiB"));
  // Far from the limit: no warning.
  options.memory_limits[Device::Sim(0)] = 1 << 20;
  ASSERT_OK_AND_ASSIGN(method, rt.LoadMethod(*program, "forward", options));
  for (const Diagnostic& d : method->plan().placement.diagnostics) {
    EXPECT_THAT(d.message, ::testing::Not(HasSubstr("memory limit")));
  }
}

}  // namespace
}  // namespace ferry::testing
