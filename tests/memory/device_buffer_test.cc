#include "ferry/memory/device_buffer.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "ferry/memory/devices/host/host_device.h"
#include "ferry/memory/devices/sim/sim_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::Each;
using ::testing::HasSubstr;

TEST(DeviceBufferTest, OwnsAndFreesItsAllocation) {
  SimDevice sim(0);
  {
    ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(sim, 1000, 64));
    EXPECT_NE(buffer.data(), nullptr);
    EXPECT_EQ(buffer.size(), 1000u);
    EXPECT_FALSE(buffer.empty());
    EXPECT_EQ(buffer.runtime(), &sim);
    EXPECT_TRUE(sim.Owns(buffer.data(), 1000));
    EXPECT_EQ(sim.live_allocations(), 1u);
  }
  EXPECT_EQ(sim.live_allocations(), 0u);
}

TEST(DeviceBufferTest, ZeroBytesGivesAnEmptyBuffer) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(sim, 0, 64));
  EXPECT_EQ(buffer.data(), nullptr);
  EXPECT_EQ(buffer.size(), 0u);
  EXPECT_TRUE(buffer.empty());
  EXPECT_OK(buffer.Touch());
  EXPECT_EQ(sim.live_allocations(), 0u);
  EXPECT_EQ(sim.counters().allocations, 0u);
}

TEST(DeviceBufferTest, MoveTransfersOwnership) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer a, DeviceBuffer::Allocate(sim, 64, 64));
  void* p = a.data();
  DeviceBuffer b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(a.size(), 0u);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer c, DeviceBuffer::Allocate(sim, 32, 64));
  EXPECT_EQ(sim.live_allocations(), 2u);
  c = std::move(b);  // frees c's old allocation
  EXPECT_EQ(sim.live_allocations(), 1u);
  EXPECT_EQ(c.data(), p);
  c.Reset();
  EXPECT_EQ(sim.live_allocations(), 0u);
  EXPECT_EQ(c.runtime(), nullptr);
}

TEST(DeviceBufferTest, AllocationErrorsPassThrough) {
  SimDevice sim(2);
  sim.set_allocation_limit(0);
  EXPECT_THAT(DeviceBuffer::Allocate(sim, 64, 64),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("sim:2")));
  HostDevice host;
  EXPECT_THAT(DeviceBuffer::Allocate(host, 64, 3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alignment")));
}

TEST(DeviceBufferTest, TouchZeroesGuardedMemoryThroughTheDevice) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(sim, 3 * 4096 + 5, 64));
  std::vector<uint8_t> pattern(buffer.size(), 0x5a);
  ASSERT_OK(sim.CopyHostToDevice(buffer.data(), pattern.data(), pattern.size()));
  sim.ResetCounters();
  ASSERT_OK(buffer.Touch());  // would fault if it wrote outside the device scope
  EXPECT_FALSE(sim.accessible());
  std::vector<uint8_t> out(buffer.size(), 0xff);
  ASSERT_OK(sim.CopyDeviceToHost(out.data(), buffer.data(), out.size()));
  EXPECT_THAT(out, Each(0));
  EXPECT_EQ(sim.counters().h2d_copies, 0u);  // touching is not a copy
}

TEST(DeviceBufferTest, TouchOnTheHost) {
  HostDevice host;
  ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(host, 256, 64));
  std::memset(buffer.data(), 0x11, 256);
  ASSERT_OK(buffer.Touch());
  const uint8_t* bytes = static_cast<const uint8_t*>(buffer.data());
  EXPECT_THAT(std::vector<uint8_t>(bytes, bytes + 256), Each(0));
}

}  // namespace
}  // namespace ferry
