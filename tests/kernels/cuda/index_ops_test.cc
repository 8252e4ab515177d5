// The CUDA kernel of index_put_ (kernels/cuda/index_ops.cu) on a real GPU (label `cuda`; skipped
// without one), against the all-host run.
#include <cstdint>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/cuda_harness.h"

namespace ferry::testing {
namespace {



// Rows 2 and 0 of a [4, 3] state, owned by delegates on cuda:0, written from an input each call:
// the state after each call, read back, matches the host's.
TEST(CudaIndexOps, IndexPutMatchesTheHostRun) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId values = m.Input("values", DType::kFloat32, {2, 3});
  ValueId rows = m.ConstantI64("rows", {2}, {2, 0});
  ValueId cache = m.StateF32("cache", {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  m.GraphDelegate(kD0, {cache, rows, values}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("index_put_", {in[0], in[1], in[2]})};
  });
  m.Output(m.GraphDelegate(kD0, {cache}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("clone", {in[0]})};
  })[0]);
  FERRY_EXPECT_CUDA_MATCHES_HOST(pb);
}

}  // namespace
}  // namespace ferry::testing
