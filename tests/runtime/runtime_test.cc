// Runtime's options (runtime/runtime.h): each device type's options from its folder, and the
// deprecated flat fields, which still work for one release and win over the new ones when set.
// Reading values back: a chunk at a time from the host and from a sim device, and a tensor too
// large to hold as doubles refused, not thrown.
#include "ferry/runtime/runtime.h"

#include <cstdint>
#include <vector>

#include "ferry/memory/device_buffer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

TEST(RuntimeOptions, DefaultsMakeFourGuardedSimDevicesAndLookForCuda) {
  const DeviceRegistryOptions d = RuntimeOptions().DeviceOptions();
  EXPECT_EQ(d.sim.count, 4);
  EXPECT_TRUE(d.sim.guard);
  EXPECT_EQ(d.sim.bytes, 0u);
  EXPECT_TRUE(d.cuda.enabled);
  EXPECT_EQ(d.cuda.copy_threads, 0);
}

TEST(RuntimeOptions, PerTypeOptionsReachTheDevices) {
  RuntimeOptions options;
  options.sim.count = 2;
  options.sim.guard = false;
  options.cuda.enabled = false;
  Runtime runtime(options);
  EXPECT_THAT(runtime.devices().devices(),
              ElementsAre(Device::Host(), Device::Sim(0), Device::Sim(1)));
  const DeviceRegistryOptions d = options.DeviceOptions();
  EXPECT_FALSE(d.sim.guard);
  EXPECT_FALSE(d.cuda.enabled);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST(RuntimeOptions, DeprecatedFieldsStillApplyAndWinWhenSet) {
  RuntimeOptions options;
  options.sim.count = 3;
  options.num_sim_devices = 1;  // set: it wins over sim.count
  options.sim_device_bytes = 4096;
  options.use_cuda = false;
  options.cuda_copy_threads = 2;
  options.sim.guard = false;  // sim_guard left at its default: the new field stands
  const DeviceRegistryOptions d = options.DeviceOptions();
  EXPECT_EQ(d.sim.count, 1);
  EXPECT_EQ(d.sim.bytes, 4096u);
  EXPECT_FALSE(d.sim.guard);
  EXPECT_FALSE(d.cuda.enabled);
  EXPECT_EQ(d.cuda.copy_threads, 2);
  // Copies carry the deprecated fields too.
  const RuntimeOptions copy = options;
  EXPECT_EQ(copy.DeviceOptions().sim.count, 1);
  Runtime runtime(options);
  EXPECT_THAT(runtime.devices().devices(), ElementsAre(Device::Host(), Device::Sim(0)));
}
#pragma GCC diagnostic pop

TEST(ReadingValues, ChunksCoverTheTensorInOrderOnTheHostAndOnADevice) {
  Runtime rt;
  // 2.5 chunks of int16 values k % 1000 - 500.
  const size_t n = 2 * kValueChunkElements + kValueChunkElements / 2;
  std::vector<int16_t> host(n);
  for (size_t k = 0; k < n; ++k) host[k] = static_cast<int16_t>(static_cast<int>(k % 1000) - 500);
  DeviceRuntime* sim = rt.devices().Find(Device::Sim(0));
  ASSERT_NE(sim, nullptr);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(*sim, n * sizeof(int16_t), 64));
  ASSERT_OK(sim->CopyHostToDevice(buffer.data(), host.data(), n * sizeof(int16_t)));
  ASSERT_OK(sim->Synchronize());
  const int64_t size = static_cast<int64_t>(n);
  for (const TensorView& view :
       {TensorView::Host(DType::kInt16, {size}, host.data()),
        TensorView(DType::kInt16, {size}, buffer.data(), Device::Sim(0))}) {
    SCOPED_TRACE(view.device().ToString());
    std::vector<size_t> chunks;
    size_t k = 0;
    ASSERT_OK(ForEachValueChunk(rt, view, [&](absl::Span<const double> values) {
      chunks.push_back(values.size());
      for (double v : values) {
        EXPECT_EQ(v, host[k]) << k;
        ++k;
      }
      return absl::OkStatus();
    }));
    EXPECT_THAT(chunks,
                ElementsAre(kValueChunkElements, kValueChunkElements, kValueChunkElements / 2));
    ASSERT_OK_AND_ASSIGN(std::vector<double> all, ReadValues(rt, view));
    ASSERT_EQ(all.size(), n);
    EXPECT_EQ(all[n - 1], host[n - 1]);
    // An error of the callback stops the walk and is returned.
    int calls = 0;
    EXPECT_THAT(ForEachValueChunk(rt, view,
                                  [&](absl::Span<const double>) {
                                    ++calls;
                                    return absl::CancelledError("enough");
                                  }),
                ::ferry::testing::StatusIs(absl::StatusCode::kCancelled));
    EXPECT_EQ(calls, 1);
  }
}

#if !defined(__SANITIZE_ADDRESS__)  // ASan aborts on an allocation past its limit by default
TEST(ReadingValues, ATensorTooLargeForDoublesIsResourceExhausted) {
  Runtime rt;
  // 2^42 float32 elements would be 32 TiB as doubles; the data is never read.
  float one = 1.0f;
  const TensorView view = TensorView::Host(DType::kFloat32, {int64_t{1} << 42}, &one);
  EXPECT_THAT(ReadValues(rt, view), ::ferry::testing::StatusIs(
                                        absl::StatusCode::kResourceExhausted,
                                        ::testing::HasSubstr("more than the host could allocate")));
}
#endif

}  // namespace
}  // namespace ferry
