// The ExecuTorch mappings of index_put (loader/executorch/ops/index.cc), functional and in place,
// with copy and copy_ beside them, run against values computed here; an accumulating index_put
// refused naming the instruction.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/et_program_parts.h"
#include "tests/testing/pte_writer.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::Bool;
using ::ferry::testing::FloatTensor;
using ::ferry::testing::Int64Tensor;
using ::ferry::testing::KernelCall;
using ::ferry::testing::OneMethod;
using ::ferry::testing::MethodStatus;
using ::ferry::testing::StatusIs;
using ::ferry::testing::TensorList;
using ::ferry::testing::ThroughFile;
using ::testing::HasSubstr;

// cache [4, 2], rows int64 [2], v [2, 2], src [2] (all inputs):
//   a = index_put(cache, [rows], v, false)   functional: cache keeps its contents
//   b = copy(a, src)                          functional: every row of b is src
//   index_put_(b, [rows], v, false)           in place on b
//   copy_(a, b)                               in place on a
TEST(EtIndexOps, IndexPutAndCopyRunAgainstANaiveReference) {
  EtProgram p = OneMethod(
      {
          FloatTensor({4, 2}),  // 0 cache
          Int64Tensor({2}),     // 1 rows
          FloatTensor({2, 2}),  // 2 v
          FloatTensor({2}),     // 3 src
          TensorList({1}),      // 4 [rows]
          Bool(false),          // 5
          FloatTensor({4, 2}),  // 6 a
          FloatTensor({4, 2}),  // 7 b
      },
      {0, 1, 2, 3}, {6, 7, 0},
      {{"aten::index_put", "out"}, {"aten::copy", "out"}, {"aten::index_put_", ""},
       {"aten::copy_", ""}},
      {
          KernelCall(0, {0, 4, 2, 5, 6, 6}),
          KernelCall(1, {6, 3, 5, 7, 7}),
          KernelCall(2, {7, 4, 2, 5, 7}),
          KernelCall(3, {6, 7, 5, 6}),
      });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> cache = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> cache_before = cache;
  std::vector<int64_t> rows = {3, 1};
  std::vector<float> v = {-1, -2, -3, -4};
  std::vector<float> src = {10, 20};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4, 2}, cache.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kInt64, {2}, rows.data())));
  ASSERT_OK(method->SetInput(2, TensorView::Host(DType::kFloat32, {2, 2}, v.data())));
  ASSERT_OK(method->SetInput(3, TensorView::Host(DType::kFloat32, {2}, src.data())));
  ASSERT_OK(method->Execute());
  // Reference: b = src in every row, then rows 3 and 1 of b get v; a = b (copy_ in place).
  std::vector<float> b(8);
  for (int r = 0; r < 4; ++r) {
    b[r * 2] = src[0];
    b[r * 2 + 1] = src[1];
  }
  for (int n = 0; n < 2; ++n) {
    b[rows[n] * 2] = v[n * 2];
    b[rows[n] * 2 + 1] = v[n * 2 + 1];
  }
  const float* a_out = method->Output(0).data_as<float>();
  const float* b_out = method->Output(1).data_as<float>();
  const float* cache_out = method->Output(2).data_as<float>();
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(a_out[k], b[k]) << k;
    EXPECT_EQ(b_out[k], b[k]) << k;
    EXPECT_EQ(cache_out[k], cache_before[k]) << k;  // the functional index_put left it alone
  }
}

TEST(EtIndexOps, AccumulatingIndexPutIsRefused) {
  EtProgram put = OneMethod(
      {FloatTensor({4}), Int64Tensor({1}), TensorList({1}), FloatTensor({1}), Bool(true),
       FloatTensor({4})},
      {0, 1, 3}, {5}, {{"aten::index_put", "out"}}, {KernelCall(0, {0, 2, 3, 4, 5, 5})});
  EXPECT_THAT(MethodStatus(ThroughFile(put)),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("instruction 0 (aten::index_put.out): accumulate is true")));
}

}  // namespace
}  // namespace ferry
