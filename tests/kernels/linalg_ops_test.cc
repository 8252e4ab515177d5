#include <cmath>
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
using ::ferry::testing::Index;
using ::ferry::testing::InferOnly;
using ::ferry::testing::OpRun;
using ::ferry::testing::RunOp;
using ::ferry::testing::S;
using ::ferry::testing::SizesOf;
using ::ferry::testing::StatusIs;
using ::ferry::testing::T;
using ::ferry::testing::TestTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const OpSchema& Op(const std::string& name) {
  static const OpRegistry* registry = new OpRegistry(OpRegistry::WithBuiltIns());
  const OpSchema* s = registry->Find(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

// Naive matmul reference at one output index (batch dims broadcast right-aligned).
double MatmulAt(const TensorRef& a, const TensorRef& b, const Index& out_idx) {
  const int out_rank = static_cast<int>(out_idx.size());
  const int64_t i = out_idx[out_rank - 2];
  const int64_t j = out_idx[out_rank - 1];
  const int64_t k = a.sizes[a.rank - 1];
  auto batch_index = [&](const TensorRef& t, int64_t row, int64_t col) {
    Index idx(t.rank);
    const int lead = (out_rank - 2) - (t.rank - 2);
    for (int d = 0; d < t.rank - 2; ++d) idx[d] = t.sizes[d] == 1 ? 0 : out_idx[lead + d];
    idx[t.rank - 2] = row;
    idx[t.rank - 1] = col;
    return idx;
  };
  double acc = 0;
  for (int64_t kk = 0; kk < k; ++kk) acc += Get(a, batch_index(a, i, kk)) * Get(b, batch_index(b, kk, j));
  return acc;
}

void ExpectMatmul(const TensorRef& out, const TensorRef& a, const TensorRef& b) {
  ForEachIndex(SizesOf(out), [&](const Index& idx) {
    EXPECT_NEAR(Get(out, idx), MatmulAt(a, b, idx), 1e-4);
  });
}

TEST(MatmulTest, TwoDimensional) {
  TestTensor a = TestTensor::Filled(DType::kFloat32, {3, 5}, 1);
  TestTensor b = TestTensor::Filled(DType::kFloat32, {5, 4}, 2);
  OpRun run = RunOp(Op("matmul"), {T(a), T(b)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  EXPECT_THAT(SizesOf(run.results[0]), ElementsAre(3, 4));
  ExpectMatmul(run.results[0], a.ref(), b.ref());
}

TEST(MatmulTest, KnownValues) {
  // [[1, 2], [3, 4]] x [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
  TestTensor a = TestTensor::Float({2, 2}, {1, 2, 3, 4});
  TestTensor b = TestTensor::Float({2, 2}, {5, 6, 7, 8});
  OpRun run = RunOp(Op("matmul"), {T(a), T(b)});
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(Get(run.results[0], {0, 0}), 19);
  EXPECT_EQ(Get(run.results[0], {0, 1}), 22);
  EXPECT_EQ(Get(run.results[0], {1, 0}), 43);
  EXPECT_EQ(Get(run.results[0], {1, 1}), 50);
}

TEST(MatmulTest, NonContiguousOperandsAndResult) {
  TestTensor base_a = TestTensor::Filled(DType::kFloat32, {5, 3}, 1);
  TensorRef a = base_a.View({3, 5}, {1, 3});  // transposed
  TestTensor b = TestTensor::Strided(DType::kFloat32, {5, 4}, {9, 2}, 2);
  OpRun run = RunOp(Op("matmul"), {T(a), T(b)}, std::vector<int64_t>{1, 3});
  ASSERT_OK(run.kernel_status);
  ExpectMatmul(run.results[0], a, b.ref());
}

TEST(MatmulTest, BatchedWithBroadcasting) {
  TestTensor a = TestTensor::Filled(DType::kFloat32, {2, 1, 3, 4}, 1);
  TestTensor b = TestTensor::Filled(DType::kFloat32, {3, 4, 2}, 2);
  OpRun run = RunOp(Op("matmul"), {T(a), T(b)});
  ASSERT_OK(run.infer_status);
  EXPECT_THAT(SizesOf(run.results[0]), ElementsAre(2, 3, 3, 2));
  ExpectMatmul(run.results[0], a.ref(), b.ref());
  // A 2-D right operand broadcasts over a's batch.
  TestTensor w = TestTensor::Filled(DType::kFloat32, {4, 5}, 3);
  OpRun run2 = RunOp(Op("matmul"), {T(a), T(w)});
  ASSERT_OK(run2.infer_status);
  EXPECT_THAT(SizesOf(run2.results[0]), ElementsAre(2, 1, 3, 5));
  ExpectMatmul(run2.results[0], a.ref(), w.ref());
}

TEST(MatmulTest, EmptyInnerDimensionGivesZeros) {
  TestTensor a = TestTensor::Empty(DType::kFloat32, {2, 0});
  TestTensor b = TestTensor::Empty(DType::kFloat32, {0, 3});
  OpRun run = RunOp(Op("matmul"), {T(a), T(b)});
  ASSERT_OK(run.kernel_status);
  ForEachIndex({2, 3}, [&](const Index& idx) { EXPECT_EQ(Get(run.results[0], idx), 0.0); });
}

TEST(MatmulTest, InferRejections) {
  TestTensor v = TestTensor::Filled(DType::kFloat32, {3});
  TestTensor a = TestTensor::Filled(DType::kFloat32, {2, 3});
  TestTensor b = TestTensor::Filled(DType::kFloat32, {4, 2});
  TestTensor i = TestTensor::Filled(DType::kInt64, {3, 2});
  TestTensor ba = TestTensor::Filled(DType::kFloat32, {2, 2, 3});
  TestTensor bb = TestTensor::Filled(DType::kFloat32, {3, 3, 2});
  EXPECT_THAT(InferOnly(Op("matmul"), {T(v), T(a)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "matmul: argument 0 has shape [3], expected at least 2 dimensions"));
  EXPECT_THAT(InferOnly(Op("matmul"), {T(a), T(b)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("matmul: argument 1 has shape [4, 2]")));
  EXPECT_THAT(InferOnly(Op("matmul"), {T(a), T(i)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "matmul: argument 1 has dtype int64, expected float32"));
  EXPECT_THAT(InferOnly(Op("matmul"), {T(ba), T(bb)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch dimensions")));
}

// ---- layouts of huge shapes ---------------------------------------------------------------------

// Shape inference can propose a shape whose elements overflow int64 from arguments that each fit
// (a linear of [2^49, 4] by [2^49, 4] gives [2^49, 2^49]); making its layout must not overflow
// (the fuzzer found the signed overflow), and a stride past INT64_MAX saturates there.
TEST(TensorLayoutTest, StridesOfHugeShapesSaturateInsteadOfOverflowing) {
  const int64_t big = int64_t{1} << 49;
  TensorRef two = TensorRef::Contiguous(DType::kFloat32, {big, big});
  EXPECT_EQ(two.strides[0], big);
  EXPECT_EQ(two.strides[1], 1);
  TensorRef three = TensorRef::Contiguous(DType::kFloat32, {3, big, big});
  EXPECT_EQ(three.sizes[0], 3);
  EXPECT_EQ(three.strides[0], INT64_MAX);
  EXPECT_EQ(three.strides[1], big);
  EXPECT_EQ(three.strides[2], 1);
  TensorMeta meta{DType::kBool, {3, big, big}, {}};
  TensorRef from_meta = meta.ToRef();
  EXPECT_EQ(from_meta.strides[0], INT64_MAX);
  EXPECT_EQ(from_meta.strides[1], big);
  TensorMeta transposed{DType::kBool, {big, big}, {1, 0}};
  TensorRef column_major = transposed.ToRef();
  EXPECT_EQ(column_major.strides[0], 1);
  EXPECT_EQ(column_major.strides[1], big);
}

// ---- linear ---------------------------------------------------------------------------------

void ExpectLinear(const TensorRef& out, const TensorRef& x, const TensorRef& w,
                  const TensorRef* bias) {
  ForEachIndex(SizesOf(out), [&](const Index& idx) {
    const int last = out.rank - 1;
    double acc = bias != nullptr ? Get(*bias, {idx[last]}) : 0.0;
    Index xi = idx;
    for (int64_t i = 0; i < x.sizes[last]; ++i) {
      xi[last] = i;
      acc += Get(x, xi) * Get(w, {idx[last], i});
    }
    EXPECT_NEAR(Get(out, idx), acc, 1e-4);
  });
}

TEST(LinearTest, WithAndWithoutBias) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 4}, 1);
  TestTensor w = TestTensor::Filled(DType::kFloat32, {5, 4}, 2);
  TestTensor bias = TestTensor::Filled(DType::kFloat32, {5}, 3);
  OpRun run = RunOp(Op("linear"), {T(x), T(w), T(bias)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  EXPECT_THAT(SizesOf(run.results[0]), ElementsAre(2, 3, 5));
  ExpectLinear(run.results[0], x.ref(), w.ref(), &bias.ref());
  OpRun nobias = RunOp(Op("linear"), {T(x), T(w)});
  ASSERT_OK(nobias.kernel_status);
  ExpectLinear(nobias.results[0], x.ref(), w.ref(), nullptr);
}

TEST(LinearTest, NonContiguousInputsAndResult) {
  TestTensor base_w = TestTensor::Filled(DType::kFloat32, {4, 5}, 2);
  TensorRef w = base_w.View({5, 4}, {1, 5});  // stored transposed
  TestTensor x = TestTensor::Strided(DType::kFloat32, {3, 4}, {1, 3}, 1);
  OpRun run = RunOp(Op("linear"), {T(x), T(w)}, std::vector<int64_t>{1, 3});
  ASSERT_OK(run.kernel_status);
  ExpectLinear(run.results[0], x.ref(), w, nullptr);
  TestTensor v = TestTensor::Filled(DType::kFloat32, {4}, 4);
  OpRun vec = RunOp(Op("linear"), {T(v), T(w)});
  ASSERT_OK(vec.kernel_status);
  EXPECT_THAT(SizesOf(vec.results[0]), ElementsAre(5));
  ExpectLinear(vec.results[0], v.ref(), w, nullptr);
}

TEST(LinearTest, InferRejections) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 4});
  TestTensor w = TestTensor::Filled(DType::kFloat32, {5, 3});
  TestTensor good_w = TestTensor::Filled(DType::kFloat32, {5, 4});
  TestTensor bias = TestTensor::Filled(DType::kFloat32, {4});
  EXPECT_THAT(InferOnly(Op("linear"), {T(x), T(w)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("linear: argument 1 has shape [5, 3]")));
  EXPECT_THAT(InferOnly(Op("linear"), {T(x), T(good_w), T(bias)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "linear: argument 2 has shape [4], expected [5]"));
  EXPECT_THAT(InferOnly(Op("linear"), {T(x)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected 2 to 3 arguments")));
}

// ---- softmax, rms_norm ----------------------------------------------------------------------

void ExpectSoftmax(const TensorRef& out, const TensorRef& x, int dim) {
  ForEachIndex(SizesOf(out), [&](const Index& idx) {
    Index j = idx;
    double max = -INFINITY;
    for (int64_t k = 0; k < x.sizes[dim]; ++k) {
      j[dim] = k;
      max = std::max(max, Get(x, j));
    }
    double sum = 0;
    for (int64_t k = 0; k < x.sizes[dim]; ++k) {
      j[dim] = k;
      sum += std::exp(Get(x, j) - max);
    }
    EXPECT_NEAR(Get(out, idx), std::exp(Get(x, idx) - max) / sum, 1e-6);
  });
}

TEST(SoftmaxTest, EveryDimIncludingNegative) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 4}, 1);
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    const Scalar d = Scalar::Int(dim);
    OpRun run = RunOp(Op("softmax"), {T(x), S(d)});
    ASSERT_OK(run.infer_status) << dim;
    ASSERT_OK(run.kernel_status);
    ExpectSoftmax(run.results[0], x.ref(), static_cast<int>(dim < 0 ? dim + 3 : dim));
  }
}

TEST(SoftmaxTest, NonContiguousInputAndResult) {
  TestTensor base = TestTensor::Filled(DType::kFloat32, {4, 3}, 2);
  TensorRef x = base.View({3, 4}, {1, 3});
  const Scalar d = Scalar::Int(1);
  OpRun run = RunOp(Op("softmax"), {T(x), S(d)}, std::vector<int64_t>{1, 3});
  ASSERT_OK(run.kernel_status);
  ExpectSoftmax(run.results[0], x, 1);
}

TEST(SoftmaxTest, LargeInputsAreStable) {
  // exp(1000) overflows float; subtracting the max gives 1 / (1 + e) and e / (1 + e).
  TestTensor x = TestTensor::Float({2}, {1000.0f, 1001.0f});
  const Scalar d = Scalar::Int(0);
  OpRun run = RunOp(Op("softmax"), {T(x), S(d)});
  ASSERT_OK(run.kernel_status);
  const double e = std::exp(1.0);
  EXPECT_NEAR(Get(run.results[0], {0}), 1.0 / (1.0 + e), 1e-6);
  EXPECT_NEAR(Get(run.results[0], {1}), e / (1.0 + e), 1e-6);
}

TEST(SoftmaxTest, InferRejections) {
  TestTensor i = TestTensor::Filled(DType::kInt64, {2, 2});
  TestTensor f = TestTensor::Filled(DType::kFloat32, {2, 2});
  const Scalar d0 = Scalar::Int(0);
  const Scalar d2 = Scalar::Int(2);
  const Scalar dd = Scalar::Double(1.0);
  EXPECT_THAT(InferOnly(Op("softmax"), {T(i), S(d0)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "softmax: argument 0 has dtype int64, expected float32"));
  EXPECT_THAT(InferOnly(Op("softmax"), {T(f), S(d2)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "softmax: argument 1 (dim 2) is out of range for a tensor of rank 2"));
  EXPECT_THAT(InferOnly(Op("softmax"), {T(f), S(dd)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "softmax: argument 1 must be an int"));
  EXPECT_THAT(InferOnly(Op("softmax"), {T(f), T(f)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "softmax: argument 1 must be an int"));
}

// log_softmax along `dim`: x - log(sum(exp(x))) over the row, in double.
void ExpectLogSoftmax(const TensorRef& out, const TensorRef& x, int dim) {
  ForEachIndex(SizesOf(out), [&](const Index& idx) {
    Index j = idx;
    double sum = 0;
    for (int64_t k = 0; k < x.sizes[dim]; ++k) {
      j[dim] = k;
      sum += std::exp(Get(x, j));
    }
    EXPECT_NEAR(Get(out, idx), Get(x, idx) - std::log(sum), 1e-5);
  });
}

TEST(LogSoftmaxTest, EveryDimStridedAndLargeInputs) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 4}, 3);
  for (int64_t dim : {0, 1, 2, -1}) {
    const Scalar d = Scalar::Int(dim);
    OpRun run = RunOp(Op("log_softmax"), {T(x), S(d)});
    ASSERT_OK(run.infer_status) << dim;
    ASSERT_OK(run.kernel_status);
    ExpectLogSoftmax(run.results[0], x.ref(), static_cast<int>(dim < 0 ? dim + 3 : dim));
  }
  TestTensor base = TestTensor::Filled(DType::kFloat32, {4, 3}, 2);
  TensorRef t = base.View({3, 4}, {1, 3});
  OpRun strided = RunOp(Op("log_softmax"), {T(t), S(Scalar::Int(1))}, std::vector<int64_t>{1, 3});
  ASSERT_OK(strided.kernel_status);
  ExpectLogSoftmax(strided.results[0], t, 1);
  // exp(1000) overflows float: 1000 - (1001 + log(1 + 1/e)) and -log(1 + 1/e).
  TestTensor big = TestTensor::Float({2}, {1000.0f, 1001.0f});
  OpRun run = RunOp(Op("log_softmax"), {T(big), S(Scalar::Int(0))});
  ASSERT_OK(run.kernel_status);
  const double tail = std::log(1 + std::exp(-1.0));
  EXPECT_NEAR(Get(run.results[0], {0}), -1 - tail, 1e-4);
  EXPECT_NEAR(Get(run.results[0], {1}), -tail, 1e-4);
  TestTensor i = TestTensor::Filled(DType::kInt64, {2});
  EXPECT_THAT(InferOnly(Op("log_softmax"), {T(i), S(Scalar::Int(0))}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "log_softmax: argument 0 has dtype int64, expected float32"));
}

void ExpectRmsNorm(const TensorRef& out, const TensorRef& x, const TensorRef& w, double eps) {
  ForEachIndex(SizesOf(out), [&](const Index& idx) {
    const int last = x.rank - 1;
    Index j = idx;
    double sq = 0;
    for (int64_t k = 0; k < x.sizes[last]; ++k) {
      j[last] = k;
      sq += Get(x, j) * Get(x, j);
    }
    const double want = Get(x, idx) / std::sqrt(sq / x.sizes[last] + eps) * Get(w, {idx[last]});
    EXPECT_NEAR(Get(out, idx), want, 1e-5);
  });
}

TEST(RmsNormTest, MatchesReference) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 8}, 1);
  TestTensor w = TestTensor::Filled(DType::kFloat32, {8}, 2);
  const Scalar eps = Scalar::Double(1e-5);
  OpRun run = RunOp(Op("rms_norm"), {T(x), T(w), S(eps)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  ExpectRmsNorm(run.results[0], x.ref(), w.ref(), 1e-5);
  // Strided input and result, and an int eps.
  TestTensor base = TestTensor::Filled(DType::kFloat32, {8, 3}, 3);
  TensorRef xt = base.View({3, 8}, {1, 3});
  const Scalar one = Scalar::Int(1);
  OpRun strided = RunOp(Op("rms_norm"), {T(xt), T(w), S(one)}, std::vector<int64_t>{1, 3});
  ASSERT_OK(strided.kernel_status);
  ExpectRmsNorm(strided.results[0], xt, w.ref(), 1.0);
}

TEST(RmsNormTest, InferRejections) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 4});
  TestTensor w = TestTensor::Filled(DType::kFloat32, {3});
  const Scalar eps = Scalar::Double(1e-6);
  const Scalar list = Scalar::IntList({1});
  EXPECT_THAT(InferOnly(Op("rms_norm"), {T(x), T(w), S(eps)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rms_norm: argument 1 has shape [3], expected [4]")));
  TestTensor w4 = TestTensor::Filled(DType::kFloat32, {4});
  EXPECT_THAT(InferOnly(Op("rms_norm"), {T(x), T(w4), S(list)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rms_norm: argument 2 must be a number")));
}

}  // namespace
}  // namespace ferry
