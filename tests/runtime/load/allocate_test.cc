// Load phase 7 (runtime/load/allocate.cc): arenas are touched at load, so the first call faults
// none of their pages in; and an allocation that fails at any point of a load fails it with
// ResourceExhausted naming the device, leaving nothing allocated, after which the load succeeds
// and runs as the all-host run does. Under AddressSanitizer, a kernel that writes past its value
// into the arena's slack is reported.
#include <sys/resource.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/base/sanitizers.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/memory/devices/sim/sim_device.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/busy_method.h"
#include "tests/testing/method_harness.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

long MinorFaults() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Arenas are touched at load, so even the first call does not fault its pages in. The method's
// intermediates take 32 MiB of host arena (8,192 pages); the first call may fault only on code and
// small change.
TEST(Allocate, FirstExecuteDoesNotFaultInTheArena) {
  constexpr int64_t kElements = int64_t{4} << 20;  // 16 MiB of float32
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {kElements});
  ValueId a = m.Op("relu", {x});
  ValueId b = m.Op("neg", {a});
  ValueId c = m.Op("add", {a, b});
  m.Output(m.Op("relu", {c}));
  MethodHarness h(pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  size_t arena = 0;
  for (const ArenaInfo& info : method->plan().arenas) {
    if (info.device.is_host()) arena = info.arena_bytes;
  }
  ASSERT_GE(arena, size_t{32} << 20);
  std::vector<float> input(kElements, 1.0f);
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {kElements}, input.data())));
  const long before = MinorFaults();
  ASSERT_OK(method->Execute());
  const long faults = MinorFaults() - before;
  EXPECT_LT(faults, 1024) << "the first Execute faulted " << faults << " pages in";
  EXPECT_EQ(method->Output(0).data_as<float>()[kElements - 1], 0.0f);  // relu(1 + -1)
}

TEST(Allocate, AllocationFailureAtEveryPointOfLoad) {
  ProgramBuilder pb;
  BuildBusyMethod(pb);
  MethodHarness h(pb);
  ASSERT_OK(h.status());
  auto* sim0 = static_cast<SimDevice*>(h.runtime().devices().Find(Device::Sim(0)));
  auto* sim1 = static_cast<SimDevice*>(h.runtime().devices().Find(Device::Sim(1)));
  int failures = 0;
  for (SimDevice* sim : {sim0, sim1}) {
    for (int64_t limit = 0;; ++limit) {
      ASSERT_LT(limit, 64) << "load never succeeded";
      sim->set_allocation_limit(limit);
      absl::StatusOr<std::unique_ptr<Method>> method = h.Load();
      sim->set_allocation_limit(-1);
      if (method.ok()) break;
      ++failures;
      EXPECT_EQ(method.status().code(), absl::StatusCode::kResourceExhausted) << method.status();
      EXPECT_THAT(std::string(method.status().message()), HasSubstr(sim->device().ToString()));
      EXPECT_EQ(sim0->counters().allocated_bytes, 0u);
      EXPECT_EQ(sim1->counters().allocated_bytes, 0u);
    }
  }
  EXPECT_GE(failures, 2);  // an arena and a constant region at least
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  ASSERT_OK_AND_ASSIGN(auto placed, h.Run(*method));
  ASSERT_OK_AND_ASSIGN(auto host, h.RunAllHost());
  EXPECT_EQ(placed, host);
}

// "plus_one": x + 1, float32 [n]; with overrun_by_one set, it also writes one element past the end
// of its result, as a kernel with an off-by-one bound would.
bool overrun_by_one = false;

absl::Status PlusOneInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  results[0].layout = TensorRef::Contiguous(DType::kFloat32, {args[0].tensor->sizes[0]});
  return absl::OkStatus();
}

absl::Status PlusOneKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const int64_t n = args[0].tensor->sizes[0];
  const float* in = static_cast<const float*>(args[0].tensor->data);
  float* out = static_cast<float*>(results[0]->data);
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] + 1.0f;
  if (overrun_by_one) out[n] = 0.0f;
  return absl::OkStatus();
}

TEST(Allocate, AKernelWritingPastItsValueIsCaughtUnderAddressSanitizer) {
  OpSchema plus_one;
  plus_one.name = "plus_one";
  plus_one.min_args = plus_one.max_args = 1;
  plus_one.infer = &PlusOneInfer;
  plus_one.kernel = &PlusOneKernel;
  OpRegistry writer = OpRegistry::WithBuiltIns();
  ASSERT_OK(writer.Register(plus_one));
  ProgramBuilder pb(&writer);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {3});
  // 12 bytes in the host arena, then the slack up to the arena's 64-byte alignment.
  ValueId y = m.Op("plus_one", {x}, "y");
  m.Output(m.Op("neg", {y}, "z"));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  ASSERT_OK(rt.ops().Register(plus_one));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> input = {1.0f, 2.0f, -4.0f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {3}, input.data())));
  // Poisoning leaves every byte the kernels may touch usable.
  overrun_by_one = false;
  ASSERT_OK(method->Execute());
  const float* z = method->Output(0).data_as<float>();
  EXPECT_EQ(z[0], -2.0f);
  EXPECT_EQ(z[1], -3.0f);
  EXPECT_EQ(z[2], 3.0f);
  if (!kAddressSanitizer) GTEST_SKIP() << "built without AddressSanitizer";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        overrun_by_one = true;
        (void)method->Execute();
      },
      "use-after-poison");
}

}  // namespace
}  // namespace ferry::testing
