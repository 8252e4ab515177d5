// Tests on real CUDA devices (ctest label `cuda`). They skip, with the reason, when no CUDA device
// is present (no GPU, no driver, or Ferry built without CUDA). Programs declare cuda:N and are
// loaded with an empty device map, so nothing is redirected to a sim device.
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bench/example/decoder_block.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_buffer.h"
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

#define FERRY_SKIP_WITHOUT_CUDA(h, n)                                                          \
  if (!(h).runtime().devices().HasCuda() ||                                                    \
      (h).runtime().devices().Find(Device::Cuda((n)-1)) == nullptr) {                          \
    GTEST_SKIP() << "needs " << (n) << " CUDA device(s); none found (no GPU, no driver, or "   \
                 << "Ferry built without CUDA)";                                               \
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

}  // namespace
}  // namespace ferry::testing
