// The CUDA kernels of the shape family (kernels/cuda/shape_ops.cu) on a real GPU (label `cuda`;
// skipped without one), against the all-host run: clone of a strided view, reshape, cat.
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



// clone of a transposed (strided) view, reshape, and cat along each dim, in delegates on cuda:0.
TEST(CudaShapeOps, CloneReshapeAndCatMatchTheHostRun) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {6, 35});
  ValueId y = m.Input("y", DType::kFloat32, {6, 35});
  std::vector<ValueId> out =
      m.GraphDelegate(kD0, {x, y}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        ValueId t = g.Op("transpose", {in[0], g.Int(0), g.Int(1)});
        return std::vector<ValueId>{g.Op("clone", {t}),
                                    g.Op("reshape", {in[0], g.IntList({3, 70})}),
                                    g.Op("cat", {g.Int(0), in[0], in[1]}),
                                    g.Op("cat", {g.Int(1), in[0], in[1], in[0]})};
      });
  for (ValueId v : out) m.Output(v);
  FERRY_EXPECT_CUDA_MATCHES_HOST(pb);
}

}  // namespace
}  // namespace ferry::testing
