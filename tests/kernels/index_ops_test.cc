#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ferry/kernels/op_registry.h"
#include "tests/kernels/op_test_util.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ForEachIndex;
using ::ferry::testing::Get;
using ::ferry::testing::GetBroadcast;
using ::ferry::testing::Index;
using ::ferry::testing::InferOnly;
using ::ferry::testing::OpRun;
using ::ferry::testing::RunOp;
using ::ferry::testing::StatusIs;
using ::ferry::testing::T;
using ::ferry::testing::TestTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const OpSchema& IndexPut() {
  static const OpRegistry* registry = new OpRegistry(OpRegistry::WithBuiltIns());
  return *registry->Find("index_put_");
}

// Reference: a copy of self with rows replaced in order (later indices win).
std::vector<double> Reference(const TensorRef& self, const std::vector<int64_t>& indices,
                              const TensorRef& values) {
  std::vector<int64_t> sizes(self.sizes.begin(), self.sizes.begin() + self.rank);
  std::vector<int64_t> row_shape = sizes;
  row_shape[0] = static_cast<int64_t>(indices.size());
  std::vector<double> out;
  ForEachIndex(sizes, [&](const Index& idx) {
    double v = Get(self, idx);
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t row = indices[i] < 0 ? indices[i] + sizes[0] : indices[i];
      if (row != idx[0]) continue;
      Index vi = idx;
      vi[0] = static_cast<int64_t>(i);
      v = GetBroadcast(values, vi);
    }
    out.push_back(v);
  });
  return out;
}

std::vector<double> Elements(const TensorRef& t) {
  std::vector<double> out;
  ForEachIndex(std::vector<int64_t>(t.sizes.begin(), t.sizes.begin() + t.rank),
               [&](const Index& idx) { out.push_back(Get(t, idx)); });
  return out;
}

TEST(IndexPutTest, SchemaWritesSelfAndAliasesIt) {
  EXPECT_THAT(IndexPut().written_args, ElementsAre(0));
  EXPECT_EQ(IndexPut().ViewOf(0), 0);
}

TEST(IndexPutTest, WritesRowsWithNegativeIndices) {
  TestTensor self = TestTensor::Filled(DType::kFloat32, {4, 3}, 1);
  TestTensor before = TestTensor::Filled(DType::kFloat32, {4, 3}, 1);
  const std::vector<int64_t> idx = {2, -1};
  TestTensor indices = TestTensor::Int({2}, idx);
  TestTensor values = TestTensor::Filled(DType::kFloat32, {2, 3}, 7);
  OpRun run = RunOp(IndexPut(), {T(self), T(indices), T(values)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(run.results[0].data, self.ref().data);
  EXPECT_EQ(Elements(self.ref()), Reference(before.ref(), idx, values.ref()));
  // Row 3 (index -1) now holds values row 1.
  EXPECT_EQ(Get(self.ref(), {3, 2}), Get(values.ref(), {1, 2}));
}

TEST(IndexPutTest, BroadcastValuesAndStridedSelfInt64) {
  // self: a [5, 2, 3] KV-cache-like tensor stored with padded rows.
  TestTensor self = TestTensor::Strided(DType::kInt64, {5, 2, 3}, {8, 4, 1}, 1);
  TestTensor before = TestTensor::Strided(DType::kInt64, {5, 2, 3}, {8, 4, 1}, 1);
  const std::vector<int64_t> idx = {0, 4, 1};
  TestTensor indices = TestTensor::Int({3}, idx);
  TestTensor values = TestTensor::Filled(DType::kInt64, {1, 3}, 5);  // broadcast to [3, 2, 3]
  OpRun run = RunOp(IndexPut(), {T(self), T(indices), T(values)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(Elements(self.ref()), Reference(before.ref(), idx, values.ref()));
  EXPECT_TRUE(self.Untouched(3));  // padding untouched
  EXPECT_TRUE(self.Untouched(7));
}

TEST(IndexPutTest, OutOfRangeIndexWritesNothing) {
  TestTensor self = TestTensor::Filled(DType::kFloat32, {4, 2}, 1);
  TestTensor before = TestTensor::Filled(DType::kFloat32, {4, 2}, 1);
  // The valid index 1 comes first: it must not be written either.
  TestTensor indices = TestTensor::Int({2}, {1, 7});
  TestTensor values = TestTensor::Filled(DType::kFloat32, {2, 2}, 9);
  OpRun run = RunOp(IndexPut(), {T(self), T(indices), T(values)});
  ASSERT_OK(run.infer_status);
  EXPECT_THAT(run.kernel_status,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "index_put_: index 7 is out of range for dimension 0 of size 4"));
  EXPECT_EQ(Elements(self.ref()), Elements(before.ref()));

  TestTensor negative = TestTensor::Int({1}, {-5});
  TestTensor one_row = TestTensor::Filled(DType::kFloat32, {1, 2}, 9);
  OpRun run2 = RunOp(IndexPut(), {T(self), T(negative), T(one_row)});
  EXPECT_THAT(run2.kernel_status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index -5 is out of range")));
  EXPECT_EQ(Elements(self.ref()), Elements(before.ref()));
}

TEST(IndexPutTest, InferRejections) {
  TestTensor self = TestTensor::Filled(DType::kFloat32, {4, 2});
  TestTensor float_idx = TestTensor::Filled(DType::kFloat32, {2});
  TestTensor idx2d = TestTensor::Filled(DType::kInt64, {2, 1});
  TestTensor idx = TestTensor::Int({2}, {0, 1});
  TestTensor values = TestTensor::Filled(DType::kFloat32, {2, 2});
  TestTensor wrong = TestTensor::Filled(DType::kFloat32, {3, 2});
  TestTensor int_values = TestTensor::Filled(DType::kInt64, {2, 2});
  EXPECT_THAT(InferOnly(IndexPut(), {T(self), T(float_idx), T(values)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "index_put_: argument 1 has dtype float32, expected int64"));
  EXPECT_THAT(InferOnly(IndexPut(), {T(self), T(idx2d), T(values)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("index_put_: argument 1 has shape [2, 1]")));
  EXPECT_THAT(InferOnly(IndexPut(), {T(self), T(idx), T(wrong)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("index_put_: argument 2 has shape [3, 2], which does not "
                                 "broadcast to [2, 2]")));
  EXPECT_THAT(InferOnly(IndexPut(), {T(self), T(idx), T(int_values)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("index_put_: argument 2 has dtype int64")));
}

const OpSchema& Embedding() {
  static const OpRegistry* registry = new OpRegistry(OpRegistry::WithBuiltIns());
  return *registry->Find("embedding");
}

TEST(EmbeddingTest, GathersRowsOfAStridedTable) {
  // A [5, 2, 3] table stored with padded rows; rows 3, 0, 3 (as -2) and 4 gathered.
  TestTensor weight = TestTensor::Strided(DType::kFloat32, {5, 2, 3}, {8, 4, 1}, 1);
  const std::vector<int64_t> idx = {3, 0, -2, 4};
  TestTensor indices = TestTensor::Int({4}, idx);
  OpRun run = RunOp(Embedding(), {T(weight), T(indices)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  const TensorRef& out = run.results[0];
  ASSERT_EQ(out.rank, 3);
  EXPECT_THAT(std::vector<int64_t>(out.sizes.begin(), out.sizes.begin() + 3), ElementsAre(4, 2, 3));
  ForEachIndex({4, 2, 3}, [&](const Index& i) {
    const int64_t row = idx[i[0]] < 0 ? idx[i[0]] + 5 : idx[i[0]];
    EXPECT_EQ(Get(out, i), Get(weight.ref(), {row, i[1], i[2]})) << "at " << i[0];
  });
  EXPECT_FALSE(Embedding().ViewOf(0) >= 0);
  EXPECT_TRUE(Embedding().written_args.empty());
}

TEST(EmbeddingTest, Int64TableAndOneDimensionalTable) {
  TestTensor table = TestTensor::Int({4}, {10, 20, 30, 40});
  TestTensor indices = TestTensor::Int({3}, {2, 2, 0});
  OpRun run = RunOp(Embedding(), {T(table), T(indices)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(Elements(run.results[0]), (std::vector<double>{30, 30, 10}));
}

TEST(EmbeddingTest, OutOfRangeIndexWritesNothing) {
  TestTensor weight = TestTensor::Filled(DType::kFloat32, {4, 2}, 1);
  TestTensor indices = TestTensor::Int({3}, {1, 2, 4});
  OpRun run = RunOp(Embedding(), {T(weight), T(indices)});
  ASSERT_OK(run.infer_status);
  EXPECT_THAT(run.kernel_status,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "embedding: index 4 is out of range for dimension 0 of size 4"));
  TestTensor negative = TestTensor::Int({1}, {-5});
  EXPECT_THAT(RunOp(Embedding(), {T(weight), T(negative)}).kernel_status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index -5 is out of range")));
}

TEST(EmbeddingTest, InferRejections) {
  TestTensor weight = TestTensor::Filled(DType::kFloat32, {4, 2});
  TestTensor scalar_weight = TestTensor::Filled(DType::kFloat32, {});
  TestTensor float_idx = TestTensor::Filled(DType::kFloat32, {2});
  TestTensor idx2d = TestTensor::Filled(DType::kInt64, {2, 1});
  TestTensor idx = TestTensor::Int({2}, {0, 1});
  EXPECT_THAT(InferOnly(Embedding(), {T(weight), T(float_idx)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "embedding: argument 1 has dtype float32, expected int64"));
  EXPECT_THAT(InferOnly(Embedding(), {T(weight), T(idx2d)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("embedding: argument 1 has shape [2, 1]")));
  EXPECT_THAT(InferOnly(Embedding(), {T(scalar_weight), T(idx)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("embedding: argument 0 has shape []")));
  EXPECT_THAT(InferOnly(Embedding(), {T(weight)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("embedding")));
}

}  // namespace
}  // namespace ferry
