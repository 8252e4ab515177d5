#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ferry/kernels/op_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/op_test_util.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ForEachIndex;
using ::ferry::testing::Get;
using ::ferry::testing::GetBroadcast;
using ::ferry::testing::GetInt;
using ::ferry::testing::Index;
using ::ferry::testing::InferOnly;
using ::ferry::testing::OpRun;
using ::ferry::testing::RunOp;
using ::ferry::testing::S;
using ::ferry::testing::SizesOf;
using ::ferry::testing::StatusIs;
using ::ferry::testing::StridesOf;
using ::ferry::testing::T;
using ::ferry::testing::TestTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const OpRegistry& Registry() {
  static const OpRegistry* registry = new OpRegistry(OpRegistry::WithBuiltIns());
  return *registry;
}

const OpSchema& Op(const std::string& name) {
  const OpSchema* s = Registry().Find(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

using BinaryRef = std::function<double(double, double)>;

struct BinaryCase {
  std::string name;
  BinaryRef ref;
  bool int_ok;
};

std::vector<BinaryCase> BinaryCases() {
  return {
      {"add", [](double a, double b) { return a + b; }, true},
      {"sub", [](double a, double b) { return a - b; }, true},
      {"mul", [](double a, double b) { return a * b; }, true},
      {"div", [](double a, double b) { return a / b; }, false},
      {"maximum", [](double a, double b) { return a > b ? a : b; }, true},
      {"minimum", [](double a, double b) { return a < b ? a : b; }, true},
  };
}

// Checks every element of `out` (shape `sizes`) against ref(a, b) under broadcasting.
void ExpectBinary(const TensorRef& out, const TensorRef& a, const TensorRef& b, const BinaryRef& ref,
                  const std::string& what) {
  ForEachIndex(SizesOf(out), [&](const Index& idx) {
    const double want = ref(GetBroadcast(a, idx), GetBroadcast(b, idx));
    if (out.dtype == DType::kFloat32) {
      EXPECT_FLOAT_EQ(Get(out, idx), static_cast<float>(want)) << what;
    } else {
      EXPECT_EQ(Get(out, idx), want) << what;
    }
  });
}

TEST(BinaryOpsTest, ContiguousSameShapeFloat) {
  for (const BinaryCase& c : BinaryCases()) {
    TestTensor a = TestTensor::Filled(DType::kFloat32, {3, 5}, 1);
    TestTensor b = TestTensor::Filled(DType::kFloat32, {3, 5}, 2);
    OpRun run = RunOp(Op(c.name), {T(a), T(b)});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    EXPECT_THAT(SizesOf(run.results[0]), ElementsAre(3, 5));
    EXPECT_THAT(StridesOf(run.results[0]), ElementsAre(5, 1));
    ExpectBinary(run.results[0], a.ref(), b.ref(), c.ref, c.name);
  }
}

TEST(BinaryOpsTest, ContiguousSameShapeInt64) {
  for (const BinaryCase& c : BinaryCases()) {
    if (!c.int_ok) continue;
    TestTensor a = TestTensor::Filled(DType::kInt64, {4, 3}, 3);
    TestTensor b = TestTensor::Filled(DType::kInt64, {4, 3}, 4);
    OpRun run = RunOp(Op(c.name), {T(a), T(b)});
    ASSERT_OK(run.infer_status);
    EXPECT_EQ(run.results[0].dtype, DType::kInt64);
    ExpectBinary(run.results[0], a.ref(), b.ref(), c.ref, c.name);
  }
}

TEST(BinaryOpsTest, BroadcastsBothOperands) {
  for (const BinaryCase& c : BinaryCases()) {
    TestTensor a = TestTensor::Filled(DType::kFloat32, {2, 3, 1}, 1);
    TestTensor b = TestTensor::Filled(DType::kFloat32, {4}, 2);
    OpRun run = RunOp(Op(c.name), {T(a), T(b)});
    ASSERT_OK(run.infer_status);
    EXPECT_THAT(SizesOf(run.results[0]), ElementsAre(2, 3, 4));
    ExpectBinary(run.results[0], a.ref(), b.ref(), c.ref, c.name);
  }
}

TEST(BinaryOpsTest, NonContiguousInputsAndResult) {
  // a: a transposed [4, 3] view of a [3, 4] buffer; b: every other column of a [4, 6] buffer;
  // c: a [3] vector expanded to [4, 3] with a 0 stride; the result is written column-major.
  TestTensor base_a = TestTensor::Filled(DType::kFloat32, {3, 4}, 1);
  TensorRef a = base_a.View({4, 3}, {1, 4});
  TestTensor b = TestTensor::Strided(DType::kFloat32, {4, 3}, {6, 2}, 2);
  TestTensor base_c = TestTensor::Filled(DType::kFloat32, {3}, 3);
  TensorRef c = base_c.View({4, 3}, {0, 1});
  for (const BinaryCase& op : BinaryCases()) {
    OpRun run = RunOp(Op(op.name), {T(a), T(b)}, std::vector<int64_t>{1, 4});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    ExpectBinary(run.results[0], a, b.ref(), op.ref, op.name + " transposed x strided");
    OpRun run2 = RunOp(Op(op.name), {T(c), T(a)});
    ASSERT_OK(run2.infer_status);
    ExpectBinary(run2.results[0], c, a, op.ref, op.name + " expanded x transposed");
  }
}

TEST(BinaryOpsTest, StridedResultLeavesGapsUntouched) {
  TestTensor a = TestTensor::Filled(DType::kFloat32, {2, 3}, 1);
  TestTensor b = TestTensor::Filled(DType::kFloat32, {2, 3}, 2);
  // Rows 8 elements apart: elements 3..7 of each row are gaps.
  OpRun run = RunOp(Op("add"), {T(a), T(b)}, std::vector<int64_t>{8, 1});
  ASSERT_OK(run.kernel_status);
  ExpectBinary(run.results[0], a.ref(), b.ref(), [](double x, double y) { return x + y; }, "add");
  for (int i = 3; i < 8; ++i) EXPECT_TRUE(run.storage[0].Untouched(i)) << i;
  EXPECT_FALSE(run.storage[0].Untouched(8));  // row 1 starts here
}

TEST(BinaryOpsTest, ScalarSecondOperand) {
  TestTensor a = TestTensor::Filled(DType::kFloat32, {2, 3}, 1);
  const Scalar two = Scalar::Int(2);
  const Scalar half = Scalar::Double(0.5);
  const Scalar yes = Scalar::Bool(true);
  for (const BinaryCase& c : BinaryCases()) {
    for (const Scalar* s : {&two, &half, &yes}) {
      OpRun run = RunOp(Op(c.name), {T(a), S(*s)});
      ASSERT_OK(run.infer_status);
      const double v = s->AsDouble();
      ForEachIndex({2, 3}, [&](const Index& idx) {
        EXPECT_FLOAT_EQ(Get(run.results[0], idx), static_cast<float>(c.ref(Get(a.ref(), idx), v)))
            << c.name << " " << s->ToString();
      });
    }
  }
}

TEST(BinaryOpsTest, ScalarIsConvertedToTensorDtype) {
  TestTensor a = TestTensor::Int({3}, {1, 2, 3});
  const Scalar s = Scalar::Double(2.7);  // truncates to 2 for int64
  OpRun run = RunOp(Op("mul"), {T(a), S(s)});
  ASSERT_OK(run.infer_status);
  EXPECT_EQ(run.results[0].dtype, DType::kInt64);
  EXPECT_EQ(GetInt(run.results[0], {0}), 2);
  EXPECT_EQ(GetInt(run.results[0], {2}), 6);
  // A scalar on a non-contiguous tensor takes the strided path.
  TestTensor strided = TestTensor::Strided(DType::kInt64, {3}, {2}, 0);
  OpRun run2 = RunOp(Op("add"), {T(strided), S(Scalar::Int(10))});
  ASSERT_OK(run2.infer_status);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(GetInt(run2.results[0], {i}), GetInt(strided.ref(), {i}) + 10);
  }
}

TEST(BinaryOpsTest, Int64ArithmeticWraps) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  TestTensor a = TestTensor::Int({2}, {max, min});
  TestTensor b = TestTensor::Int({2}, {1, 1});
  OpRun add = RunOp(Op("add"), {T(a), T(b)});
  OpRun sub = RunOp(Op("sub"), {T(a), T(b)});
  ASSERT_OK(add.infer_status);
  EXPECT_EQ(GetInt(add.results[0], {0}), min);
  EXPECT_EQ(GetInt(sub.results[0], {1}), max);
}

TEST(BinaryOpsTest, MaximumAndMinimumPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TestTensor a = TestTensor::Float({3}, {nan, 1.0f, 2.0f});
  TestTensor b = TestTensor::Float({3}, {0.0f, nan, 3.0f});
  for (const char* name : {"maximum", "minimum"}) {
    OpRun run = RunOp(Op(name), {T(a), T(b)});
    EXPECT_TRUE(std::isnan(Get(run.results[0], {0}))) << name;
    EXPECT_TRUE(std::isnan(Get(run.results[0], {1}))) << name;
  }
  EXPECT_EQ(Get(RunOp(Op("maximum"), {T(a), T(b)}).results[0], {2}), 3.0);
  EXPECT_EQ(Get(RunOp(Op("minimum"), {T(a), T(b)}).results[0], {2}), 2.0);
}

TEST(BinaryOpsTest, InPlaceWritesArgumentZeroAndAliasesIt) {
  for (const BinaryCase& c : BinaryCases()) {
    const std::string name = c.name + "_";
    const OpSchema* schema = Registry().Find(name);
    if (c.name == "maximum" || c.name == "minimum") {
      ASSERT_NE(schema, nullptr) << name;  // in-place forms of every binary op
    }
    if (schema == nullptr) continue;
    EXPECT_THAT(schema->written_args, ElementsAre(0));
    EXPECT_EQ(schema->ViewOf(0), 0);
    TestTensor a = TestTensor::Filled(DType::kFloat32, {2, 3}, 1);
    TestTensor original = TestTensor::Filled(DType::kFloat32, {2, 3}, 1);
    TestTensor b = TestTensor::Filled(DType::kFloat32, {3}, 2);  // broadcast to [2, 3]
    OpRun run = RunOp(*schema, {T(a), T(b)});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    EXPECT_EQ(run.inferred[0].view_offset, 0);
    EXPECT_EQ(run.results[0].data, a.ref().data);
    ExpectBinary(a.ref(), original.ref(), b.ref(), c.ref, name);
  }
}

TEST(BinaryOpsTest, InPlaceOnTransposedViewWritesThroughStrides) {
  TestTensor base = TestTensor::Filled(DType::kInt64, {3, 2}, 1);
  TestTensor original = TestTensor::Filled(DType::kInt64, {3, 2}, 1);
  TensorRef view = base.View({2, 3}, {1, 2});
  TensorRef original_view = original.View({2, 3}, {1, 2});
  TestTensor other = TestTensor::Filled(DType::kInt64, {2, 1}, 5);
  OpRun run = RunOp(Op("mul_"), {T(view), T(other)});
  ASSERT_OK(run.kernel_status);
  EXPECT_THAT(StridesOf(run.results[0]), ElementsAre(1, 2));
  ForEachIndex({2, 3}, [&](const Index& idx) {
    EXPECT_EQ(Get(view, idx), GetBroadcast(original_view, idx) * GetBroadcast(other.ref(), idx));
    EXPECT_EQ(Get(run.results[0], idx), Get(view, idx));
  });
}

TEST(BinaryOpsTest, InPlaceRejectsOperandThatWouldGrowArgumentZero) {
  TestTensor a = TestTensor::Filled(DType::kFloat32, {3, 1}, 1);
  TestTensor b = TestTensor::Filled(DType::kFloat32, {3, 4}, 2);
  EXPECT_THAT(InferOnly(Op("add_"), {T(a), T(b)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("add_: argument 1 has shape [3, 4], which does not broadcast to "
                                 "[3, 1]")));
}

TEST(BinaryOpsTest, InferRejections) {
  TestTensor f23 = TestTensor::Filled(DType::kFloat32, {2, 3});
  TestTensor f22 = TestTensor::Filled(DType::kFloat32, {2, 2});
  TestTensor i22 = TestTensor::Filled(DType::kInt64, {2, 2});
  const Scalar list = Scalar::IntList({1, 2});
  const Scalar huge = Scalar::Double(1e30);
  EXPECT_THAT(InferOnly(Op("add"), {T(f22), T(f23)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "add: argument 1 has shape [2, 3], which does not broadcast with [2, 2]"));
  EXPECT_THAT(InferOnly(Op("div"), {T(i22), T(i22)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "div: argument 0 has dtype int64, expected float32"));
  EXPECT_THAT(InferOnly(Op("sub"), {T(f22), T(i22)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sub: argument 1 has dtype int64")));
  EXPECT_THAT(InferOnly(Op("mul"), {T(f22), S(list)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mul: argument 1 must be")));
  EXPECT_THAT(InferOnly(Op("add"), {S(list), T(f22)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "add: argument 0 must be a tensor"));
  EXPECT_THAT(InferOnly(Op("add"), {T(f22)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("add: expected 2 arguments, got 1")));
  EXPECT_THAT(InferOnly(Op("add"), {T(f22), T(f22), T(f22)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got 3")));
  EXPECT_THAT(InferOnly(Op("add"), {T(i22), S(huge)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot be converted to int64")));
}

// ---- Unary --------------------------------------------------------------------------------

struct UnaryCase {
  std::string name;
  std::function<double(double)> ref;
  bool int_ok;
};

std::vector<UnaryCase> UnaryCases() {
  return {
      {"relu", [](double x) { return x > 0 ? x : 0; }, true},
      {"neg", [](double x) { return -x; }, true},
      {"abs", [](double x) { return x < 0 ? -x : x; }, true},
      {"exp", [](double x) { return std::exp(x); }, false},
      {"log", [](double x) { return std::log(x); }, false},
      {"sin", [](double x) { return std::sin(x); }, false},
      {"cos", [](double x) { return std::cos(x); }, false},
      {"tanh", [](double x) { return std::tanh(x); }, false},
      {"sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, false},
      {"silu", [](double x) { return x / (1.0 + std::exp(-x)); }, false},
      {"gelu", [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, false},
      {"gelu_tanh",
       [](double x) {
         return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
       },
       false},
      {"hardswish", [](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; }, false},
      {"hardsigmoid", [](double x) { return std::clamp(x + 3, 0.0, 6.0) / 6; }, false},
      {"sqrt", [](double x) { return std::sqrt(x); }, false},
      {"rsqrt", [](double x) { return 1.0 / std::sqrt(x); }, false},
      {"floor", [](double x) { return std::floor(x); }, false},
      {"ceil", [](double x) { return std::ceil(x); }, false},
  };
}

void ExpectUnary(const TensorRef& out, const TensorRef& in, const UnaryCase& c,
                 const std::string& what) {
  ForEachIndex(SizesOf(out), [&](const Index& idx) {
    const double want = c.ref(Get(in, idx));
    const double got = Get(out, idx);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << what;
    } else {
      EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want))) << what;
    }
  });
}

TEST(UnaryOpsTest, FloatContiguousAndStrided) {
  for (const UnaryCase& c : UnaryCases()) {
    TestTensor x = TestTensor::Filled(DType::kFloat32, {3, 4}, 1);
    // log and sqrt see negative inputs here: NaN in the reference and in the kernel.
    OpRun run = RunOp(Op(c.name), {T(x)});
    ASSERT_OK(run.infer_status) << c.name;
    ASSERT_OK(run.kernel_status);
    ExpectUnary(run.results[0], x.ref(), c, c.name);

    TestTensor base = TestTensor::Filled(DType::kFloat32, {4, 6}, 2);
    TensorRef view = base.View({3, 4}, {1, 6});  // transposed slice
    OpRun strided = RunOp(Op(c.name), {T(view)}, std::vector<int64_t>{1, 3});
    ASSERT_OK(strided.kernel_status);
    ExpectUnary(strided.results[0], view, c, c.name + " strided");
  }
}

TEST(UnaryOpsTest, Int64Variants) {
  TestTensor x = TestTensor::Int({5}, {-3, -1, 0, 2, 7});
  for (const UnaryCase& c : UnaryCases()) {
    OpRun run = RunOp(Op(c.name), {T(x)});
    if (!c.int_ok) {
      EXPECT_THAT(run.infer_status,
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           c.name + ": argument 0 has dtype int64, expected float32"));
      continue;
    }
    ASSERT_OK(run.infer_status);
    EXPECT_EQ(run.results[0].dtype, DType::kInt64);
    for (int64_t i = 0; i < 5; ++i) {
      EXPECT_EQ(Get(run.results[0], {i}), c.ref(Get(x.ref(), {i}))) << c.name;
    }
  }
}

TEST(UnaryOpsTest, InPlaceVariantsWriteArgumentZero) {
  for (const UnaryCase& c : UnaryCases()) {
    const OpSchema& schema = Op(c.name + "_");
    EXPECT_THAT(schema.written_args, ElementsAre(0));
    EXPECT_EQ(schema.ViewOf(0), 0);
    TestTensor x = TestTensor::Strided(DType::kFloat32, {2, 3}, {1, 2}, 1);
    TestTensor original = TestTensor::Strided(DType::kFloat32, {2, 3}, {1, 2}, 1);
    OpRun run = RunOp(schema, {T(x)});
    ASSERT_OK(run.kernel_status);
    EXPECT_EQ(run.results[0].data, x.ref().data);
    EXPECT_THAT(StridesOf(run.results[0]), ElementsAre(1, 2));
    ExpectUnary(x.ref(), original.ref(), c, c.name + "_");
  }
}

TEST(UnaryOpsTest, RejectsWrongArguments) {
  const Scalar one = Scalar::Int(1);
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2});
  EXPECT_THAT(InferOnly(Op("relu"), {S(one)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "relu: argument 0 must be a tensor"));
  EXPECT_THAT(InferOnly(Op("tanh"), {T(x), T(x)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tanh: expected 1 arguments")));
}

// ---- clamp --------------------------------------------------------------------------------

TEST(ClampTest, FloatKeepsNanAndAMinAboveTheMaxGivesTheMax) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TestTensor x = TestTensor::Float({2, 3}, {-3.0f, -0.5f, 0.0f, 0.25f, 2.0f, nan});
  const Scalar lo = Scalar::Int(-1);
  const Scalar hi = Scalar::Double(1.0);
  OpRun run = RunOp(Op("clamp"), {T(x), S(lo), S(hi)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  const std::vector<double> want = {-1, -0.5, 0, 0.25, 1};
  for (int64_t k = 0; k < 5; ++k) EXPECT_EQ(Get(run.results[0], {k / 3, k % 3}), want[k]) << k;
  EXPECT_TRUE(std::isnan(Get(run.results[0], {1, 2})));
  // min 2 > max 1: every element is 1 (NaN stays NaN).
  OpRun inverted = RunOp(Op("clamp"), {T(x), S(Scalar::Int(2)), S(Scalar::Int(1))});
  ASSERT_OK(inverted.kernel_status);
  for (int64_t k = 0; k < 5; ++k) EXPECT_EQ(Get(inverted.results[0], {k / 3, k % 3}), 1.0) << k;
}

TEST(ClampTest, StridedInputAndInt64) {
  TestTensor base = TestTensor::Filled(DType::kFloat32, {4, 6}, 3);
  TensorRef view = base.View({3, 4}, {1, 6});  // transposed slice
  OpRun run = RunOp(Op("clamp"), {T(view), S(Scalar::Double(-0.3)), S(Scalar::Double(0.4))});
  ASSERT_OK(run.kernel_status);
  ForEachIndex({3, 4}, [&](const Index& idx) {
    const double v = Get(view, idx);
    const double want = static_cast<float>(v < -0.3 ? -0.3 : (v > 0.4 ? 0.4 : v));
    EXPECT_EQ(Get(run.results[0], idx), want);
  });
  TestTensor i = TestTensor::Int({5}, {-7, -2, 0, 3, 9});
  OpRun ints = RunOp(Op("clamp"), {T(i), S(Scalar::Int(-2)), S(Scalar::Double(4.0))});
  ASSERT_OK(ints.infer_status);
  ASSERT_OK(ints.kernel_status);
  EXPECT_EQ(ints.results[0].dtype, DType::kInt64);
  const std::vector<int64_t> want = {-2, -2, 0, 3, 4};
  for (int64_t k = 0; k < 5; ++k) EXPECT_EQ(GetInt(ints.results[0], {k}), want[k]);
}

TEST(ClampTest, RejectsWrongArguments) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2});
  TestTensor i = TestTensor::Int({2}, {1, 2});
  const Scalar half = Scalar::Double(0.5);
  const Scalar one = Scalar::Int(1);
  EXPECT_THAT(InferOnly(Op("clamp"), {T(i), S(half), S(one)}),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("clamp: argument 1 (0.5) is not a whole number")));
  EXPECT_THAT(InferOnly(Op("clamp"), {T(x), T(x), S(one)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("clamp: argument 1")));
  EXPECT_THAT(InferOnly(Op("clamp"), {T(x), S(one)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("clamp: expected 3 arguments")));
}

// ---- leaky_relu, elu ----------------------------------------------------------------------

TEST(LeakyReluAndEluTest, AgainstTheirDefinitionsOnAStridedInput) {
  TestTensor base = TestTensor::Filled(DType::kFloat32, {4, 6}, 5);
  TensorRef x = base.View({3, 4}, {1, 6});  // transposed slice
  OpRun leaky = RunOp(Op("leaky_relu"), {T(x), S(Scalar::Double(0.1))});
  ASSERT_OK(leaky.infer_status);
  ASSERT_OK(leaky.kernel_status);
  // elu with alpha 1.5, scale 2, input_scale 0.5: x > 0 ? 2x : 3 (exp(x / 2) - 1).
  OpRun elu =
      RunOp(Op("elu"), {T(x), S(Scalar::Double(1.5)), S(Scalar::Int(2)), S(Scalar::Double(0.5))});
  ASSERT_OK(elu.infer_status);
  ASSERT_OK(elu.kernel_status);
  int negatives = 0;
  ForEachIndex({3, 4}, [&](const Index& idx) {
    const double v = Get(x, idx);
    negatives += v < 0;
    EXPECT_NEAR(Get(leaky.results[0], idx), v > 0 ? v : 0.1 * v, 1e-6);
    EXPECT_NEAR(Get(elu.results[0], idx), v > 0 ? 2 * v : 3 * (std::exp(v / 2) - 1), 1e-5);
  });
  EXPECT_GT(negatives, 0);
  TestTensor i = TestTensor::Int({2}, {1, 2});
  EXPECT_THAT(InferOnly(Op("leaky_relu"), {T(i), S(Scalar::Double(0.1))}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "leaky_relu: argument 0 has dtype int64, expected float32"));
  EXPECT_THAT(InferOnly(Op("elu"), {T(x), S(Scalar::Double(1)), S(Scalar::Double(1))}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("elu: expected 4 arguments")));
}

// ---- pow ----------------------------------------------------------------------------------

TEST(PowTest, FloatPowersAgainstDoublePrecision) {
  TestTensor base = TestTensor::Filled(DType::kFloat32, {4, 6}, 5);
  TensorRef view = base.View({3, 4}, {1, 6});  // transposed slice: the strided path
  for (double e : {2.0, 3.0, 0.5, -1.0, 1.7}) {
    SCOPED_TRACE(e);
    const Scalar exponent = Scalar::Double(e);
    TensorRef whole = base.ref();
    for (TensorRef* operand : {&whole, &view}) {
      const TensorRef& x = *operand;
      OpRun run = RunOp(Op("pow"), {T(*operand), S(exponent)});
      ASSERT_OK(run.infer_status);
      ASSERT_OK(run.kernel_status);
      ForEachIndex(SizesOf(x), [&](const Index& idx) {
        const double v = Get(x, idx);
        const double want = std::pow(v, e);
        const double got = Get(run.results[0], idx);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << v;  // a negative base to a fractional power
        } else {
          EXPECT_NEAR(got, want, 1e-6 * std::max(1.0, std::fabs(want))) << v;
        }
      });
    }
  }
}

TEST(PowTest, Int64ToIntPowersWrap) {
  TestTensor i = TestTensor::Int({5}, {-3, -1, 0, 2, int64_t{1} << 32});
  OpRun run = RunOp(Op("pow"), {T(i), S(Scalar::Int(3))});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(run.results[0].dtype, DType::kInt64);
  EXPECT_EQ(GetInt(run.results[0], {0}), -27);
  EXPECT_EQ(GetInt(run.results[0], {1}), -1);
  EXPECT_EQ(GetInt(run.results[0], {2}), 0);
  EXPECT_EQ(GetInt(run.results[0], {3}), 8);
  EXPECT_EQ(GetInt(run.results[0], {4}), 0);  // 2^96 mod 2^64
  OpRun zero = RunOp(Op("pow"), {T(i), S(Scalar::Int(0))});
  ASSERT_OK(zero.kernel_status);
  for (int64_t k = 0; k < 5; ++k) EXPECT_EQ(GetInt(zero.results[0], {k}), 1);  // 0^0 is 1
}

TEST(PowTest, RejectsWhatATenWouldNotGiveAnInt64) {
  TestTensor i = TestTensor::Int({2}, {1, 2});
  EXPECT_THAT(InferOnly(Op("pow"), {T(i), S(Scalar::Int(-1))}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("integers to negative integer powers are not allowed")));
  EXPECT_THAT(InferOnly(Op("pow"), {T(i), S(Scalar::Double(0.5))}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("float32 result in ATen")));
  EXPECT_THAT(InferOnly(Op("pow"), {T(i), S(Scalar::IntList({2}))}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be a number")));
}

// ---- fill_, copy_ -------------------------------------------------------------------------

TEST(FillTest, FillsStridedTensorInPlace) {
  TestTensor x = TestTensor::Strided(DType::kFloat32, {2, 3}, {4, 1}, 0);
  const Scalar v = Scalar::Double(1.5);
  OpRun run = RunOp(Op("fill_"), {T(x), S(v)});
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(run.results[0].data, x.ref().data);
  ForEachIndex({2, 3}, [&](const Index& idx) { EXPECT_EQ(Get(x.ref(), idx), 1.5); });
  EXPECT_TRUE(x.Untouched(3));  // the gap after row 0

  TestTensor i = TestTensor::Filled(DType::kInt64, {4});
  OpRun run2 = RunOp(Op("fill_"), {T(i), S(Scalar::Int(-7))});
  ASSERT_OK(run2.kernel_status);
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(GetInt(i.ref(), {k}), -7);
}

TEST(CopyTest, BroadcastsSourceIntoStridedDestination) {
  TestTensor dst = TestTensor::Strided(DType::kFloat32, {3, 4}, {1, 3}, 0);  // column-major
  TestTensor src = TestTensor::Filled(DType::kFloat32, {1, 4}, 9);
  OpRun run = RunOp(Op("copy_"), {T(dst), T(src)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(run.results[0].data, dst.ref().data);
  ForEachIndex({3, 4}, [&](const Index& idx) {
    EXPECT_EQ(Get(dst.ref(), idx), GetBroadcast(src.ref(), idx));
  });
}

TEST(CopyTest, CopiesInt64FromTransposedView) {
  TestTensor dst = TestTensor::Filled(DType::kInt64, {3, 2}, 0);
  TestTensor base = TestTensor::Filled(DType::kInt64, {2, 3}, 4);
  TensorRef src = base.View({3, 2}, {1, 3});
  OpRun run = RunOp(Op("copy_"), {T(dst), T(src)});
  ASSERT_OK(run.kernel_status);
  ForEachIndex({3, 2}, [&](const Index& idx) { EXPECT_EQ(Get(dst.ref(), idx), Get(src, idx)); });
}

TEST(CopyTest, RejectsDtypeAndShapeMismatch) {
  TestTensor dst = TestTensor::Filled(DType::kFloat32, {2, 2});
  TestTensor i = TestTensor::Filled(DType::kInt64, {2, 2});
  TestTensor big = TestTensor::Filled(DType::kFloat32, {3, 2});
  EXPECT_THAT(InferOnly(Op("copy_"), {T(dst), T(i)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("copy_: argument 1 has dtype")));
  EXPECT_THAT(InferOnly(Op("copy_"), {T(dst), T(big)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "copy_: argument 1 has shape [3, 2], which does not broadcast to [2, 2]"));
}

}  // namespace
}  // namespace ferry
