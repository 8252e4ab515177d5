// The concurrency runtime.h allows, exercised: methods on different devices executing on their
// own threads, LoadMethod from several threads at once, and loading and destroying methods on one
// device while another device's method runs; and the helper threads of ParallelMemcpy (a CUDA
// device's staging copies), handed one job after another. Built on its own so that CI can run it
// under ThreadSanitizer (the `concurrency` label); in the normal suite it checks the values.
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/parallel_memcpy.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

constexpr int kCalls = 200;

// out = relu(x) * 2 + w, with the delegate on `device` and w a constant replicated there.
std::unique_ptr<Program> DeviceProgram(const std::string& device) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {4, 4});
  ValueId w = m.ConstantF32("w", {4, 4}, std::vector<float>(16, 0.5f));
  m.Output(m.GraphDelegate(device, {x, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    ValueId r = g.Op("relu", {in[0]});
    return std::vector<ValueId>{g.Op("add", {g.Op("mul", {r, g.Double(2.0)}), in[1]})};
  })[0]);
  std::vector<uint8_t> bytes = std::move(pb.Build()).value();
  return std::move(Program::FromBytes(bytes)).value();
}

// Runs `method` `calls` times with inputs of its own and checks every result; returns the number
// of mismatches or errors.
int RunAndCheck(Method& method, float seed, int calls) {
  std::vector<float> x(16), out(16);
  int bad = 0;
  for (int call = 0; call < calls; ++call) {
    for (int i = 0; i < 16; ++i) x[i] = seed * static_cast<float>(i - 8) + static_cast<float>(call);
    if (!method.SetInput(0, TensorView::Host(DType::kFloat32, {4, 4}, x.data())).ok() ||
        !method.SetOutputBuffer(0, TensorView::Host(DType::kFloat32, {4, 4}, out.data())).ok() ||
        !method.Execute().ok()) {
      ++bad;
      continue;
    }
    for (int i = 0; i < 16; ++i) {
      const float expected = (x[i] > 0 ? x[i] : 0.0f) * 2.0f + 0.5f;
      if (out[i] != expected) ++bad;
    }
  }
  return bad;
}

TEST(Concurrency, MethodsOnTwoDevicesRunOnTwoThreads) {
  Runtime rt;
  std::unique_ptr<Program> p0 = DeviceProgram("cuda:0");
  std::unique_ptr<Program> p1 = DeviceProgram("cuda:1");
  ASSERT_OK_AND_ASSIGN(auto m0, rt.LoadMethod(*p0, "forward"));
  ASSERT_OK_AND_ASSIGN(auto m1, rt.LoadMethod(*p1, "forward"));
  std::atomic<int> bad{0};
  std::thread t0([&] { bad += RunAndCheck(*m0, 1.0f, kCalls); });
  std::thread t1([&] { bad += RunAndCheck(*m1, -0.5f, kCalls); });
  t0.join();
  t1.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(Concurrency, LoadMethodFromManyThreadsAtOnce) {
  Runtime rt;
  std::unique_ptr<Program> programs[] = {DeviceProgram("cuda:0"), DeviceProgram("cuda:1"),
                                         DeviceProgram("cuda:2"), DeviceProgram("cuda:3")};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        absl::StatusOr<std::unique_ptr<Method>> method = rt.LoadMethod(*programs[t], "forward");
        if (!method.ok()) {
          ++bad;
          continue;
        }
        bad += RunAndCheck(**method, 0.25f * static_cast<float>(t + 1), 5);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// One thread executes on sim:0 (its SetInput asks sim:1 whether the host pointer is its memory);
// another loads, runs and destroys methods on sim:1 meanwhile, which allocates and frees there and
// on the host.
TEST(Concurrency, LoadingOnOneDeviceWhileAnotherDevicesMethodRuns) {
  Runtime rt;
  std::unique_ptr<Program> p0 = DeviceProgram("cuda:0");
  std::unique_ptr<Program> p1 = DeviceProgram("cuda:1");
  ASSERT_OK_AND_ASSIGN(auto m0, rt.LoadMethod(*p0, "forward"));
  std::atomic<int> bad{0};
  std::atomic<bool> loading_done{false};
  std::thread runner([&] {
    do {
      bad += RunAndCheck(*m0, 1.5f, 20);
    } while (!loading_done.load());
  });
  std::thread loader([&] {
    for (int round = 0; round < 20; ++round) {
      absl::StatusOr<std::unique_ptr<Method>> method = rt.LoadMethod(*p1, "forward");
      if (!method.ok()) {
        ++bad;
        continue;
      }
      bad += RunAndCheck(**method, -2.0f, 3);
    }
    loading_done = true;
  });
  loader.join();
  runner.join();
  EXPECT_EQ(bad.load(), 0);
}

// Two copiers, each driven by its own thread, each with helpers: every copy lands whole before the
// next one reuses the job, and nothing is read after the copy returns.
TEST(Concurrency, ParallelMemcpyJobsBackToBackFromTwoThreads) {
  std::atomic<int> bad{0};
  auto drive = [&bad](uint8_t seed) {
    ParallelMemcpy copier(4);
    const size_t bytes = 4 * ParallelMemcpy::kMinPartBytes + 4099;
    std::vector<uint8_t> src(bytes), dst(bytes);
    for (int copy = 0; copy < 100; ++copy) {
      const uint8_t value = static_cast<uint8_t>(seed + copy);
      std::fill(src.begin(), src.end(), value);
      copier.Copy(dst.data(), src.data(), bytes);
      bad += static_cast<int>(
          std::count_if(dst.begin(), dst.end(), [value](uint8_t b) { return b != value; }));
    }
  };
  std::thread first(drive, uint8_t{1});
  std::thread second(drive, uint8_t{101});
  first.join();
  second.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace ferry::testing
