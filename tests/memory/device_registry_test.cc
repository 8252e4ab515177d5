#include "ferry/memory/device_registry.h"

#include <memory>
#include <vector>

#include "ferry/memory/devices/host/host_device.h"
#include "ferry/memory/devices/sim/sim_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

DeviceRegistryOptions NoCuda() {
  DeviceRegistryOptions options;
  options.cuda.enabled = false;
  return options;
}

TEST(DeviceRegistryTest, DefaultHasHostAndFourSimDevices) {
  std::unique_ptr<DeviceRegistry> registry = DeviceRegistry::CreateDefault(NoCuda());
  EXPECT_THAT(registry->devices(), ElementsAre(Device::Host(), Device::Sim(0), Device::Sim(1),
                                               Device::Sim(2), Device::Sim(3)));
  EXPECT_FALSE(registry->Has(DeviceType::kCuda));
  for (const Device& d : registry->devices()) {
    DeviceRuntime* runtime = registry->Find(d);
    ASSERT_NE(runtime, nullptr) << d.ToString();
    EXPECT_EQ(runtime->device(), d);
  }
  EXPECT_EQ(registry->Find(Device::Sim(4)), nullptr);
  EXPECT_EQ(registry->Find(Device::Cuda(0)), nullptr);
  // Sim devices are guarded by default and allocate nothing until used.
  SimDevice* sim = AsSimDevice(registry->Find(Device::Sim(0)));
  ASSERT_NE(sim, nullptr);
  EXPECT_TRUE(sim->guarded());
  EXPECT_EQ(sim->live_allocations(), 0u);
}

TEST(DeviceRegistryTest, OptionsChooseSimCountAndGuard) {
  DeviceRegistryOptions options = NoCuda();
  options.sim.count = 2;
  options.sim.guard = false;
  std::unique_ptr<DeviceRegistry> registry = DeviceRegistry::CreateDefault(options);
  EXPECT_THAT(registry->devices(), ElementsAre(Device::Host(), Device::Sim(0), Device::Sim(1)));
  SimDevice* sim = AsSimDevice(registry->Find(Device::Sim(1)));
  ASSERT_NE(sim, nullptr);
  EXPECT_FALSE(sim->guarded());

  options.sim.count = 0;
  EXPECT_THAT(DeviceRegistry::CreateDefault(options)->devices(), ElementsAre(Device::Host()));
}

TEST(DeviceRegistryTest, AddKeepsDevicesSortedAndRefusesDuplicates) {
  DeviceRegistry registry;
  EXPECT_TRUE(registry.devices().empty());
  ASSERT_OK(registry.Add(std::make_unique<SimDevice>(3)));
  ASSERT_OK(registry.Add(std::make_unique<HostDevice>()));
  ASSERT_OK(registry.Add(std::make_unique<SimDevice>(1)));
  EXPECT_THAT(registry.devices(), ElementsAre(Device::Host(), Device::Sim(1), Device::Sim(3)));
  DeviceRuntime* first = registry.Find(Device::Sim(1));
  EXPECT_THAT(registry.Add(std::make_unique<SimDevice>(1)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("sim:1")));
  EXPECT_EQ(registry.Find(Device::Sim(1)), first);  // the original stays
  EXPECT_THAT(registry.Add(nullptr), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("")));
  EXPECT_EQ(registry.devices().size(), 3u);
}

TEST(DeviceRegistryTest, HasCudaWhenACudaRuntimeIsAdded) {
  // A stand-in CUDA runtime: the registry only looks at device().
  class FakeCuda final : public DeviceRuntime {
   public:
    Device device() const override { return Device::Cuda(0); }
    absl::StatusOr<void*> Allocate(size_t, size_t) override {
      return absl::UnimplementedError("");
    }
    void Free(void*) override {}
    bool Owns(const void*, size_t) const override { return false; }
    absl::Status CopyHostToDevice(void*, const void*, size_t) override { return {}; }
    absl::Status CopyDeviceToHost(void*, const void*, size_t) override { return {}; }
    absl::Status CopyDeviceToDevice(void*, const void*, size_t) override { return {}; }
    absl::Status CopyHostStridedToDevice(void*, const void*, const StridedLayout&) override {
      return {};
    }
    absl::Status CopyFromPeer(void*, DeviceRuntime&, const void*, size_t) override { return {}; }
    absl::Status Zero(void*, size_t) override { return {}; }
    absl::Status Synchronize() override { return {}; }
    DeviceCounters counters() const override { return {}; }
    void ResetCounters() override {}
  };
  std::unique_ptr<DeviceRegistry> registry = DeviceRegistry::CreateDefault(NoCuda());
  static int global = 0;  // in the program's data segment, far from any mapping
  EXPECT_FALSE(registry->MayBeDeviceMemory(&global));
  ASSERT_OK(registry->Add(std::make_unique<FakeCuda>()));
  EXPECT_TRUE(registry->Has(DeviceType::kCuda));
  EXPECT_EQ(registry->devices().back(), Device::Cuda(0));
  // The stand-in does not report its allocations' ranges, so no pointer is ruled out any more.
  EXPECT_TRUE(registry->MayBeDeviceMemory(&global));
}

TEST(DeviceRegistryTest, PointersOutsideEverySimAllocationAreRuledOutAtOnce) {
  std::unique_ptr<DeviceRegistry> registry = DeviceRegistry::CreateDefault(NoCuda());
  static int global = 0;
  EXPECT_FALSE(registry->MayBeDeviceMemory(&global));  // nothing allocated yet
  DeviceRuntime* sim0 = registry->Find(Device::Sim(0));
  DeviceRuntime* sim2 = registry->Find(Device::Sim(2));
  ASSERT_OK_AND_ASSIGN(void* a, sim0->Allocate(4096, 64));
  ASSERT_OK_AND_ASSIGN(void* b, sim2->Allocate(1 << 20, 64));
  for (void* p : {a, b}) {
    EXPECT_TRUE(registry->MayBeDeviceMemory(p));
    EXPECT_TRUE(registry->MayBeDeviceMemory(static_cast<char*>(p) + 4095));
  }
  EXPECT_FALSE(registry->MayBeDeviceMemory(&global));
  sim0->Free(a);
  sim2->Free(b);
  // Memory allocated before the registry knew the runtime is covered too.
  auto late = std::make_unique<SimDevice>(7);
  ASSERT_OK_AND_ASSIGN(void* c, late->Allocate(64, 64));
  ASSERT_OK(registry->Add(std::move(late)));
  EXPECT_TRUE(registry->MayBeDeviceMemory(c));
  registry->Find(Device::Sim(7))->Free(c);
}

}  // namespace
}  // namespace ferry
