// mean and sum against a naive sum over the reduced dimensions.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ferry/kernels/op_registry.h"
#include "tests/kernels/op_test_util.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ForEachIndex;
using ::ferry::testing::Get;
using ::ferry::testing::Index;
using ::ferry::testing::InferOnly;
using ::ferry::testing::OpRun;
using ::ferry::testing::RunOp;
using ::ferry::testing::S;
using ::ferry::testing::SizesOf;
using ::ferry::testing::StatusIs;
using ::ferry::testing::T;
using ::ferry::testing::TestTensor;
using ::testing::HasSubstr;

const OpSchema& Reduction(const char* name) {
  static const OpRegistry* registry = new OpRegistry(OpRegistry::WithBuiltIns());
  const OpSchema* s = registry->Find(name);
  EXPECT_NE(s, nullptr);
  return *s;
}
const OpSchema& Mean() { return Reduction("mean"); }
const OpSchema& Sum() { return Reduction("sum"); }

// The mean of x over the dims in `reduced` (a flag per dim), at every index of the kept dims,
// computed by walking all of x and summing into the matching output cell.
void ExpectMean(const TensorRef& out, const TensorRef& x, const std::vector<bool>& reduced,
                bool keepdim, bool divide = true) {
  std::vector<int64_t> kept_sizes;
  int64_t count = 1;
  for (int d = 0; d < x.rank; ++d) {
    if (reduced[d]) {
      count *= x.sizes[d];
      if (keepdim) kept_sizes.push_back(1);
    } else {
      kept_sizes.push_back(x.sizes[d]);
    }
  }
  ASSERT_EQ(SizesOf(out), kept_sizes);
  ForEachIndex(kept_sizes, [&](const Index& o) {
    double sum = 0;
    ForEachIndex(SizesOf(x), [&](const Index& i) {
      int k = 0;
      for (int d = 0; d < x.rank; ++d) {
        if (reduced[d]) {
          if (keepdim) ++k;
          continue;
        }
        if (o[k++] != i[d]) return;
      }
      sum += Get(x, i);
    });
    EXPECT_NEAR(Get(out, o), divide ? sum / count : sum, 1e-5) << absl::StrJoin(o, ",");
  });
}

TEST(MeanTest, EverySetOfDimsWithAndWithoutKeepdim) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 4}, 1);
  for (int mask = 0; mask < 8; ++mask) {
    std::vector<int64_t> dims;
    std::vector<bool> reduced(3, mask == 0);  // no dims: every dim
    for (int d = 0; d < 3; ++d) {
      if (mask & (1 << d)) {
        // Negative numbering for dim 2, to cover it.
        dims.push_back(d == 2 ? -1 : d);
        reduced[d] = true;
      }
    }
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE(absl::StrCat("dims [", absl::StrJoin(dims, ","), "] keepdim ", keepdim));
      const Scalar dim_list = Scalar::IntList(dims);
      const Scalar keep = Scalar::Bool(keepdim);
      OpRun run = RunOp(Mean(), {T(x), S(dim_list), S(keep)});
      ASSERT_OK(run.infer_status);
      ASSERT_OK(run.kernel_status);
      ExpectMean(run.results[0], x.ref(), reduced, keepdim);
    }
  }
}

TEST(SumTest, EverySetOfDimsWithAndWithoutKeepdim) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 4}, 7);
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{}, {0}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}}) {
    std::vector<bool> reduced(3, dims.empty());
    for (int64_t d : dims) reduced[d < 0 ? d + 3 : d] = true;
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE(absl::StrCat("dims [", absl::StrJoin(dims, ","), "] keepdim ", keepdim));
      const Scalar dim_list = Scalar::IntList(dims);
      const Scalar keep = Scalar::Bool(keepdim);
      OpRun run = RunOp(Sum(), {T(x), S(dim_list), S(keep)});
      ASSERT_OK(run.infer_status);
      ASSERT_OK(run.kernel_status);
      ExpectMean(run.results[0], x.ref(), reduced, keepdim, /*divide=*/false);
    }
  }
  // Strided: the transpose of a [4, 3].
  TestTensor base = TestTensor::Filled(DType::kFloat32, {4, 3}, 2);
  TensorRef t = base.View({3, 4}, {1, 3});
  OpRun strided = RunOp(Sum(), {T(t), S(Scalar::IntList({1})), S(Scalar::Bool(false))});
  ASSERT_OK(strided.kernel_status);
  ExpectMean(strided.results[0], t, {false, true}, false, /*divide=*/false);
}

TEST(SumTest, EmptySumIsZeroAndOnlyFloat32IsSummed) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 0});
  OpRun run = RunOp(Sum(), {T(x), S(Scalar::IntList({1})), S(Scalar::Bool(false))});
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(Get(run.results[0], {0}), 0.0);
  EXPECT_EQ(Get(run.results[0], {1}), 0.0);
  TestTensor i = TestTensor::Filled(DType::kInt64, {2, 3});
  EXPECT_THAT(InferOnly(Sum(), {T(i), S(Scalar::IntList({0})), S(Scalar::Bool(false))}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "sum: argument 0 has dtype int64, expected float32"));
}

TEST(MeanTest, StridedInputAndResult) {
  TestTensor base = TestTensor::Filled(DType::kFloat32, {4, 3}, 2);
  TensorRef x = base.View({3, 4}, {1, 3});  // the transpose
  const Scalar dims = Scalar::IntList({1});
  const Scalar keep = Scalar::Bool(true);
  OpRun run = RunOp(Mean(), {T(x), S(dims), S(keep)}, std::vector<int64_t>{2, 1});
  ASSERT_OK(run.kernel_status);
  ExpectMean(run.results[0], x, {false, true}, true);
}

TEST(MeanTest, EmptyReductionIsNaN) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 0});
  const Scalar dims = Scalar::IntList({1});
  const Scalar keep = Scalar::Bool(false);
  OpRun run = RunOp(Mean(), {T(x), S(dims), S(keep)});
  ASSERT_OK(run.kernel_status);
  EXPECT_TRUE(std::isnan(Get(run.results[0], {0})));
  EXPECT_TRUE(std::isnan(Get(run.results[0], {1})));
}

TEST(MeanTest, InferRejections) {
  TestTensor f = TestTensor::Filled(DType::kFloat32, {2, 3});
  TestTensor i = TestTensor::Filled(DType::kInt64, {2, 3});
  const Scalar keep = Scalar::Bool(false);
  const Scalar d0 = Scalar::IntList({0});
  const Scalar twice = Scalar::IntList({1, -1});
  const Scalar out_of_range = Scalar::IntList({2});
  EXPECT_THAT(InferOnly(Mean(), {T(i), S(d0), S(keep)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "mean: argument 0 has dtype int64, expected float32"));
  EXPECT_THAT(InferOnly(Mean(), {T(f), S(twice), S(keep)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names dim 1 twice")));
  EXPECT_THAT(InferOnly(Mean(), {T(f), S(out_of_range), S(keep)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 1 (dim 2) is out of range")));
}

}  // namespace
}  // namespace ferry
