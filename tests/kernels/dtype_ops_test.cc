// eq, where and to_dtype against naive loops, and the dtypes beyond float32 and int64 through the
// ops that take every dtype (views and copies) and the refusal of the others.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

const OpRegistry& Registry() {
  static const OpRegistry* registry = new OpRegistry(OpRegistry::WithBuiltIns());
  return *registry;
}

const OpSchema& Op(const std::string& name) {
  const OpSchema* s = Registry().Find(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

TEST(DTypeTest, SizesAndNamesOfTheNewDTypes) {
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(DTypeSize(DType::kInt32), 4u);
  EXPECT_STREQ(DTypeName(DType::kBool), "bool");
  EXPECT_STREQ(DTypeName(DType::kInt32), "int32");
  // The numbers are stored in program files and must not move.
  EXPECT_EQ(static_cast<int>(DType::kFloat32), 0);
  EXPECT_EQ(static_cast<int>(DType::kInt64), 1);
  EXPECT_EQ(static_cast<int>(DType::kBool), 2);
  EXPECT_EQ(static_cast<int>(DType::kInt32), 3);
  EXPECT_EQ(static_cast<int>(DType::kInt8), 4);
  EXPECT_EQ(static_cast<int>(DType::kUInt8), 5);
  EXPECT_EQ(static_cast<int>(DType::kInt16), 6);
  EXPECT_EQ(static_cast<int>(DType::kUInt16), 7);
  EXPECT_EQ(static_cast<int>(DType::kFloat16), 8);
  EXPECT_EQ(static_cast<int>(DType::kBFloat16), 9);
  EXPECT_EQ(static_cast<int>(DType::kFloat64), 10);
  EXPECT_FALSE(IsKnownDType(static_cast<DType>(11)));
}

const std::vector<DType> kEveryDType = {DType::kFloat32,  DType::kInt64,  DType::kBool,
                                        DType::kInt32,    DType::kInt8,   DType::kUInt8,
                                        DType::kInt16,    DType::kUInt16, DType::kFloat16,
                                        DType::kBFloat16, DType::kFloat64};

// ---- eq -------------------------------------------------------------------------------------

TEST(EqTest, EveryDTypeAgainstANaiveLoop) {
  struct Case {
    TestTensor x;
    Scalar other;
  };
  std::vector<Case> cases;
  cases.push_back({TestTensor::Float({2, 3}, {1.5f, -2.0f, 1.5f, 0.0f, 3.0f, 1.5f}),
                   Scalar::Double(1.5)});
  cases.push_back({TestTensor::Int({5}, {3, -3, 3, 0, 7}), Scalar::Int(3)});
  cases.push_back({TestTensor::Int32({2, 2}, {0, 4, 4, -1}), Scalar::Int(4)});
  cases.push_back({TestTensor::Bool({3}, {true, false, true}), Scalar::Bool(true)});
  // Filled values: integers -11..11 (unsigned 0..22), floats (k - 11) / 4 + 1/8.
  for (DType dtype : {DType::kInt8, DType::kInt16, DType::kUInt8, DType::kUInt16}) {
    TestTensor x = TestTensor::Filled(dtype, {23});
    cases.push_back(
        {std::move(x), Scalar::Int(dtype == DType::kUInt8 || dtype == DType::kUInt16 ? 20 : -3)});
  }
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    cases.push_back({TestTensor::Filled(dtype, {23}), Scalar::Double(-0.375)});
  }
  for (Case& c : cases) {
    SCOPED_TRACE(DTypeName(c.x.ref().dtype));
    OpRun run = RunOp(Op("eq"), {T(c.x), S(c.other)});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    ASSERT_EQ(run.results[0].dtype, DType::kBool);
    ASSERT_EQ(SizesOf(run.results[0]), SizesOf(c.x.ref()));
    int matches = 0;
    ForEachIndex(SizesOf(c.x.ref()), [&](const Index& idx) {
      const bool want = Get(c.x.ref(), idx) == c.other.AsDouble();
      matches += want;
      EXPECT_EQ(Get(run.results[0], idx), want ? 1.0 : 0.0);
    });
    EXPECT_GT(matches, 0);
  }
}

TEST(EqTest, StridedInputAndAFractionalScalarOnIntegers) {
  TestTensor base = TestTensor::Int({3, 2}, {1, 2, 2, 1, 2, 2});
  TensorRef x = base.View({2, 3}, {1, 2});  // the transpose
  const Scalar two = Scalar::Int(2);
  OpRun run = RunOp(Op("eq"), {T(x), S(two)});
  ASSERT_OK(run.kernel_status);
  ForEachIndex({2, 3}, [&](const Index& idx) {
    EXPECT_EQ(Get(run.results[0], idx), Get(x, idx) == 2 ? 1.0 : 0.0);
  });
  // 2.5 equals no integer.
  const Scalar half = Scalar::Double(2.5);
  OpRun none = RunOp(Op("eq"), {T(x), S(half)});
  ASSERT_OK(none.kernel_status);
  ForEachIndex({2, 3}, [&](const Index& idx) { EXPECT_EQ(Get(none.results[0], idx), 0.0); });
}

TEST(EqTest, InferRejections) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2});
  const Scalar list = Scalar::IntList({1});
  EXPECT_THAT(InferOnly(Op("eq"), {T(x), S(list)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("eq: argument 1 must be a number")));
  TestTensor i = TestTensor::Int({2}, {1, 2});
  EXPECT_THAT(InferOnly(Op("eq"), {T(x), T(i)}),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("eq: argument 1 has dtype int64 and argument 0 float32")));
  TestTensor three = TestTensor::Filled(DType::kFloat32, {3});
  EXPECT_THAT(
      InferOnly(Op("lt"), {T(x), T(three)}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("lt: argument 1 has shape [3], which does not broadcast with [2]")));
}

// Every comparison, against a tensor (broadcast) and a number, over float32, int64, int8 and
// float16, checked with the C++ comparison of the widened values.
TEST(CompareTest, EveryComparisonTensorAndNumberOverSeveralDTypes) {
  struct Cmp {
    const char* name;
    bool (*ref)(double, double);
  };
  const Cmp cmps[] = {{"eq", [](double a, double b) { return a == b; }},
                      {"ne", [](double a, double b) { return a != b; }},
                      {"lt", [](double a, double b) { return a < b; }},
                      {"le", [](double a, double b) { return a <= b; }},
                      {"gt", [](double a, double b) { return a > b; }},
                      {"ge", [](double a, double b) { return a >= b; }}};
  for (DType dtype : {DType::kFloat32, DType::kInt64, DType::kInt8, DType::kFloat16}) {
    TestTensor a = TestTensor::Filled(dtype, {2, 3}, 1);
    TestTensor b = TestTensor::Filled(dtype, {3}, 2);
    // A number equal to one of a's elements, so that eq and ne see both answers.
    const double pick = Get(a.ref(), {1, 2});
    const Scalar n =
        IsFloatDType(dtype) ? Scalar::Double(pick) : Scalar::Int(static_cast<int64_t>(pick));
    for (const Cmp& c : cmps) {
      SCOPED_TRACE(absl::StrCat(c.name, " ", DTypeName(dtype)));
      OpRun tensors = RunOp(Op(c.name), {T(a), T(b)});
      ASSERT_OK(tensors.infer_status);
      ASSERT_OK(tensors.kernel_status);
      ASSERT_EQ(tensors.results[0].dtype, DType::kBool);
      OpRun number = RunOp(Op(c.name), {T(a), S(n)});
      ASSERT_OK(number.kernel_status);
      ForEachIndex({2, 3}, [&](const Index& idx) {
        EXPECT_EQ(Get(tensors.results[0], idx), c.ref(Get(a.ref(), idx), Get(b.ref(), {idx[1]})));
        EXPECT_EQ(Get(number.results[0], idx), c.ref(Get(a.ref(), idx), pick));
      });
    }
  }
  // A fractional number against integers compares as a double: 2 < 2.5, 3 > 2.5.
  TestTensor i = TestTensor::Int({2}, {2, 3});
  OpRun lt = RunOp(Op("lt"), {T(i), S(Scalar::Double(2.5))});
  ASSERT_OK(lt.kernel_status);
  EXPECT_EQ(Get(lt.results[0], {0}), 1.0);
  EXPECT_EQ(Get(lt.results[0], {1}), 0.0);
}

// ---- where ----------------------------------------------------------------------------------

TEST(WhereTest, BroadcastsConditionAndBothSides) {
  TestTensor cond = TestTensor::Bool({2, 1}, {true, false});
  TestTensor a = TestTensor::Filled(DType::kFloat32, {2, 3}, 1);
  TestTensor b = TestTensor::Float({3}, {100.0f, 200.0f, 300.0f});
  OpRun run = RunOp(Op("where"), {T(cond), T(a), T(b)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  ASSERT_EQ(SizesOf(run.results[0]), (std::vector<int64_t>{2, 3}));
  ForEachIndex({2, 3}, [&](const Index& idx) {
    const double want = GetBroadcast(cond.ref(), idx) != 0 ? GetBroadcast(a.ref(), idx)
                                                           : GetBroadcast(b.ref(), idx);
    EXPECT_EQ(Get(run.results[0], idx), want);
  });
}

TEST(WhereTest, EveryDTypeOfTheSides) {
  TestTensor cond = TestTensor::Bool({4}, {false, true, true, false});
  for (DType dtype : kEveryDType) {
    SCOPED_TRACE(DTypeName(dtype));
    TestTensor a = TestTensor::Filled(dtype, {4}, 1);
    TestTensor b = TestTensor::Filled(dtype, {4}, 2);
    OpRun run = RunOp(Op("where"), {T(cond), T(a), T(b)});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    EXPECT_EQ(run.results[0].dtype, dtype);
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_EQ(Get(run.results[0], {i}), Get(cond.ref(), {i}) != 0 ? Get(a.ref(), {i})
                                                                    : Get(b.ref(), {i}));
    }
  }
}

TEST(WhereTest, InferRejections) {
  TestTensor f = TestTensor::Filled(DType::kFloat32, {2});
  TestTensor i = TestTensor::Filled(DType::kInt64, {2});
  TestTensor c = TestTensor::Bool({3}, {true, false, true});
  TestTensor c2 = TestTensor::Bool({2}, {true, false});
  EXPECT_THAT(InferOnly(Op("where"), {T(f), T(f), T(f)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "where: argument 0 has dtype float32, expected bool"));
  EXPECT_THAT(InferOnly(Op("where"), {T(c2), T(f), T(i)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "where: argument 2 has dtype int64, but argument 1 has dtype float32"));
  EXPECT_THAT(InferOnly(Op("where"), {T(c), T(f), T(f)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("where: argument 0 has shape [3], which does not broadcast")));
}

// ---- to_dtype -------------------------------------------------------------------------------

// The expected conversion of the test's values (small: exact in every float dtype), written out
// per pair: a float to an integer truncates and clamps to the integer's range (Ferry's rule where
// C++ and PyTorch leave it undefined); an integer to a narrower or unsigned one wraps modulo
// 2^bits.
double Converted(double v, DType from, DType to) {
  auto integer = [&](double lo, double hi) {
    if (IsFloatDType(from)) return std::min(std::max(std::trunc(v), lo), hi);
    const double span = hi - lo + 1;
    double w = std::fmod(v - lo, span);
    if (w < 0) w += span;
    return w + lo;
  };
  switch (to) {
    case DType::kBool:
      return v != 0 || std::isnan(v) ? 1.0 : 0.0;
    case DType::kFloat32:
      return static_cast<float>(v);
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat64:
      return v;
    case DType::kUInt8:
      return integer(0, 255);
    case DType::kUInt16:
      return integer(0, 65535);
    case DType::kInt8:
      return integer(-128, 127);
    case DType::kInt16:
      return integer(-32768, 32767);
    case DType::kInt32:
    case DType::kInt64:
      return std::trunc(v);
  }
  return 0;
}

TEST(ToDTypeTest, EveryPairOfDTypes) {
  for (DType from : kEveryDType) {
    TestTensor x = from == DType::kFloat32
                       ? TestTensor::Float({2, 3}, {-2.75f, -0.5f, 0.0f, 0.25f, 1.0f, 7.5f})
                       : TestTensor::Filled(from, {2, 3}, 3);
    for (DType to : kEveryDType) {
      SCOPED_TRACE(absl::StrCat(DTypeName(from), " to ", DTypeName(to)));
      const Scalar code = Scalar::Int(static_cast<int64_t>(to));
      OpRun run = RunOp(Op("to_dtype"), {T(x), S(code)});
      ASSERT_OK(run.infer_status);
      ASSERT_OK(run.kernel_status);
      ASSERT_EQ(run.results[0].dtype, to);
      ForEachIndex({2, 3}, [&](const Index& idx) {
        EXPECT_EQ(Get(run.results[0], idx), Converted(Get(x.ref(), idx), from, to))
            << Get(x.ref(), idx);
      });
    }
  }
}

TEST(ToDTypeTest, ToSixteenBitFloatsRoundsToNearestEven) {
  // 1 + 2^-11 is halfway between two float16s (to 1), 1 + 2^-8 between two bfloat16s (to 1);
  // 70000 is past float16's range (infinity).
  TestTensor x = TestTensor::Float({3}, {1.0f + 1.0f / 2048, 1.0f + 1.0f / 256, 70000.0f});
  const Scalar to_half = Scalar::Int(static_cast<int64_t>(DType::kFloat16));
  const Scalar to_bf16 = Scalar::Int(static_cast<int64_t>(DType::kBFloat16));
  OpRun half = RunOp(Op("to_dtype"), {T(x), S(to_half)});
  OpRun bf16 = RunOp(Op("to_dtype"), {T(x), S(to_bf16)});
  ASSERT_OK(half.kernel_status);
  ASSERT_OK(bf16.kernel_status);
  EXPECT_EQ(Get(half.results[0], {0}), 1.0);
  EXPECT_EQ(Get(half.results[0], {1}), 1.00390625);  // a float16 exactly
  EXPECT_TRUE(std::isinf(Get(half.results[0], {2})));
  EXPECT_EQ(Get(bf16.results[0], {0}), 1.0);
  EXPECT_EQ(Get(bf16.results[0], {1}), 1.0);
  EXPECT_EQ(Get(bf16.results[0], {2}), 70144.0);  // 70000 to bfloat16's 8 bits: 137 * 512
}

TEST(ToDTypeTest, FloatsOutOfRangeClampAndNaNIsZero) {
  const float inf = std::numeric_limits<float>::infinity();
  TestTensor x = TestTensor::Float({4}, {3e9f, -3e9f, std::nanf(""), inf});
  const Scalar to_i32 = Scalar::Int(static_cast<int64_t>(DType::kInt32));
  OpRun run = RunOp(Op("to_dtype"), {T(x), S(to_i32)});
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(Get(run.results[0], {0}), 2147483647.0);
  EXPECT_EQ(Get(run.results[0], {1}), -2147483648.0);
  EXPECT_EQ(Get(run.results[0], {2}), 0.0);
  EXPECT_EQ(Get(run.results[0], {3}), 2147483647.0);
  const Scalar to_bool = Scalar::Int(static_cast<int64_t>(DType::kBool));
  OpRun b = RunOp(Op("to_dtype"), {T(x), S(to_bool)});
  ASSERT_OK(b.kernel_status);
  EXPECT_EQ(Get(b.results[0], {2}), 1.0);  // NaN is nonzero
}

TEST(ToDTypeTest, Int64ToInt32Wraps) {
  TestTensor x = TestTensor::Int({2}, {(int64_t{1} << 32) + 5, -(int64_t{1} << 31) - 1});
  const Scalar code = Scalar::Int(static_cast<int64_t>(DType::kInt32));
  OpRun run = RunOp(Op("to_dtype"), {T(x), S(code)});
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(Get(run.results[0], {0}), 5.0);
  EXPECT_EQ(Get(run.results[0], {1}), 2147483647.0);
}

TEST(ToDTypeTest, UnknownDTypeIsRefused) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2});
  const Scalar bad = Scalar::Int(11);
  EXPECT_THAT(
      InferOnly(Op("to_dtype"), {T(x), S(bad)}),
      StatusIs(absl::StatusCode::kInvalidArgument, "to_dtype: argument 1 (11) names no dtype"));
}

// ---- bool and int32 through the other ops ---------------------------------------------------

TEST(NewDTypesTest, CopiesAndViewsCarryThem) {
  for (DType dtype : kEveryDType) {
    SCOPED_TRACE(DTypeName(dtype));
    TestTensor x = TestTensor::Filled(dtype, {2, 3}, 4);
    // clone of a transposed view.
    TensorRef xt = x.View({3, 2}, {1, 3});
    OpRun clone = RunOp(Op("clone"), {T(xt)});
    ASSERT_OK(clone.infer_status);
    ASSERT_OK(clone.kernel_status);
    ForEachIndex({3, 2}, [&](const Index& idx) {
      EXPECT_EQ(Get(clone.results[0], idx), Get(xt, idx));
    });
    // reshape of the view.
    const Scalar six = Scalar::IntList({6});
    OpRun reshape = RunOp(Op("reshape"), {T(xt), S(six)});
    ASSERT_OK(reshape.kernel_status);
    int64_t k = 0;
    ForEachIndex({3, 2}, [&](const Index& idx) {
      EXPECT_EQ(Get(reshape.results[0], {k++}), Get(xt, idx));
    });
    // cat along dim 1.
    TestTensor y = TestTensor::Filled(dtype, {2, 1}, 5);
    const Scalar dim1 = Scalar::Int(1);
    OpRun cat = RunOp(Op("cat"), {S(dim1), T(x), T(y)});
    ASSERT_OK(cat.kernel_status);
    ForEachIndex({2, 4}, [&](const Index& idx) {
      const double want = idx[1] < 3 ? Get(x.ref(), idx) : Get(y.ref(), {idx[0], 0});
      EXPECT_EQ(Get(cat.results[0], idx), want);
    });
    // copy_ broadcasting a row.
    TestTensor dst = TestTensor::Filled(dtype, {2, 3}, 6);
    TestTensor row = TestTensor::Filled(dtype, {3}, 7);
    OpRun copy = RunOp(Op("copy_"), {T(dst), T(row)});
    ASSERT_OK(copy.kernel_status);
    ForEachIndex({2, 3}, [&](const Index& idx) {
      EXPECT_EQ(Get(dst.ref(), idx), Get(row.ref(), {idx[1]}));
    });
    // index_put_ of row 1.
    TestTensor self = TestTensor::Filled(dtype, {3, 2}, 8);
    const std::vector<double> before = {Get(self.ref(), {0, 0}), Get(self.ref(), {0, 1})};
    TestTensor index = TestTensor::Int({1}, {1});
    TestTensor values = TestTensor::Filled(dtype, {1, 2}, 9);
    OpRun put = RunOp(Op("index_put_"), {T(self), T(index), T(values)});
    ASSERT_OK(put.kernel_status);
    EXPECT_EQ(Get(self.ref(), {1, 0}), Get(values.ref(), {0, 0}));
    EXPECT_EQ(Get(self.ref(), {1, 1}), Get(values.ref(), {0, 1}));
    EXPECT_EQ(Get(self.ref(), {0, 0}), before[0]);
    EXPECT_EQ(Get(self.ref(), {0, 1}), before[1]);
    // Views keep the dtype.
    const Scalar sizes = Scalar::IntList({2, 5});
    std::vector<InferredResult> inferred;
    ASSERT_OK(InferOnly(Op("expand"), {T(y), S(sizes)}, &inferred));
    EXPECT_EQ(inferred[0].layout.dtype, dtype);
  }
}

TEST(NewDTypesTest, ArithmeticRefusesThemNamingTheOp) {
  TestTensor b = TestTensor::Bool({2}, {true, false});
  TestTensor i = TestTensor::Int32({2}, {1, 2});
  EXPECT_THAT(InferOnly(Op("add"), {T(b), T(b)}),
              StatusIs(absl::StatusCode::kUnimplemented,
                       "add: argument 0 has dtype bool, which add does not support (float32 and "
                       "int64 only)"));
  EXPECT_THAT(InferOnly(Op("relu"), {T(i)}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("relu: argument 0 has dtype int32")));
  for (DType dtype : {DType::kInt8, DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kFloat16,
                      DType::kBFloat16, DType::kFloat64}) {
    TestTensor t = TestTensor::Filled(dtype, {2, 2});
    EXPECT_THAT(InferOnly(Op("mul"), {T(t), T(t)}),
                StatusIs(absl::StatusCode::kUnimplemented,
                         absl::StrCat("mul: argument 0 has dtype ", DTypeName(dtype),
                                      ", which mul does not support (float32 and int64 only)")));
    EXPECT_THAT(InferOnly(Op("matmul"), {T(t), T(t)}),
                StatusIs(absl::StatusCode::kUnimplemented,
                         HasSubstr(absl::StrCat("argument 0 has dtype ", DTypeName(dtype)))));
  }
  const Scalar d = Scalar::Int(0);
  EXPECT_THAT(InferOnly(Op("softmax"), {T(i), S(d)}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("softmax: argument 0 has dtype int32")));
  const Scalar one = Scalar::Int(1);
  EXPECT_THAT(InferOnly(Op("fill_"), {T(b), S(one)}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("fill_: argument 0 has dtype bool")));
  // An index tensor must still be int64.
  TestTensor self = TestTensor::Filled(DType::kFloat32, {3});
  TestTensor v = TestTensor::Filled(DType::kFloat32, {1});
  TestTensor idx32 = TestTensor::Int32({1}, {0});
  EXPECT_THAT(InferOnly(Op("index_put_"), {T(self), T(idx32), T(v)}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("index_put_: argument 1 has dtype int32")));
}

// ---- quantize, dequantize --------------------------------------------------------------------

// ExecuTorch's quantize_per_tensor, written from its definition:
// clamp(zero_point + nearbyint(float(1 / float(scale)) * x), qmin, qmax), NaN to qmin.
double QuantizeRef(double x, double scale, int64_t zp, int64_t qmin, int64_t qmax) {
  const float inv = 1.0f / static_cast<float>(scale);
  const float r = std::nearbyint(inv * static_cast<float>(x));
  if (std::isnan(r)) return static_cast<double>(qmin);
  return std::clamp(static_cast<double>(zp) + r, static_cast<double>(qmin),
                    static_cast<double>(qmax));
}

TEST(QuantizeTest, HandCheckedInt8RoundingTiesToEvenAndSaturation) {
  // scale 0.5 (x * 2), zero point 3: 0 -> 3; 1 -> 5; -1.26 -> -2.52 -> -3 -> 0; 100 -> 203 ->
  // 127; -100 -> -197 -> -128; 0.25 -> 0.5 -> 0 (to even) -> 3; 0.75 -> 1.5 -> 2 -> 5; NaN -> -128.
  TestTensor x = TestTensor::Float({8}, {0.0f, 1.0f, -1.26f, 100.0f, -100.0f, 0.25f, 0.75f,
                                         std::numeric_limits<float>::quiet_NaN()});
  const Scalar scale = Scalar::Double(0.5), zp = Scalar::Int(3), qmin = Scalar::Int(-128),
               qmax = Scalar::Int(127), int8 = Scalar::Int(static_cast<int64_t>(DType::kInt8));
  OpRun run = RunOp(Op("quantize"), {T(x), S(scale), S(zp), S(qmin), S(qmax), S(int8)});
  ASSERT_OK(run.infer_status);
  ASSERT_OK(run.kernel_status);
  ASSERT_EQ(run.results[0].dtype, DType::kInt8);
  const std::vector<double> want = {3, 5, 0, 127, -128, 3, 5, -128};
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(Get(run.results[0], {i}), want[i]) << i;
}

TEST(QuantizeTest, EveryQuantizedDTypeAgainstTheDefinitionAndTensorParameters) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {3, 5}, 4);
  struct Case {
    DType dtype;
    int64_t qmin, qmax, zp;
    double scale;
  };
  for (const Case& c :
       {Case{DType::kInt8, -128, 127, -5, 0.03}, Case{DType::kUInt8, 0, 255, 128, 0.1},
        Case{DType::kInt16, -1000, 1000, 7, 0.001}, Case{DType::kUInt16, 0, 65535, 300, 0.01},
        Case{DType::kInt32, -100000, 100000, 0, 0.0001}}) {
    SCOPED_TRACE(DTypeName(c.dtype));
    const Scalar scale = Scalar::Double(c.scale), zp = Scalar::Int(c.zp),
                 qmin = Scalar::Int(c.qmin), qmax = Scalar::Int(c.qmax),
                 code = Scalar::Int(static_cast<int64_t>(c.dtype));
    OpRun q = RunOp(Op("quantize"), {T(x), S(scale), S(zp), S(qmin), S(qmax), S(code)});
    ASSERT_OK(q.infer_status);
    ASSERT_OK(q.kernel_status);
    ASSERT_EQ(q.results[0].dtype, c.dtype);
    ForEachIndex(SizesOf(x.ref()), [&](const Index& i) {
      EXPECT_EQ(Get(q.results[0], i), QuantizeRef(Get(x.ref(), i), c.scale, c.zp, c.qmin, c.qmax));
    });
    // And back: (q - zp) * float(scale).
    OpRun d = RunOp(Op("dequantize"), {T(q.results[0]), S(scale), S(zp), S(qmin), S(qmax)});
    ASSERT_OK(d.infer_status);
    ASSERT_OK(d.kernel_status);
    ForEachIndex(SizesOf(x.ref()), [&](const Index& i) {
      const double want =
          static_cast<float>(Get(q.results[0], i) - c.zp) * static_cast<float>(c.scale);
      EXPECT_FLOAT_EQ(Get(d.results[0], i), want);
    });
    // The .Tensor form: scale float64 [1], zero point int64 [1].
    TestTensor st = TestTensor::Empty(DType::kFloat64, {1});
    *static_cast<double*>(st.ref().data) = c.scale;
    TestTensor zt = TestTensor::Int({1}, {c.zp});
    OpRun qt = RunOp(Op("quantize"), {T(x), T(st), T(zt), S(qmin), S(qmax), S(code)});
    ASSERT_OK(qt.kernel_status);
    ForEachIndex(SizesOf(x.ref()),
                 [&](const Index& i) { EXPECT_EQ(Get(qt.results[0], i), Get(q.results[0], i)); });
  }
}

TEST(QuantizeTest, HandCheckedDequantizeAndBadParametersRefused) {
  TestTensor q = TestTensor::Empty(DType::kInt8, {4});
  const int8_t v[] = {-128, 0, 3, 127};
  std::copy(v, v + 4, static_cast<int8_t*>(q.ref().data));
  const Scalar scale = Scalar::Double(0.5), zp = Scalar::Int(3), qmin = Scalar::Int(-128),
               qmax = Scalar::Int(127);
  OpRun d = RunOp(Op("dequantize"), {T(q), S(scale), S(zp), S(qmin), S(qmax)});
  ASSERT_OK(d.kernel_status);
  EXPECT_EQ(Get(d.results[0], {0}), -65.5);
  EXPECT_EQ(Get(d.results[0], {1}), -1.5);
  EXPECT_EQ(Get(d.results[0], {2}), 0.0);
  EXPECT_EQ(Get(d.results[0], {3}), 62.0);

  TestTensor x = TestTensor::Filled(DType::kFloat32, {4});
  const Scalar zero = Scalar::Double(0.0), int8 = Scalar::Int(static_cast<int64_t>(DType::kInt8)),
               f32 = Scalar::Int(static_cast<int64_t>(DType::kFloat32)), wide = Scalar::Int(-200);
  EXPECT_THAT(InferOnly(Op("quantize"), {T(x), S(zero), S(zp), S(qmin), S(qmax), S(int8)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 1 (scale) is 0, not positive and finite")));
  EXPECT_THAT(
      InferOnly(Op("quantize"), {T(x), S(scale), S(zp), S(qmin), S(qmax), S(f32)}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names no dtype quantize writes")));
  EXPECT_THAT(InferOnly(Op("quantize"), {T(x), S(scale), S(zp), S(wide), S(qmax), S(int8)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("quant_min and quant_max are [-200, 127], not inside int8's "
                                 "[-128, 127]")));
  EXPECT_THAT(InferOnly(Op("dequantize"), {T(x), S(scale), S(zp), S(qmin), S(qmax)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 0 has dtype float32, expected int8")));
  // A scale tensor holding 0 is known only when the call runs.
  TestTensor st = TestTensor::Float({1}, {0.0f});
  OpRun bad = RunOp(Op("dequantize"), {T(q), T(st), S(zp), S(qmin), S(qmax)});
  ASSERT_OK(bad.infer_status);
  EXPECT_THAT(bad.kernel_status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the scale tensor holds 0")));
  TestTensor two = TestTensor::Float({2}, {0.5f, 0.5f});
  EXPECT_THAT(InferOnly(Op("dequantize"), {T(q), T(two), S(zp), S(qmin), S(qmax)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 1 (scale) is a float32 tensor of shape [2]")));
}

}  // namespace
}  // namespace ferry
