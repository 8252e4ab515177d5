#include <cstdint>
#include <functional>
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
using ::ferry::testing::GetInt;
using ::ferry::testing::Index;
using ::ferry::testing::InferOnly;
using ::ferry::testing::OffsetOf;
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
using ::testing::IsEmpty;

const OpSchema& Op(const std::string& name) {
  static const OpRegistry* registry = new OpRegistry(OpRegistry::WithBuiltIns());
  const OpSchema* s = registry->Find(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

const char* Addr(const TensorRef& t, const Index& idx) {
  return static_cast<const char*>(t.data) + OffsetOf(t, idx) * static_cast<int64_t>(DTypeSize(t.dtype));
}

// Runs a view op and checks, element by element, that result[idx] is the very element
// input[map(idx)] (same address), and that the op has no kernel and writes nothing.
OpRun ExpectView(const std::string& name, TensorRef& input, const std::vector<OpArg>& rest,
                 const std::vector<int64_t>& want_sizes, const std::function<Index(const Index&)>& map) {
  const OpSchema& schema = Op(name);
  EXPECT_EQ(schema.kernel, nullptr) << name;
  EXPECT_EQ(schema.ViewOf(0), 0) << name;
  EXPECT_THAT(schema.written_args, IsEmpty()) << name;
  std::vector<OpArg> args = {T(input)};
  args.insert(args.end(), rest.begin(), rest.end());
  OpRun run = RunOp(schema, args);
  EXPECT_OK(run.infer_status) << name;
  if (!run.infer_status.ok()) return run;
  EXPECT_EQ(SizesOf(run.results[0]), want_sizes) << name;
  EXPECT_EQ(run.results[0].dtype, input.dtype);
  ForEachIndex(want_sizes, [&](const Index& idx) {
    EXPECT_EQ(Addr(run.results[0], idx), Addr(input, map(idx))) << name;
  });
  return run;
}

// Row-major linear index -> multi-index.
Index Unflatten(int64_t linear, const std::vector<int64_t>& sizes) {
  Index idx(sizes.size());
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    idx[d] = linear % sizes[d];
    linear /= sizes[d];
  }
  return idx;
}
int64_t Flatten(const Index& idx, const std::vector<int64_t>& sizes) {
  int64_t linear = 0;
  for (size_t d = 0; d < sizes.size(); ++d) linear = linear * sizes[d] + idx[d];
  return linear;
}

TEST(ViewTest, ContiguousWithInferredSize) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 4});
  const Scalar sizes = Scalar::IntList({4, -1});
  OpRun run = ExpectView("view", x.ref(), {S(sizes)}, {4, 6}, [](const Index& i) {
    return Unflatten(Flatten(i, {4, 6}), {2, 3, 4});
  });
  EXPECT_THAT(StridesOf(run.results[0]), ElementsAre(6, 1));
  EXPECT_EQ(run.inferred[0].view_offset, 0);
}

TEST(ViewTest, SplitsDimensionOfTransposedTensor) {
  // [6, 4] seen through a transpose of a [4, 6] buffer: strides (1, 6). Splitting the last
  // dimension is a view; flattening is not.
  TestTensor base = TestTensor::Filled(DType::kFloat32, {4, 6});
  TensorRef t = base.View({6, 4}, {1, 6});
  const Scalar split = Scalar::IntList({6, 2, 2});
  OpRun run = ExpectView("view", t, {S(split)}, {6, 2, 2}, [](const Index& i) {
    return Index{i[0], i[1] * 2 + i[2]};
  });
  EXPECT_THAT(StridesOf(run.results[0]), ElementsAre(1, 12, 6));
  const Scalar flat = Scalar::IntList({24});
  EXPECT_THAT(InferOnly(Op("view"), {T(t), S(flat)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view: argument 0 with shape [6, 4] and strides [1, 6] cannot be "
                                 "viewed as [24]")));
}

TEST(ViewTest, Rejections) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {3, 4});
  const Scalar two_inferred = Scalar::IntList({-1, -1});
  const Scalar wrong = Scalar::IntList({5, 2});
  const Scalar not_list = Scalar::Int(12);
  EXPECT_THAT(InferOnly(Op("view"), {T(x), S(two_inferred)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than one -1")));
  EXPECT_THAT(InferOnly(Op("view"), {T(x), S(wrong)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view: argument 1 [5, 2] does not match the 12 elements")));
  EXPECT_THAT(InferOnly(Op("view"), {T(x), S(not_list)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "view: argument 1 must be an int list"));
}

TEST(TransposeTest, SwapsSizesAndStrides) {
  TestTensor x = TestTensor::Filled(DType::kInt64, {2, 3, 4});
  const Scalar d0 = Scalar::Int(0);
  const Scalar dm1 = Scalar::Int(-1);
  OpRun run = ExpectView("transpose", x.ref(), {S(d0), S(dm1)}, {4, 3, 2},
                         [](const Index& i) { return Index{i[2], i[1], i[0]}; });
  EXPECT_THAT(StridesOf(run.results[0]), ElementsAre(1, 4, 12));
  const Scalar d3 = Scalar::Int(3);
  EXPECT_THAT(InferOnly(Op("transpose"), {T(x), S(d0), S(d3)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "transpose: argument 2 (dim 3) is out of range for a tensor of rank 3"));
}

TEST(PermuteTest, ReordersDimensions) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3, 4});
  const Scalar dims = Scalar::IntList({2, 0, 1});
  ExpectView("permute", x.ref(), {S(dims)}, {4, 2, 3},
             [](const Index& i) { return Index{i[1], i[2], i[0]}; });
  const Scalar repeated = Scalar::IntList({0, 0, 1});
  const Scalar short_list = Scalar::IntList({1, 0});
  EXPECT_THAT(InferOnly(Op("permute"), {T(x), S(repeated)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeats dim 0")));
  EXPECT_THAT(InferOnly(Op("permute"), {T(x), S(short_list)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("permute: argument 1")));
}

TEST(SelectTest, DropsTheDimAtTheIndexNegativeFromTheEnd) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {3, 4, 5});
  const Scalar dim = Scalar::Int(1), two = Scalar::Int(2), last = Scalar::Int(-1);
  OpRun run = ExpectView("select", x.ref(), {S(dim), S(two)}, {3, 5}, [](const Index& i) {
    return Index{i[0], 2, i[1]};
  });
  EXPECT_EQ(run.inferred[0].view_offset, 10);
  EXPECT_THAT(StridesOf(run.results[0]), ElementsAre(20, 1));
  const Scalar first_dim = Scalar::Int(-3);
  ExpectView("select", x.ref(), {S(first_dim), S(last)}, {4, 5}, [](const Index& i) {
    return Index{2, i[0], i[1]};
  });
  const Scalar four = Scalar::Int(4), minus_four = Scalar::Int(-4);
  EXPECT_THAT(
      InferOnly(Op("select"), {T(x), S(dim), S(four)}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("select: argument 2 (index 4) is out of range for dim 1 of size 4")));
  EXPECT_OK(InferOnly(Op("select"), {T(x), S(dim), S(minus_four)}));
  const Scalar minus_five = Scalar::Int(-5);
  EXPECT_THAT(InferOnly(Op("select"), {T(x), S(dim), S(minus_five)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index -5")));
}

TEST(SliceTest, StartEndStepAndOffset) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {3, 10});
  const Scalar dim = Scalar::Int(1);
  const Scalar start = Scalar::Int(1);
  const Scalar end = Scalar::Int(8);
  const Scalar step = Scalar::Int(3);
  // Columns 1, 4, 7.
  OpRun run = ExpectView("slice", x.ref(), {S(dim), S(start), S(end), S(step)}, {3, 3},
                         [](const Index& i) { return Index{i[0], 1 + 3 * i[1]}; });
  EXPECT_EQ(run.inferred[0].view_offset, 1);
  EXPECT_THAT(StridesOf(run.results[0]), ElementsAre(10, 3));
}

TEST(SliceTest, NegativeBoundsWrapAndLargeBoundsClamp) {
  TestTensor x = TestTensor::Filled(DType::kInt64, {6, 2});
  const Scalar dim = Scalar::Int(0);
  const Scalar one = Scalar::Int(1);
  const Scalar neg_start = Scalar::Int(-4);  // 2
  const Scalar huge_end = Scalar::Int(std::numeric_limits<int64_t>::max());
  OpRun run = ExpectView("slice", x.ref(), {S(dim), S(neg_start), S(huge_end), S(one)}, {4, 2},
                         [](const Index& i) { return Index{i[0] + 2, i[1]}; });
  EXPECT_EQ(run.inferred[0].view_offset, 4);
  const Scalar neg_end = Scalar::Int(-1);  // 5
  const Scalar very_neg = Scalar::Int(-100);  // clamps to 0
  ExpectView("slice", x.ref(), {S(dim), S(very_neg), S(neg_end), S(one)}, {5, 2},
             [](const Index& i) { return i; });
  const Scalar five = Scalar::Int(5);
  const Scalar two = Scalar::Int(2);
  // start past end: empty.
  ExpectView("slice", x.ref(), {S(dim), S(five), S(two), S(one)}, {0, 2},
             [](const Index& i) { return i; });
  const Scalar zero = Scalar::Int(0);
  EXPECT_THAT(InferOnly(Op("slice"), {T(x), S(dim), S(one), S(two), S(zero)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("slice: argument 4 (step 0)")));
}

TEST(UnsqueezeSqueezeTest, InsertAndRemoveUnitDims) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 3});
  const Scalar d1 = Scalar::Int(1);
  const Scalar dend = Scalar::Int(-1);  // after the last dimension
  OpRun mid = ExpectView("unsqueeze", x.ref(), {S(d1)}, {2, 1, 3},
                         [](const Index& i) { return Index{i[0], i[2]}; });
  EXPECT_THAT(StridesOf(mid.results[0]), ElementsAre(3, 3, 1));
  ExpectView("unsqueeze", x.ref(), {S(dend)}, {2, 3, 1},
             [](const Index& i) { return Index{i[0], i[1]}; });
  const Scalar d3 = Scalar::Int(3);
  EXPECT_THAT(InferOnly(Op("unsqueeze"), {T(x), S(d3)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(dim 3) is out of range")));

  TestTensor y = TestTensor::Filled(DType::kFloat32, {2, 1, 3});
  ExpectView("squeeze", y.ref(), {S(d1)}, {2, 3}, [](const Index& i) { return Index{i[0], 0, i[1]}; });
  const Scalar d0 = Scalar::Int(0);
  // Size 2: unchanged, as in PyTorch.
  ExpectView("squeeze", y.ref(), {S(d0)}, {2, 1, 3}, [](const Index& i) { return i; });
}

TEST(ExpandTest, ZeroStridesForExpandedDims) {
  TestTensor x = TestTensor::Filled(DType::kFloat32, {3, 1});
  const Scalar sizes = Scalar::IntList({2, -1, 4});
  OpRun run = ExpectView("expand", x.ref(), {S(sizes)}, {2, 3, 4},
                         [](const Index& i) { return Index{i[1], 0}; });
  EXPECT_THAT(StridesOf(run.results[0]), ElementsAre(0, 1, 0));
  const Scalar bad = Scalar::IntList({2, 4});
  EXPECT_THAT(InferOnly(Op("expand"), {T(x), S(bad)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "expand: argument 0 has shape [3, 1], which cannot be expanded to [2, 4]"));
  const Scalar too_short = Scalar::IntList({4});
  EXPECT_THAT(InferOnly(Op("expand"), {T(x), S(too_short)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expand: argument 1 [4]")));
}

// ---- Copies ---------------------------------------------------------------------------------

TEST(ReshapeTest, CopiesInLogicalOrder) {
  TestTensor base = TestTensor::Filled(DType::kFloat32, {4, 6}, 1);
  TensorRef t = base.View({6, 4}, {1, 6});  // not viewable as [24]
  const Scalar sizes = Scalar::IntList({3, -1});
  const OpSchema& schema = Op("reshape");
  EXPECT_TRUE(schema.written_args.empty());
  EXPECT_EQ(schema.ViewOf(0), -1);
  for (bool strided_result : {false, true}) {
    OpRun run = strided_result ? RunOp(schema, {T(t), S(sizes)}, std::vector<int64_t>{1, 3})
                               : RunOp(schema, {T(t), S(sizes)});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    EXPECT_THAT(SizesOf(run.results[0]), ElementsAre(3, 8));
    EXPECT_THAT(StridesOf(run.inferred[0].layout), ElementsAre(8, 1));
    ForEachIndex({3, 8}, [&](const Index& idx) {
      EXPECT_EQ(Get(run.results[0], idx), Get(t, Unflatten(Flatten(idx, {3, 8}), {6, 4})));
    });
  }
  // A contiguous source is copied too (the result is never an alias).
  TestTensor c = TestTensor::Filled(DType::kInt64, {2, 6}, 2);
  const Scalar flat = Scalar::IntList({12});
  OpRun run = RunOp(schema, {T(c), S(flat)});
  ASSERT_OK(run.kernel_status);
  EXPECT_NE(run.results[0].data, c.ref().data);
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(GetInt(run.results[0], {i}), GetInt(c.ref(), Unflatten(i, {2, 6})));
  }
}

TEST(CloneTest, MakesContiguousCopy) {
  TestTensor base = TestTensor::Filled(DType::kFloat32, {3, 1});
  TensorRef expanded = base.View({2, 3}, {0, 1});
  OpRun run = RunOp(Op("clone"), {T(expanded)});
  ASSERT_OK(run.kernel_status);
  EXPECT_THAT(StridesOf(run.results[0]), ElementsAre(3, 1));
  ForEachIndex({2, 3}, [&](const Index& idx) {
    EXPECT_EQ(Get(run.results[0], idx), Get(base.ref(), {idx[1], 0}));
  });
}

TEST(CatTest, ConcatenatesAlongDim) {
  TestTensor a = TestTensor::Filled(DType::kFloat32, {2, 3}, 1);
  TestTensor b_base = TestTensor::Filled(DType::kFloat32, {1, 2}, 2);
  TensorRef b = b_base.View({2, 1}, {1, 2});  // transposed [2, 1]
  TestTensor c = TestTensor::Filled(DType::kFloat32, {2, 2}, 3);
  for (int64_t d : {1, -1}) {
    const Scalar dim = Scalar::Int(d);
    OpRun run = RunOp(Op("cat"), {S(dim), T(a), T(b), T(c)}, std::vector<int64_t>{1, 2});
    ASSERT_OK(run.infer_status);
    ASSERT_OK(run.kernel_status);
    EXPECT_THAT(SizesOf(run.results[0]), ElementsAre(2, 6));
    ForEachIndex({2, 6}, [&](const Index& idx) {
      const int64_t j = idx[1];
      const double want = j < 3 ? Get(a.ref(), {idx[0], j})
                          : j < 4 ? Get(b, {idx[0], j - 3})
                                  : Get(c.ref(), {idx[0], j - 4});
      EXPECT_EQ(Get(run.results[0], idx), want) << j;
    });
  }
}

TEST(CatTest, Int64AlongDimZeroAndRejections) {
  TestTensor a = TestTensor::Int({1, 2}, {1, 2});
  TestTensor b = TestTensor::Int({2, 2}, {3, 4, 5, 6});
  const Scalar dim = Scalar::Int(0);
  OpRun run = RunOp(Op("cat"), {S(dim), T(a), T(b)});
  ASSERT_OK(run.kernel_status);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(GetInt(run.results[0], Unflatten(i, {3, 2})), i + 1);
  }
  TestTensor f = TestTensor::Filled(DType::kFloat32, {1, 2});
  TestTensor wide = TestTensor::Filled(DType::kInt64, {1, 3});
  EXPECT_THAT(InferOnly(Op("cat"), {S(dim), T(a), T(f)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cat: argument 2 has dtype")));
  EXPECT_THAT(InferOnly(Op("cat"), {S(dim), T(a), T(wide)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cat: argument 2 has shape [1, 3]")));
  EXPECT_THAT(InferOnly(Op("cat"), {S(dim)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at least 2 arguments")));
  EXPECT_THAT(InferOnly(Op("cat"), {T(a), T(b)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "cat: argument 0 must be an int"));
}

// constant_pad against a naive reference: out[i] = x[i - before] where that is inside x, else the
// value; (before, after) pairs from the last dim backwards, negative amounts crop.
TEST(ConstantPadTest, PadsAndCropsEachDimLikeConstantPadNd) {
  TestTensor base = TestTensor::Filled(DType::kFloat32, {3, 2}, 1);
  TensorRef x = base.View({2, 3}, {1, 2});  // a transposed, strided [2, 3]
  struct Case {
    std::vector<int64_t> pad;
    std::vector<int64_t> sizes;
  };
  const std::vector<Case> cases = {
      {{1, 2}, {2, 6}},          // last dim only
      {{0, 1, 2, 0}, {4, 4}},    // both dims
      {{-1, 1, 1, -1}, {2, 3}},  // crop one side, pad the other
      {{}, {2, 3}},              // nothing
      {{-3, 0}, {2, 0}},         // cropped away entirely
  };
  for (const Case& c : cases) {
    const Scalar pad = Scalar::IntList(c.pad), value = Scalar::Double(-7.5);
    OpRun run = RunOp(Op("constant_pad"), {T(x), S(pad), S(value)});
    ASSERT_OK(run.infer_status) << c.pad.size();
    ASSERT_OK(run.kernel_status);
    ASSERT_EQ(SizesOf(run.results[0]), c.sizes);
    std::vector<int64_t> before(2, 0);
    for (size_t p = 0; p < c.pad.size() / 2; ++p) before[1 - p] = c.pad[2 * p];
    ForEachIndex(c.sizes, [&](const Index& idx) {
      const int64_t i = idx[0] - before[0], j = idx[1] - before[1];
      const double want = i >= 0 && i < 2 && j >= 0 && j < 3 ? Get(x, {i, j}) : -7.5;
      EXPECT_EQ(Get(run.results[0], idx), want) << idx[0] << "," << idx[1];
    });
  }
  TestTensor ints = TestTensor::Int({2}, {4, 5});
  const Scalar pad = Scalar::IntList({1, 1}), nine = Scalar::Int(9);
  OpRun run = RunOp(Op("constant_pad"), {T(ints), S(pad), S(nine)});
  ASSERT_OK(run.kernel_status);
  const int64_t want[] = {9, 4, 5, 9};
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(GetInt(run.results[0], {i}), want[i]);

  const Scalar odd = Scalar::IntList({1}), too_many = Scalar::IntList({1, 1, 1, 1, 1, 1});
  const Scalar negative = Scalar::IntList({-2, -2});
  EXPECT_THAT(InferOnly(Op("constant_pad"), {T(x), S(odd), S(nine)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes pairs")));
  EXPECT_THAT(InferOnly(Op("constant_pad"), {T(x), S(too_many), S(nine)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 4")));
  EXPECT_THAT(InferOnly(Op("constant_pad"), {T(x), S(negative), S(nine)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gives no valid size")));
}

TEST(SymSizeTest, ReadsShapeOnly) {
  const OpSchema& schema = Op("sym_size");
  EXPECT_THAT(schema.shape_only_args, ElementsAre(0));
  EXPECT_TRUE(schema.ShapeOnly(0));
  TestTensor x = TestTensor::Filled(DType::kFloat32, {2, 7, 3});
  // The data pointer is never read: a tensor without data works.
  TensorRef meta = x.ref();
  meta.data = nullptr;
  const Scalar dim = Scalar::Int(-2);
  OpRun run = RunOp(schema, {T(meta), S(dim)});
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(run.results[0].dtype, DType::kInt64);
  EXPECT_EQ(run.results[0].rank, 0);
  EXPECT_EQ(run.results[0].numel(), 1);
  EXPECT_EQ(*static_cast<const int64_t*>(run.results[0].data), 7);
  const Scalar bad = Scalar::Int(3);
  EXPECT_THAT(InferOnly(schema, {T(meta), S(bad)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sym_size: argument 1")));
}

}  // namespace
}  // namespace ferry
