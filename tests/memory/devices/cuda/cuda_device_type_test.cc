// The CUDA device type (memory/devices/cuda/cuda_device_type.cc), with or without a GPU: its
// name and memory kind, discovery that adds nothing when CUDA is disabled, and the stand-ins that
// run cuda:N on sim:N where no CUDA device is present.
#include <memory>
#include <utility>
#include <vector>

#include "ferry/memory/device_registry.h"
#include "ferry/memory/device_type.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

TEST(CudaDeviceType, IsCudaWithMemoryOfItsOwn) {
  const DeviceTypeInfo info = CudaDeviceType();
  EXPECT_EQ(info.name, "cuda");
  EXPECT_FALSE(info.host_kernels_run_on_memory);
  EXPECT_TRUE(static_cast<bool>(info.discover));
  EXPECT_TRUE(static_cast<bool>(info.stand_ins));
}

TEST(CudaDeviceType, DisabledDiscoveryAddsNoDevice) {
  DeviceRegistryOptions options;
  options.sim.count = 2;
  options.cuda.enabled = false;
  std::unique_ptr<DeviceRegistry> registry = DeviceRegistry::CreateDefault(options);
  EXPECT_FALSE(registry->Has(DeviceType::kCuda));
  EXPECT_EQ(registry->Find(Device::Cuda(0)), nullptr);
}

TEST(CudaDeviceType, WithoutAGpuEachSimDeviceStandsInForTheCudaDeviceOfItsIndex) {
  DeviceRegistryOptions options;
  options.sim.count = 3;
  options.cuda.enabled = false;
  std::unique_ptr<DeviceRegistry> registry = DeviceRegistry::CreateDefault(options);
  const std::vector<std::pair<Device, Device>> map = CudaDeviceType().stand_ins(*registry);
  EXPECT_THAT(map, UnorderedElementsAre(std::pair{Device::Cuda(0), Device::Sim(0)},
                                        std::pair{Device::Cuda(1), Device::Sim(1)},
                                        std::pair{Device::Cuda(2), Device::Sim(2)}));
  options.sim.count = 0;
  EXPECT_THAT(CudaDeviceType().stand_ins(*DeviceRegistry::CreateDefault(options)), IsEmpty());
}

}  // namespace
}  // namespace ferry
