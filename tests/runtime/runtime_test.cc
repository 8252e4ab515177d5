// Runtime's options (runtime/runtime.h): each device type's options from its folder, and the
// deprecated flat fields, which still work for one release and win over the new ones when set.
#include "ferry/runtime/runtime.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace ferry
