// The CUDA kernels of the elementwise family (kernels/cuda/elementwise_ops.cu) on a real GPU (label
// `cuda`; skipped without one): every op against the all-host run, broadcasting, the in-place
// forms, and fill_ launched by hand.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/memory/device_buffer.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/cuda_harness.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

// Every binary op of the family on two inputs, every unary op on one: a graph delegate on cuda:0
// per op, all in one method, and clamp. log, sqrt and rsqrt read exp(x), which is positive.
TEST(CudaElementwiseOps, EveryOpMatchesTheHostRun) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {5, 67});
  ValueId y = m.Input("y", DType::kFloat32, {5, 67});
  for (const char* op : {"add", "sub", "mul", "maximum", "minimum"}) {
    m.Output(m.GraphDelegate(kD0, {x, y}, [op](MethodBuilder& g, absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op(op, {in[0], in[1]})};
    })[0]);
  }
  // div by exp(y), never zero.
  m.Output(m.GraphDelegate(kD0, {x, y}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("div", {in[0], g.Op("exp", {in[1]})})};
  })[0]);
  for (const char* op : {"relu", "neg", "abs", "exp", "sin", "cos", "tanh", "sigmoid", "silu",
                         "gelu", "floor", "ceil"}) {
    m.Output(m.GraphDelegate(kD0, {x}, [op](MethodBuilder& g, absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op(op, {in[0]})};
    })[0]);
  }
  m.Output(m.GraphDelegate(kD0, {x}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("clamp", {in[0], g.Double(-0.5), g.Double(0.25)})};
  })[0]);
  for (const char* op : {"log", "sqrt", "rsqrt"}) {
    m.Output(m.GraphDelegate(kD0, {x}, [op](MethodBuilder& g, absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op(op, {g.Op("exp", {in[0]})})};
    })[0]);
  }
  FERRY_EXPECT_CUDA_MATCHES_HOST(pb);
}

// add broadcasting a row over a matrix, and the in-place forms on a state the delegates own.
TEST(CudaElementwiseOps, BroadcastingAndInPlaceMatchTheHostRun) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {4, 33});
  ValueId row = m.Input("row", DType::kFloat32, {33});
  ValueId s = m.StateF32("s", {4, 33}, std::vector<float>(4 * 33, 0.5f));
  m.Output(m.GraphDelegate(kD0, {x, row}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("add", {in[0], in[1]})};
  })[0]);
  m.GraphDelegate(kD0, {s, x}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("mul_", {in[0], in[1]})};
  });
  m.Output(m.GraphDelegate(kD0, {s}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("clone", {in[0]})};
  })[0]);
  FERRY_EXPECT_CUDA_MATCHES_HOST(pb);
}

// fill_ launched by hand over a count that is no multiple of a block, read back.
TEST(CudaElementwiseOps, FillWritesEveryElement) {
  auto devices = Devices();
  FERRY_SKIP_WITHOUT_GPUS(*devices, 1);
  DeviceRuntime* gpu = devices->Find(Device::Cuda(0));
  constexpr int64_t kCount = 1000003;
  ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(*gpu, kCount * 4, 256));
  ASSERT_OK(LaunchFill(*gpu, static_cast<float*>(buffer.data()), kCount, -1.25));
  std::vector<float> back(kCount, 0.0f);
  ASSERT_OK(gpu->CopyDeviceToHost(back.data(), buffer.data(), kCount * 4));
  ASSERT_OK(gpu->Synchronize());
  EXPECT_EQ(std::count(back.begin(), back.end(), -1.25f), kCount);
}

}  // namespace
}  // namespace ferry::testing
