// The CUDA kernels of the linear-algebra family (kernels/cuda/linalg_ops.cu) on a real GPU (label
// `cuda`; skipped without one), against the all-host run: matmul and linear through cuBLAS where
// the operands' layouts allow and the tiled kernel otherwise (counted), softmax and rms_norm.
#include <cstdint>
#include <vector>

#include "ferry/kernels/cuda/cuda_ops.h"
#include "ferry/loader/ferry/program_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/cuda_harness.h"
#include "tests/testing/method_harness.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {



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

// softmax over the last dim and rms_norm, in a graph delegate on cuda:0.
TEST(CudaLinalgOps, SoftmaxAndRmsNormMatchTheHostRun) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {3, 70});
  ValueId w = m.Input("w", DType::kFloat32, {70});
  std::vector<ValueId> out =
      m.GraphDelegate(kD0, {x, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("softmax", {in[0], g.Int(-1)}),
                                    g.Op("rms_norm", {in[0], in[1], g.Double(1e-5)})};
      });
  m.Output(out[0]);
  m.Output(out[1]);
  FERRY_EXPECT_CUDA_MATCHES_HOST(pb);
}

}  // namespace
}  // namespace ferry::testing
