// Ferry's tensor vocabulary (base/tensor.h): dtypes, dense layouts in a dim order, byte sizes,
// TensorRefs and scalars, against values worked out by hand.
#include "ferry/base/tensor.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

TEST(DType, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(DTypeSize(DType::kInt32), 4u);
  EXPECT_STREQ(DTypeName(DType::kInt32), "int32");
  EXPECT_TRUE(IsKnownDType(DType::kInt32));
  EXPECT_FALSE(IsKnownDType(static_cast<DType>(200)));
  EXPECT_FALSE(IsKnownDType(static_cast<DType>(kNumDTypes)));
  const struct {
    DType dtype;
    size_t size;
    const char* name;
    bool is_float;
  } kAll[] = {{DType::kInt8, 1, "int8", false},      {DType::kUInt8, 1, "uint8", false},
              {DType::kInt16, 2, "int16", false},    {DType::kUInt16, 2, "uint16", false},
              {DType::kFloat16, 2, "float16", true}, {DType::kBFloat16, 2, "bfloat16", true},
              {DType::kFloat64, 8, "float64", true}, {DType::kFloat32, 4, "float32", true}};
  for (const auto& d : kAll) {
    EXPECT_EQ(DTypeSize(d.dtype), d.size) << d.name;
    EXPECT_STREQ(DTypeName(d.dtype), d.name);
    EXPECT_EQ(IsFloatDType(d.dtype), d.is_float) << d.name;
  }
}

TEST(DType, ElementAsDoubleReadsEachEncoding) {
  const int8_t i8 = -128;
  const uint8_t u8 = 255;
  const int16_t i16 = -32768;
  const uint16_t u16 = 65535;
  const uint16_t half = 0xC100;  // -2.5 in float16
  const uint16_t bf16 = 0x4049;  // 3.140625 in bfloat16
  const double f64 = 1e300;
  const uint8_t flag = 7;  // any nonzero byte is true
  EXPECT_EQ(ElementAsDouble(DType::kInt8, &i8), -128.0);
  EXPECT_EQ(ElementAsDouble(DType::kUInt8, &u8), 255.0);
  EXPECT_EQ(ElementAsDouble(DType::kInt16, &i16), -32768.0);
  EXPECT_EQ(ElementAsDouble(DType::kUInt16, &u16), 65535.0);
  EXPECT_EQ(ElementAsDouble(DType::kFloat16, &half), -2.5);
  EXPECT_EQ(ElementAsDouble(DType::kBFloat16, &bf16), 3.140625);
  EXPECT_EQ(ElementAsDouble(DType::kFloat64, &f64), 1e300);
  EXPECT_EQ(ElementAsDouble(DType::kBool, &flag), 1.0);
  // Unaligned: a float32 at an odd address.
  alignas(8) unsigned char bytes[8] = {};
  const float f = -0.75f;
  std::memcpy(bytes + 1, &f, sizeof(f));
  EXPECT_EQ(ElementAsDouble(DType::kFloat32, bytes + 1), -0.75);
}

TEST(TensorMeta, DenseStridesFollowTheDimOrder) {
  TensorMeta row_major{DType::kFloat32, {2, 3, 4}, {}};
  EXPECT_THAT(row_major.DenseStrides(), ElementsAre(12, 4, 1));
  EXPECT_THAT(row_major.ResolvedDimOrder(), ElementsAre(0, 1, 2));
  // Channels-last [N, C, H, W] = [1, 3, 2, 2]: C varies fastest, then W, then H.
  TensorMeta channels_last{DType::kFloat32, {1, 3, 2, 2}, {0, 2, 3, 1}};
  EXPECT_THAT(channels_last.DenseStrides(), ElementsAre(12, 1, 6, 3));
  // A stored transpose of [2, 3]: column-major.
  TensorMeta transposed{DType::kFloat32, {2, 3}, {1, 0}};
  EXPECT_THAT(transposed.DenseStrides(), ElementsAre(1, 2));
  EXPECT_EQ(transposed.ToString(), "float32[2, 3] dim_order (1, 0)");
  EXPECT_EQ(row_major.ToString(), "float32[2, 3, 4]");
}

TEST(TensorMeta, ByteSize) {
  EXPECT_EQ((TensorMeta{DType::kInt64, {5, 2}, {}}).ByteSize(), 80u);
  EXPECT_EQ((TensorMeta{DType::kFloat32, {}, {}}).ByteSize(), 4u);  // a 0-d tensor
  EXPECT_EQ((TensorMeta{DType::kFloat32, {3, 0}, {}}).ByteSize(), 0u);
  EXPECT_EQ((TensorMeta{DType::kFloat32, {int64_t{1} << 62, 8}, {}}).ByteSize(), std::nullopt);
}

TEST(TensorRef, ContiguousAndOffsets) {
  float data[6] = {};
  TensorRef t = TensorRef::Contiguous(DType::kFloat32, {2, 3}, data);
  EXPECT_EQ(t.rank, 2);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.strides[0], 3);
  EXPECT_EQ(t.strides[1], 1);
  EXPECT_TRUE(t.IsContiguous());
  const int64_t index[2] = {1, 2};
  EXPECT_EQ(ElementOffset(t, index), 5);
  // The transposed view of the same memory is not row-major.
  TensorRef view = t;
  view.sizes[0] = 3;
  view.sizes[1] = 2;
  view.strides[0] = 1;
  view.strides[1] = 3;
  EXPECT_FALSE(view.IsContiguous());
}

TEST(IsDenseLayout, PermutationsOfRowMajorOnly) {
  std::vector<int32_t> order;
  const std::vector<int64_t> sizes = {2, 3};
  const std::vector<int64_t> column_major = {1, 2};
  EXPECT_TRUE(IsDenseLayout(sizes, column_major, &order));
  EXPECT_THAT(order, ElementsAre(1, 0));
  const std::vector<int64_t> gapped = {4, 1};  // a row stride of 4 for rows of 3: a gap
  EXPECT_FALSE(IsDenseLayout(sizes, gapped, nullptr));
  const std::vector<int64_t> overlapping = {1, 1};
  EXPECT_FALSE(IsDenseLayout(sizes, overlapping, nullptr));
}

TEST(Scalar, ValuesAndText) {
  EXPECT_EQ(Scalar::Int(-3).AsDouble(), -3.0);
  EXPECT_EQ(Scalar::Bool(true).AsDouble(), 1.0);
  EXPECT_EQ(Scalar::Double(0.5).AsDouble(), 0.5);
  EXPECT_EQ(Scalar::IntList({1, 2}).ToString(), "[1, 2]");
  EXPECT_EQ(Scalar::Bool(false).ToString(), "false");
  EXPECT_EQ(Scalar::Int(7), Scalar::Int(7));
  EXPECT_NE(Scalar::Int(7), Scalar::Double(7));
}

TEST(Scalar, KindsThatAreNotOpOperands) {
  EXPECT_EQ(Scalar::None().ToString(), "None");
  EXPECT_EQ(Scalar::String("net.w\n").ToString(), "\"net.w\\n\"");
  EXPECT_EQ(Scalar::String("abc").str(), "abc");
  EXPECT_EQ(Scalar::DoubleList({0.5, -2}).ToString(), "[0.5, -2]");
  EXPECT_THAT(Scalar::DoubleList({0.5, -2}).doubles(), ElementsAre(0.5, -2.0));
  EXPECT_EQ(Scalar::BoolList({true, false, true}).ToString(), "[true, false, true]");
  EXPECT_THAT(Scalar::BoolList({true, false}).list, ElementsAre(1, 0));
  // Accessors of the other kinds are empty.
  EXPECT_TRUE(Scalar::Int(3).str().empty());
  EXPECT_TRUE(Scalar::String("x").doubles().empty());
  // Only numbers are numbers.
  EXPECT_TRUE(Scalar::Bool(true).is_number());
  EXPECT_FALSE(Scalar::IntList({1}).is_number());
  EXPECT_FALSE(Scalar::String("1").is_number());
  EXPECT_FALSE(Scalar::None().is_number());
  EXPECT_EQ(Scalar::String("7").AsDouble(), 0.0);
  EXPECT_STREQ(ScalarKindName(Scalar::Kind::kDoubleList), "double list");
  EXPECT_STREQ(ScalarKindName(Scalar::Kind::kNone), "None");
}

TEST(Scalar, CopiesAreDeepAndCompareByContent) {
  Scalar a = Scalar::String("weights");
  Scalar b = a;
  EXPECT_EQ(a, b);
  EXPECT_NE(a.str().data(), b.str().data());  // its own bytes
  a = Scalar::String("other");
  EXPECT_EQ(b.str(), "weights");
  EXPECT_NE(a, b);
  EXPECT_EQ(Scalar::DoubleList({1, 2}), Scalar::DoubleList({1, 2}));
  EXPECT_NE(Scalar::DoubleList({1, 2}), Scalar::DoubleList({1, 2.5}));
  EXPECT_NE(Scalar::DoubleList({1}), Scalar::IntList({1}));
  EXPECT_NE(Scalar::BoolList({true}), Scalar::IntList({1}));
  EXPECT_EQ(Scalar::None(), Scalar::None());
  EXPECT_NE(Scalar::String(""), Scalar::None());
  Scalar moved = std::move(b);
  EXPECT_EQ(moved.str(), "weights");
  // Kept small: a value table holds one Scalar per value.
  static_assert(sizeof(Scalar) <= 56);
}

}  // namespace
}  // namespace ferry
