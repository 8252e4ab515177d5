// Tests on real CUDA devices (ctest label `cuda`). They skip, with the reason, when no CUDA device
// is present (no GPU, no driver, or Ferry built without CUDA). Programs declare cuda:N and are
// loaded with an empty device map, so nothing is redirected to a sim device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/example/decoder_block.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/cuda/cuda_ops.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/memory/device_registry.h"
#include "ferry/memory/devices/cuda/cuda_device.h"
#include "ferry/memory/devices/host/host_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/method_harness.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kCuda0 = "cuda:0";

LoadOptions OnCuda() {
  LoadOptions o;
  o.device_map = absl::flat_hash_map<Device, Device>{};
  return o;
}

#define FERRY_SKIP_WITHOUT_CUDA(h, n) FERRY_SKIP_WITHOUT_GPUS((h).runtime().devices(), n)

#define FERRY_SKIP_WITHOUT_GPUS(registry, n)                                                   \
  if (!(registry).Has(DeviceType::kCuda) || (registry).Find(Device::Cuda((n)-1)) == nullptr) {              \
    GTEST_SKIP() << "needs " << (n) << " CUDA device(s); not found (no GPU, no driver, or "    \
                 << "Ferry built without CUDA)";                                               \
  }

// The devices of this machine, for tests that drive a CUDA device directly.
std::unique_ptr<DeviceRegistry> Devices(int copy_threads = 0) {
  DeviceRegistryOptions options;
  options.sim.count = 0;
  options.cuda.copy_threads = copy_threads;
  return DeviceRegistry::CreateDefault(options);
}

// Pinned host memory of `gpu`, freed on destruction.
class Pinned {
 public:
  Pinned(DeviceRuntime& gpu, size_t bytes) : gpu_(gpu) {
    absl::StatusOr<void*> p = gpu.AllocatePinnedHost(bytes);
    if (p.ok()) data_ = *p;
  }
  ~Pinned() { gpu_.FreePinnedHost(data_); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }

 private:
  DeviceRuntime& gpu_;
  void* data_ = nullptr;
};

// Launches the CUDA fill_ kernel over `count` floats at `data` (memory `gpu` can write) on the
// device's stream, without waiting for it.
absl::Status LaunchFill(DeviceRuntime& gpu, float* data, int64_t count, double value) {
  KernelFn fill = FindCudaKernel("fill_");
  if (fill == nullptr) return absl::InternalError("no CUDA fill_ kernel");
  TensorRef t = TensorRef::Contiguous(DType::kFloat32, {count}, data);
  const Scalar v = Scalar::Double(value);
  OpArg args[2];
  args[0].tensor = &t;
  args[1].scalar = &v;
  TensorRef* results[1] = {&t};
  DeviceScope scope(gpu);
  SetCurrentCudaStream(gpu.native_stream());
  absl::Status status = fill(absl::MakeConstSpan(args), absl::MakeConstSpan(results));
  SetCurrentCudaStream(nullptr);
  return status;
}

// |actual - expected| within 1e-4 of |expected| (of 1 near zero, where a relative bound means
// nothing for sums that cancel).
void ExpectNearRelative(const std::vector<std::vector<double>>& actual,
                        const std::vector<std::vector<double>>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t o = 0; o < expected.size(); ++o) {
    ASSERT_EQ(actual[o].size(), expected[o].size()) << "output " << o;
    for (size_t j = 0; j < expected[o].size(); ++j) {
      EXPECT_NEAR(actual[o][j], expected[o][j], 1e-4 * std::max(1.0, std::abs(expected[o][j])))
          << "output " << o << ", element " << j;
    }
  }
}

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

TEST(Cuda, Case01DelegateOnTheGpu) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  MethodHarness h(f.pb);
  FERRY_SKIP_WITHOUT_CUDA(h, 1);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(OnCuda()));
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", "host", kCuda0, 16},
                                                  CopyRow{"h2d", "b", "host", kCuda0, 16},
                                                  CopyRow{"d2h", "t", kCuda0, "host", 16}));
  ExpectSameAsHost(h, *method, 2);
}

TEST(Cuda, Case11HostWriteBetweenGpuDelegates) {
  Fixture f;
  ValueId y = Call(f.m, kD0, "y", {f.a, f.b});
  f.m.Op("relu_", {y});
  f.m.Output(Call(f.m, kD0, "z", {y, f.c}));
  MethodHarness h(f.pb);
  FERRY_SKIP_WITHOUT_CUDA(h, 1);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(OnCuda()));
  EXPECT_EQ(method->plan().placement.per_call_copies(), 6);
  ExpectSameAsHost(h, *method);
}

TEST(Cuda, Case20And22ConstantsOnceAndConverted) {
  Fixture f;
  std::vector<float> column_major = {1, 3, 2, 4};
  std::vector<uint8_t> bytes(16);
  std::memcpy(bytes.data(), column_major.data(), 16);
  ValueId w = f.m.Constant("w", TensorMeta{DType::kFloat32, {2, 2}, {1, 0}}, bytes);
  DelegateOptions options;
  options.arg_dim_orders = {{}, {0, 1}};
  f.m.Output(Call(f.m, kD0, "t", {f.a, w}, options));
  MethodHarness h(f.pb);
  FERRY_SKIP_WITHOUT_CUDA(h, 1);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(OnCuda()));
  EXPECT_THAT(OnceCopies(*method), ElementsAre(CopyRow{"h2d", "w", "host", kCuda0, 16}));
  ExpectSameAsHost(h, *method, 2);
}

TEST(Cuda, Case38StateOwnedByGpuDelegates) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 2});
  ValueId k = m.StateF32("k", {2, 2}, {1, 2, 3, 4});
  m.GraphDelegate(kD0, {k, x}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("add_", {in[0], in[1]})};
  });
  m.Output(Call(m, kD0, "read", {k, x}));
  MethodHarness h(pb);
  FERRY_SKIP_WITHOUT_CUDA(h, 1);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(OnCuda()));
  EXPECT_EQ(method->plan().placement.value_homes[k], Device::Cuda(0));
  EXPECT_EQ(method->plan().placement.per_call_copies(), 2);
  ExpectSameAsHost(h, *method, 3);
}

TEST(Cuda, Case42HostPointerClaimingGpuMemoryIsRefused) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  MethodHarness h(f.pb);
  FERRY_SKIP_WITHOUT_CUDA(h, 1);
  LoadOptions options = OnCuda();
  options.skip_h2d_for_method_inputs = true;
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(options));
  std::vector<float> host(4, 1.0f);
  EXPECT_THAT(method->SetInput(0, TensorView(DType::kFloat32, {2, 2}, host.data(), Device::Cuda(0))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input 0"), HasSubstr("cuda:0"))));
  ExpectSameAsHost(h, *method);
}

TEST(Cuda, Case07TwoGpus) {
  Fixture f;
  ValueId t = Call(f.m, kD0, "t", {f.a, f.b});
  f.m.Output(Call(f.m, "cuda:1", "u", {t, f.c}));
  MethodHarness h(f.pb);
  FERRY_SKIP_WITHOUT_CUDA(h, 2);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(OnCuda()));
  ExpectSameAsHost(h, *method);
}

TEST(Cuda, ExampleDecoderMatchesTheHostRun) {
  ProgramBuilder pb;
  example::AddDecoderMethod(pb, "cuda:0");
  MethodHarness h(pb);
  FERRY_SKIP_WITHOUT_CUDA(h, 1);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(OnCuda()));
  ASSERT_OK_AND_ASSIGN(auto gpu, h.Run(*method, 3));
  ASSERT_OK_AND_ASSIGN(auto host, h.RunAllHost(3));
  ASSERT_EQ(gpu.size(), host.size());
  for (size_t j = 0; j < host[0].size(); ++j) EXPECT_NEAR(gpu[0][j], host[0][j], 1e-4) << j;
}

// ---- Copies of the CUDA device ----------------------------------------------------------------

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

TEST(Cuda, Case23ChannelsLastConstantOnTheGpu) {
  for (bool compiled_channels_last : {true, false}) {
    SCOPED_TRACE(compiled_channels_last ? "compiled channels-last" : "compiled contiguous");
    ProgramBuilder pb;
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId a = m.Input("a", DType::kFloat32, {2, 8, 5, 6});
    std::vector<uint8_t> bytes(2 * 8 * 5 * 6 * 4);
    for (size_t i = 0; i < bytes.size() / 4; ++i) {
      const float v = static_cast<float>(i) * 0.25f - 3.0f;
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
    ValueId w = m.Constant("w", TensorMeta{DType::kFloat32, {2, 8, 5, 6}, {0, 2, 3, 1}}, bytes);
    DelegateOptions options;
    options.arg_dim_orders = {{}, compiled_channels_last ? std::vector<int32_t>{0, 2, 3, 1}
                                                         : std::vector<int32_t>{0, 1, 2, 3}};
    m.Output(Call(m, kD0, "t", {a, w}, options));
    MethodHarness h(pb);
    FERRY_SKIP_WITHOUT_CUDA(h, 1);
    ASSERT_OK_AND_ASSIGN(auto method, h.Load(OnCuda()));
    ASSERT_EQ(OnceCopies(*method).size(), 1u);
    ExpectSameAsHost(h, *method, 2);
  }
}

// ---- matmul and linear through cuBLAS ---------------------------------------------------------

// Loads `pb` on cuda:0, runs it and compares with the all-host run within 1e-4 relative; returns
// how many matmul/linear calls took cuBLAS and how many the tiled kernel.
CudaGemmCounts RunGemmProgram(const ProgramBuilder& pb, bool* skipped) {
  CudaGemmCounts delta;
  MethodHarness h(pb);
  *skipped = !h.runtime().devices().Has(DeviceType::kCuda);
  if (*skipped) return delta;
  absl::StatusOr<std::unique_ptr<Method>> method = h.Load(OnCuda());
  EXPECT_TRUE(method.ok()) << method.status();
  if (!method.ok()) return delta;
  const CudaGemmCounts before = GetCudaGemmCounts();
  absl::StatusOr<std::vector<std::vector<double>>> gpu = h.Run(**method, 2);
  const CudaGemmCounts after = GetCudaGemmCounts();
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  absl::StatusOr<std::vector<std::vector<double>>> host = h.RunAllHost(2);
  EXPECT_TRUE(host.ok()) << host.status();
  if (gpu.ok() && host.ok()) ExpectNearRelative(*gpu, *host);
  delta.cublas = after.cublas - before.cublas;
  delta.tiled = after.tiled - before.tiled;
  return delta;
}

#define FERRY_RUN_GEMM_PROGRAM(pb, counts)                                                    \
  bool skipped_ = false;                                                                       \
  const CudaGemmCounts counts = RunGemmProgram((pb), &skipped_);                              \
  if (skipped_) GTEST_SKIP() << "needs a CUDA device; not found (no GPU, no driver, or Ferry " \
                                "built without CUDA)";

TEST(Cuda, MatmulOfContiguousOperandsUsesCublas) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {64, 96});
  ValueId y = m.Input("y", DType::kFloat32, {96, 80});
  m.Output(m.GraphDelegate(kD0, {x, y}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("matmul", {in[0], in[1]})};
  })[0]);
  FERRY_RUN_GEMM_PROGRAM(pb, counts);
  EXPECT_EQ(counts.cublas, 2u);  // one per call
  EXPECT_EQ(counts.tiled, 0u);
}

TEST(Cuda, MatmulAndLinearWithTransposedWeightsUseCublas) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {37, 96});
  ValueId w = m.Input("w", DType::kFloat32, {80, 96});    // [out, in], as linear takes it
  ValueId wt = m.Input("wt", DType::kFloat32, {96, 80});  // [in, out]
  ValueId bias = m.Input("bias", DType::kFloat32, {80});
  std::vector<ValueId> r = m.GraphDelegate(
      kD0, {x, w, wt, bias}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        // matmul with B a transposed view (CUBLAS_OP_T), linear with its weight as stored
        // (B = w^T, a transposed view too) and with a transposed view of a weight (CUBLAS_OP_N).
        ValueId w_view = g.Op("transpose", {in[1], g.Int(0), g.Int(1)});
        ValueId wt_view = g.Op("transpose", {in[2], g.Int(0), g.Int(1)});
        return std::vector<ValueId>{g.Op("matmul", {in[0], w_view}),
                                    g.Op("linear", {in[0], in[1], in[3]}),
                                    g.Op("linear", {in[0], wt_view})};
      });
  for (ValueId v : r) m.Output(v);
  FERRY_RUN_GEMM_PROGRAM(pb, counts);
  EXPECT_EQ(counts.cublas, 6u);
  EXPECT_EQ(counts.tiled, 0u);
}

TEST(Cuda, BatchedMatmulAndLinearUseCublas) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {3, 4, 33, 17});
  ValueId b = m.Input("b", DType::kFloat32, {3, 4, 17, 29});
  ValueId c = m.Input("c", DType::kFloat32, {2, 3, 16, 8});
  ValueId d = m.Input("d", DType::kFloat32, {8, 12});  // broadcast over the batch: stride 0
  ValueId x = m.Input("x", DType::kFloat32, {4, 7, 24});
  ValueId w = m.Input("w", DType::kFloat32, {10, 24});
  std::vector<ValueId> r = m.GraphDelegate(
      kD0, {a, b, c, d, x, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("matmul", {in[0], in[1]}),
                                    g.Op("matmul", {in[2], in[3]}),
                                    g.Op("linear", {in[4], in[5]})};
      });
  for (ValueId v : r) m.Output(v);
  FERRY_RUN_GEMM_PROGRAM(pb, counts);
  EXPECT_EQ(counts.cublas, 6u);
  EXPECT_EQ(counts.tiled, 0u);
}

TEST(Cuda, StridedOperandsFallBackToTheTiledKernel) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {32, 64});
  ValueId y = m.Input("y", DType::kFloat32, {32, 20});
  ValueId p = m.Input("p", DType::kFloat32, {2, 3, 8, 5});
  ValueId q = m.Input("q", DType::kFloat32, {3, 5, 6});
  std::vector<ValueId> r = m.GraphDelegate(
      kD0, {x, y, p, q}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        // Every other column: no unit stride in either dimension.
        ValueId every_other = g.Op("slice", {in[0], g.Int(1), g.Int(0), g.Int(64), g.Int(2)});
        return std::vector<ValueId>{
            g.Op("matmul", {every_other, in[1]}),
            // q broadcast over p's first batch dimension only: no uniform batch stride.
            g.Op("matmul", {in[2], in[3]})};
      });
  for (ValueId v : r) m.Output(v);
  FERRY_RUN_GEMM_PROGRAM(pb, counts);
  EXPECT_EQ(counts.cublas, 0u);
  EXPECT_EQ(counts.tiled, 4u);
}

TEST(Cuda, LinearWithATransposedConstantWeightConvertedAtLoad) {
  // A weight stored transposed (dim order (1, 0)) and larger than a staging chunk: converted on
  // the device at load (case 22 at scale), then used by cuBLAS.
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  constexpr int64_t kOut = 1024, kIn = 1536;
  ValueId x = m.Input("x", DType::kFloat32, {8, kIn});
  std::vector<uint8_t> bytes(kOut * kIn * 4);
  for (int64_t i = 0; i < kOut * kIn; ++i) {
    const float v = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  ValueId w = m.Constant("w", TensorMeta{DType::kFloat32, {kOut, kIn}, {1, 0}}, bytes);
  DelegateOptions options;
  options.arg_dim_orders = {{}, {0, 1}};
  m.Output(m.GraphDelegate(
      kD0, {x, w},
      [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("linear", {in[0], in[1]})};
      },
      options)[0]);
  FERRY_RUN_GEMM_PROGRAM(pb, counts);
  EXPECT_EQ(counts.cublas, 2u);
  EXPECT_EQ(counts.tiled, 0u);
}

}  // namespace
}  // namespace ferry::testing
