// The helpers every op's inference and kernels share (kernels/internal/op_util.h): shapes in
// messages, argument checks that name the op and the argument, dim wrapping, NumPy broadcasting,
// and the broadcasting copy, against hand-checked values.
#include "ferry/kernels/internal/op_util.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::internal {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(OpUtil, ShapeStrings) {
  EXPECT_EQ(ShapeString(std::vector<int64_t>{}), "[]");
  EXPECT_EQ(ShapeString(std::vector<int64_t>{2, 3}), "[2, 3]");
  EXPECT_EQ(ShapeString(TensorRef::Contiguous(DType::kFloat32, {4, 1, 5})), "[4, 1, 5]");
}

TEST(OpUtil, ArityNamesWhatWasExpected) {
  std::vector<OpArg> two(2);
  std::vector<InferredResult> one(1);
  EXPECT_OK(CheckArity("op", two, 2, 2, absl::MakeSpan(one), 1));
  EXPECT_OK(CheckArity("op", two, 1, -1, absl::MakeSpan(one), 1));
  EXPECT_THAT(CheckArity("op", two, 3, 3, absl::MakeSpan(one), 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op: expected 3 arguments, got 2")));
  EXPECT_THAT(CheckArity("op", two, 3, -1, absl::MakeSpan(one), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected at least 3")));
  EXPECT_THAT(CheckArity("op", two, 0, 1, absl::MakeSpan(one), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected 0 to 1")));
  EXPECT_THAT(CheckArity("op", two, 2, 2, absl::MakeSpan(one), 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected 2 results, got 1")));
}

TEST(OpUtil, ScalarArgumentsOfTheWrongKindAreNamed) {
  const Scalar i = Scalar::Int(7);
  const Scalar d = Scalar::Double(2.5);
  const Scalar b = Scalar::Bool(true);
  const Scalar list = Scalar::IntList({1, 2});
  TensorRef t = TensorRef::Contiguous(DType::kFloat32, {2});
  std::vector<OpArg> args(5);
  args[0].scalar = &i;
  args[1].scalar = &d;
  args[2].scalar = &b;
  args[3].scalar = &list;
  args[4].tensor = &t;
  EXPECT_EQ(IntArg("op", args, 0).value_or(-1), 7);
  EXPECT_EQ(IntArg("op", args, 2).value_or(-1), 1);  // a bool is an int
  EXPECT_THAT(IntArg("op", args, 1), StatusIs(absl::StatusCode::kInvalidArgument,
                                              HasSubstr("argument 1")));
  EXPECT_THAT(IntArg("op", args, 4), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  ASSERT_OK_AND_ASSIGN(const std::vector<int64_t>* l, IntListArg("op", args, 3));
  EXPECT_THAT(*l, ElementsAre(1, 2));
  EXPECT_THAT(IntListArg("op", args, 0), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  for (int n : {0, 1, 2}) EXPECT_OK(NumberArg("op", args, n).status()) << n;
  EXPECT_THAT(NumberArg("op", args, 3), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(OpUtil, NumbersThatDoNotFitTheDtypeAreRefused) {
  EXPECT_OK(CheckNumberFits("op", 1, Scalar::Double(1e30), DType::kFloat32));
  EXPECT_OK(CheckNumberFits("op", 1, Scalar::Double(-3.0), DType::kInt64));
  EXPECT_OK(CheckNumberFits("op", 1, Scalar::Int(std::numeric_limits<int64_t>::max()),
                            DType::kInt64));
  EXPECT_THAT(CheckNumberFits("op", 1, Scalar::Double(1e30), DType::kInt64),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 1 (1e+30) cannot be converted to int64")));
  EXPECT_THAT(CheckNumberFits("op", 1, Scalar::Double(std::nan("")), DType::kInt64),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(OpUtil, DimsWrapFromTheEnd) {
  EXPECT_EQ(NormalizeDim("op", 1, 0, 3).value_or(-1), 0);
  EXPECT_EQ(NormalizeDim("op", 1, 2, 3).value_or(-1), 2);
  EXPECT_EQ(NormalizeDim("op", 1, -1, 3).value_or(-1), 2);
  EXPECT_EQ(NormalizeDim("op", 1, -3, 3).value_or(-1), 0);
  EXPECT_THAT(NormalizeDim("op", 1, 3, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 1 (dim 3) is out of range for a tensor of rank 3")));
  EXPECT_THAT(NormalizeDim("op", 1, -4, 3), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(OpUtil, NumPyBroadcasting) {
  std::vector<int64_t> out;
  ASSERT_TRUE(BroadcastShapes(std::vector<int64_t>{2, 1, 3}, std::vector<int64_t>{4, 1}, &out));
  EXPECT_THAT(out, ElementsAre(2, 4, 3));
  ASSERT_TRUE(BroadcastShapes(std::vector<int64_t>{}, std::vector<int64_t>{5}, &out));
  EXPECT_THAT(out, ElementsAre(5));
  ASSERT_TRUE(BroadcastShapes(std::vector<int64_t>{0, 1}, std::vector<int64_t>{1, 3}, &out));
  EXPECT_THAT(out, ElementsAre(0, 3));
  EXPECT_FALSE(BroadcastShapes(std::vector<int64_t>{2, 3}, std::vector<int64_t>{3, 2}, &out));
  std::vector<int64_t> deep(kMaxRank + 1, 1);
  EXPECT_FALSE(BroadcastShapes(deep, std::vector<int64_t>{1}, &out));
  EXPECT_TRUE(BroadcastsTo(std::vector<int64_t>{3}, std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(BroadcastsTo(std::vector<int64_t>{1, 3}, std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(BroadcastsTo(std::vector<int64_t>{2, 3}, std::vector<int64_t>{3}));
  EXPECT_FALSE(BroadcastsTo(std::vector<int64_t>{2, 1}, std::vector<int64_t>{1, 3}));
}

TEST(OpUtil, BroadcastCopyFillsEveryElementOfTheDestination) {
  std::vector<float> row = {1, 2, 3};
  std::vector<float> out(6, 0);
  TensorRef src = TensorRef::Contiguous(DType::kFloat32, {3}, row.data());
  TensorRef dst = TensorRef::Contiguous(DType::kFloat32, {2, 3}, out.data());
  BroadcastCopy(dst, src);
  EXPECT_THAT(out, ElementsAre(1, 2, 3, 1, 2, 3));
  // Into a transposed destination: dst[i][j] at i + 2 * j.
  std::vector<float> column = {5, 6};
  std::vector<float> t(6, 0);
  TensorRef col = TensorRef::Contiguous(DType::kFloat32, {2, 1}, column.data());
  TensorRef dst_t = TensorRef::Contiguous(DType::kFloat32, {2, 3}, t.data());
  dst_t.strides[0] = 1;
  dst_t.strides[1] = 2;
  BroadcastCopy(dst_t, col);
  EXPECT_THAT(t, ElementsAre(5, 6, 5, 6, 5, 6));
}

}  // namespace
}  // namespace ferry::internal
