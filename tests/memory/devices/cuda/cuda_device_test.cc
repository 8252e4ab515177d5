// The CUDA device (memory/devices/cuda/cuda_device.cc) on a real GPU (label `cuda`; skipped without
// one): device memory and pointer ownership, pageable copies through the staging chunks, pinned
// copies, synchronization after kernels, peer copies between GPUs, copies to and from a sim
// device, and strided copies.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "ferry/memory/device_buffer.h"
#include "ferry/memory/device_registry.h"
#include "ferry/memory/devices/cuda/cuda_device.h"
#include "ferry/memory/devices/host/host_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/cuda_harness.h"
#include "tests/testing/method_harness.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Cuda, DeviceMemoryCopiesAndPointerTruth) {
  Fixture f;
  f.m.Output(f.a);
  MethodHarness h(f.pb);
  FERRY_SKIP_WITHOUT_CUDA(h, 1);
  DeviceRuntime* gpu = h.runtime().devices().Find(Device::Cuda(0));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(*gpu, 1 << 20, 64));
  std::vector<float> in(1 << 18), out(1 << 18, 0.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
  ASSERT_OK(gpu->CopyHostToDevice(buffer.data(), in.data(), 1 << 20));
  ASSERT_OK(gpu->CopyDeviceToHost(out.data(), buffer.data(), 1 << 20));
  ASSERT_OK(gpu->Synchronize());
  EXPECT_EQ(in, out);
  EXPECT_TRUE(gpu->Owns(buffer.data(), 1 << 20));
  EXPECT_FALSE(gpu->Owns(in.data(), 16));
}

TEST(Cuda, PageableCopiesRoundTripAcrossStagingChunkBoundaries) {
  // With the staging memcpy on one thread, and split across 3 and 4 (parts that do not divide
  // the chunk evenly, and parts of the last, short chunk).
  for (int threads : {1, 3, 4}) {
    auto devices = Devices(threads);
    FERRY_SKIP_WITHOUT_GPUS(*devices, 1);
    DeviceRuntime* gpu = devices->Find(Device::Cuda(0));
    constexpr size_t kChunk = CudaDevice::kStagingChunkBytes;
    for (size_t bytes : {size_t{1}, kChunk - 1, kChunk, kChunk + 1, kChunk * 7 / 2}) {
      SCOPED_TRACE(::testing::Message() << bytes << " bytes, " << threads << " threads");
      std::vector<uint8_t> expected(bytes);
      for (size_t i = 0; i < bytes; ++i) expected[i] = static_cast<uint8_t>(i * 131 + i / 4093);
      ASSERT_OK_AND_ASSIGN(DeviceBuffer device, DeviceBuffer::Allocate(*gpu, bytes, 256));
      auto source = std::make_unique<std::vector<uint8_t>>(expected);
      gpu->ResetCounters();
      ASSERT_OK(gpu->CopyHostToDevice(device.data(), source->data(), bytes));
      // The source has been read once the copy returns: overwriting and freeing it changes nothing.
      std::fill(source->begin(), source->end(), uint8_t{0xEE});
      source.reset();
      std::vector<uint8_t> back(bytes, 0x11);
      ASSERT_OK(gpu->CopyDeviceToHost(back.data(), device.data(), bytes));
      ASSERT_OK(gpu->Synchronize());
      EXPECT_TRUE(back == expected);
      const DeviceCounters c = gpu->counters();
      EXPECT_EQ(c.h2d_copies, 1u);
      EXPECT_EQ(c.h2d_bytes, bytes);
      EXPECT_EQ(c.d2h_copies, 1u);
      EXPECT_EQ(c.d2h_bytes, bytes);
    }
  }
}

TEST(Cuda, BackToBackPageableCopiesReuseTheStagingChunksSafely) {
  // Many copies queued without a wait in between: each chunk is refilled only after the DMA that
  // read it, and a d2h right behind them reads what they wrote.
  auto devices = Devices();
  FERRY_SKIP_WITHOUT_GPUS(*devices, 1);
  DeviceRuntime* gpu = devices->Find(Device::Cuda(0));
  constexpr size_t kBytes = CudaDevice::kStagingChunkBytes * 3 / 2;
  constexpr int kCopies = 6;
  ASSERT_OK_AND_ASSIGN(DeviceBuffer device, DeviceBuffer::Allocate(*gpu, kBytes * kCopies, 256));
  std::vector<uint8_t> source(kBytes);
  std::vector<uint8_t> expected(kBytes * kCopies);
  for (int c = 0; c < kCopies; ++c) {
    for (size_t i = 0; i < kBytes; ++i) source[i] = static_cast<uint8_t>(i * 7 + c * 29);
    std::copy(source.begin(), source.end(), expected.begin() + c * kBytes);
    ASSERT_OK(gpu->CopyHostToDevice(static_cast<char*>(device.data()) + c * kBytes,
                                    source.data(), kBytes));
  }
  std::vector<uint8_t> back(kBytes * kCopies);
  ASSERT_OK(gpu->CopyDeviceToHost(back.data(), device.data(), back.size()));
  EXPECT_TRUE(back == expected);
}

TEST(Cuda, PinnedCopiesAreAsynchronousAndCompleteAtSynchronize) {
  auto devices = Devices();
  FERRY_SKIP_WITHOUT_GPUS(*devices, 1);
  DeviceRuntime* gpu = devices->Find(Device::Cuda(0));
  constexpr size_t kBytes = CudaDevice::kStagingChunkBytes * 5 / 2 + 3;
  Pinned in(*gpu, kBytes);
  Pinned out(*gpu, kBytes);
  ASSERT_NE(in.get(), nullptr);
  ASSERT_NE(out.get(), nullptr);
  for (size_t i = 0; i < kBytes; ++i) in.get<uint8_t>()[i] = static_cast<uint8_t>(i * 13);
  std::memset(out.get(), 0, kBytes);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer device, DeviceBuffer::Allocate(*gpu, kBytes, 256));
  ASSERT_OK(gpu->CopyHostToDevice(device.data(), in.get(), kBytes));
  ASSERT_OK(gpu->CopyDeviceToHost(out.get(), device.data(), kBytes));
  ASSERT_OK(gpu->Synchronize());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), kBytes), 0);
}

TEST(Cuda, SynchronizeAfterAnAsynchronousKernelSeesItsResults) {
  auto devices = Devices();
  FERRY_SKIP_WITHOUT_GPUS(*devices, 1);
  DeviceRuntime* gpu = devices->Find(Device::Cuda(0));
  constexpr int64_t kCount = int64_t{1} << 22;
  constexpr size_t kBytes = kCount * sizeof(float);
  // A kernel writing pinned host memory directly (mapped under unified addressing): only
  // Synchronize() makes its writes visible to the host.
  Pinned host(*gpu, kBytes);
  ASSERT_NE(host.get(), nullptr);
  std::memset(host.get(), 0, kBytes);
  ASSERT_OK(LaunchFill(*gpu, host.get<float>(), kCount, 7.0));
  ASSERT_OK(gpu->Synchronize());
  EXPECT_EQ(std::count(host.get<float>(), host.get<float>() + kCount, 7.0f), kCount);
  // A kernel writing device memory, then an asynchronous d2h into pinned memory behind it.
  ASSERT_OK_AND_ASSIGN(DeviceBuffer device, DeviceBuffer::Allocate(*gpu, kBytes, 256));
  ASSERT_OK(LaunchFill(*gpu, static_cast<float*>(device.data()), kCount, 2.5));
  ASSERT_OK(gpu->CopyDeviceToHost(host.get(), device.data(), kBytes));
  ASSERT_OK(gpu->Synchronize());
  EXPECT_EQ(std::count(host.get<float>(), host.get<float>() + kCount, 2.5f), kCount);
}

TEST(Cuda, PeerCopyIsOrderedAgainstThePeersWorkOnBothSides) {
  auto devices = Devices();
  FERRY_SKIP_WITHOUT_GPUS(*devices, 2);
  DeviceRuntime* gpu0 = devices->Find(Device::Cuda(0));
  DeviceRuntime* gpu1 = devices->Find(Device::Cuda(1));
  constexpr int64_t kCount = int64_t{1} << 24;
  constexpr size_t kBytes = kCount * sizeof(float);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer src, DeviceBuffer::Allocate(*gpu0, kBytes, 256));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer dst, DeviceBuffer::Allocate(*gpu1, kBytes, 256));
  gpu1->ResetCounters();
  // No host wait anywhere before the checks: the copy must come after the first fill on cuda:0
  // and before the second one.
  ASSERT_OK(LaunchFill(*gpu0, static_cast<float*>(src.data()), kCount, 3.0));
  ASSERT_OK(gpu1->CopyFromPeer(dst.data(), *gpu0, src.data(), kBytes));
  ASSERT_OK(LaunchFill(*gpu0, static_cast<float*>(src.data()), kCount, 4.0));
  std::vector<float> copied(kCount), later(kCount);
  ASSERT_OK(gpu1->CopyDeviceToHost(copied.data(), dst.data(), kBytes));
  ASSERT_OK(gpu0->CopyDeviceToHost(later.data(), src.data(), kBytes));
  ASSERT_OK(gpu0->Synchronize());
  ASSERT_OK(gpu1->Synchronize());
  EXPECT_EQ(std::count(copied.begin(), copied.end(), 3.0f), kCount);
  EXPECT_EQ(std::count(later.begin(), later.end(), 4.0f), kCount);
  EXPECT_EQ(gpu1->counters().d2d_copies, 1u);
  EXPECT_EQ(gpu1->counters().d2d_bytes, kBytes);
}

TEST(Cuda, CopiesBetweenTheGpuAndASimDeviceGoBothWays) {
  // One GPU beside sim stand-ins (a program that names cuda:0 and cuda:1 on a one-GPU machine,
  // cuda:1 mapped to sim:1): each side reads the other's memory through its own path, across
  // several staging chunks and after a kernel that is still writing the source.
  DeviceRegistryOptions options;
  options.sim.count = 2;
  std::unique_ptr<DeviceRegistry> devices = DeviceRegistry::CreateDefault(options);
  FERRY_SKIP_WITHOUT_GPUS(*devices, 1);
  DeviceRuntime* gpu = devices->Find(Device::Cuda(0));
  DeviceRuntime* sim = devices->Find(Device::Sim(1));
  ASSERT_NE(sim, nullptr);
  constexpr int64_t kCount = int64_t{5} << 20;  // 20 MiB: five staging chunks
  constexpr size_t kBytes = kCount * sizeof(float);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer on_gpu, DeviceBuffer::Allocate(*gpu, kBytes, 256));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer on_sim, DeviceBuffer::Allocate(*sim, kBytes, 64));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer back_on_gpu, DeviceBuffer::Allocate(*gpu, kBytes, 256));
  gpu->ResetCounters();
  sim->ResetCounters();
  ASSERT_OK(LaunchFill(*gpu, static_cast<float*>(on_gpu.data()), kCount, 7.0));
  ASSERT_OK(sim->CopyFromPeer(on_sim.data(), *gpu, on_gpu.data(), kBytes));
  std::vector<float> seen(kCount, 0.0f);
  ASSERT_OK(sim->CopyDeviceToHost(seen.data(), on_sim.data(), kBytes));
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 7.0f), kCount);
  // And back: sim:1 rewritten with 9s from the host, then read into fresh GPU memory.
  std::vector<float> nines(kCount, 9.0f);
  ASSERT_OK(sim->CopyHostToDevice(on_sim.data(), nines.data(), kBytes));
  ASSERT_OK(gpu->CopyFromPeer(back_on_gpu.data(), *sim, on_sim.data(), kBytes));
  std::fill(seen.begin(), seen.end(), 0.0f);
  ASSERT_OK(gpu->CopyDeviceToHost(seen.data(), back_on_gpu.data(), kBytes));
  ASSERT_OK(gpu->Synchronize());
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 9.0f), kCount);
  EXPECT_EQ(sim->counters().d2d_copies, 1u);
  EXPECT_EQ(gpu->counters().d2d_copies, 1u);
  EXPECT_EQ(gpu->counters().d2d_bytes, kBytes);
}

// Dense strides (elements) of `sizes` stored in `dim_order`, outermost first.
std::vector<int64_t> StridesFor(const std::vector<int64_t>& sizes,
                                const std::vector<int32_t>& dim_order) {
  return TensorMeta{DType::kFloat32, {sizes.begin(), sizes.end()}, dim_order}.DenseStrides();
}

TEST(Cuda, StridedCopiesConvertOnTheDeviceAsTheHostGathers) {
  auto devices = Devices();
  FERRY_SKIP_WITHOUT_GPUS(*devices, 1);
  DeviceRuntime* gpu = devices->Find(Device::Cuda(0));
  struct Case {
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;
    size_t element_size;
    size_t source_bytes;
  };
  std::vector<Case> cases;
  auto dense = [&](std::vector<int64_t> sizes, std::vector<int32_t> order, size_t es) {
    int64_t numel = 1;
    for (int64_t s : sizes) numel *= s;
    std::vector<int64_t> strides = StridesFor(sizes, order);
    cases.push_back({std::move(sizes), std::move(strides), es, static_cast<size_t>(numel) * es});
  };
  dense({3, 5}, {1, 0}, 4);                      // a transposed float matrix
  dense({1536, 1024}, {1, 0}, 4);                // 6 MiB: more than one staging chunk
  dense({4, 6, 5}, {2, 0, 1}, 8);                // an int64 3-D permutation
  dense({2, 16, 9, 7}, {0, 2, 3, 1}, 4);         // channels-last
  dense({1, 3, 1, 4}, {3, 1, 2, 0}, 8);          // size-1 dimensions
  dense({2, 3, 4}, {0, 1, 2}, 4);                // already row-major
  cases.push_back({{3, 5}, {10, 1}, 4, 30 * 4});  // not dense (a slice): the host gathers
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.sizes) + " strides " +
                 ::testing::PrintToString(c.strides));
    StridedLayout layout{static_cast<int32_t>(c.sizes.size()), c.sizes.data(), c.strides.data(),
                         c.element_size};
    ASSERT_OK_AND_ASSIGN(const size_t bytes, internal::DenseBytesOf(layout, "test"));
    std::vector<uint8_t> source(c.source_bytes);
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7 + i / 253);
    std::vector<uint8_t> expected(bytes);
    internal::GatherStrided(expected.data(), source.data(), layout);
    ASSERT_OK_AND_ASSIGN(DeviceBuffer device, DeviceBuffer::Allocate(*gpu, bytes, 256));
    gpu->ResetCounters();
    ASSERT_OK(gpu->CopyHostStridedToDevice(device.data(), source.data(), layout));
    EXPECT_EQ(gpu->counters().h2d_copies, 1u);
    EXPECT_EQ(gpu->counters().h2d_bytes, bytes);
    std::vector<uint8_t> back(bytes);
    ASSERT_OK(gpu->CopyDeviceToHost(back.data(), device.data(), bytes));
    ASSERT_OK(gpu->Synchronize());
    EXPECT_TRUE(back == expected);
  }
}

}  // namespace
}  // namespace ferry::testing
