// Conformance cases and the example decoder on real CUDA devices (ctest label `cuda`). They skip,
// with the reason, when no CUDA device is present (no GPU, no driver, or Ferry built without
// CUDA). Programs declare cuda:N and are loaded with an empty device map (OnCuda), so nothing is
// redirected to a sim device. The device's own tests and the kernels' are beside their sources.
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
#include "tests/testing/cuda_harness.h"
#include "tests/testing/method_harness.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace ferry::testing
