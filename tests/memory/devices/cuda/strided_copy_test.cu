// The index math of the device-side strided-to-dense copy (memory/devices/cuda/strided_copy.h), run on the
// host: compiled by nvcc like the kernel that uses it, checked against GatherStrided, which the
// host and sim runtimes use. Needs no GPU (not labelled `cuda`).
#include "ferry/memory/devices/cuda/strided_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "ferry/base/tensor.h"
#include "ferry/memory/devices/host/host_device.h"
#include "gtest/gtest.h"

namespace ferry::internal {
namespace {

// Dense strides (elements) of `sizes` stored in `dim_order`, outermost first.
std::vector<int64_t> StridesFor(const std::vector<int64_t>& sizes,
                                const std::vector<int32_t>& dim_order) {
  return ferry::TensorMeta{ferry::DType::kFloat32, {sizes.begin(), sizes.end()}, dim_order}
      .DenseStrides();
}

std::string Describe(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                     size_t element_size) {
  std::string s = "sizes";
  for (int64_t v : sizes) s += " " + std::to_string(v);
  s += ", strides";
  for (int64_t v : strides) s += " " + std::to_string(v);
  return s + ", element_size " + std::to_string(element_size);
}

// Gathers with PermuteSourceOffset as the kernel does and compares with GatherStrided, byte for
// byte. Source bytes are all distinct within each element position, so a wrong index shows.
void ExpectSameAsGatherStrided(const std::vector<int64_t>& sizes,
                               const std::vector<int64_t>& strides, size_t element_size) {
  SCOPED_TRACE(Describe(sizes, strides, element_size));
  StridedLayout layout{static_cast<int32_t>(sizes.size()), sizes.data(), strides.data(),
                       element_size};
  absl::StatusOr<size_t> bytes = DenseBytesOf(layout, "test");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::vector<uint8_t> src(*bytes);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + i / 251);
  std::vector<uint8_t> expected(*bytes, 0xAA);
  GatherStrided(expected.data(), src.data(), layout);

  PermuteLayout permute;
  ASSERT_TRUE(MakePermuteLayout(layout, &permute));
  ASSERT_EQ(static_cast<size_t>(permute.numel) * element_size, *bytes);
  std::vector<uint8_t> actual(*bytes, 0x55);
  for (int64_t i = 0; i < permute.numel; ++i) {
    const int64_t from = PermuteSourceOffset(permute, i);
    ASSERT_GE(from, 0);
    ASSERT_LT(from, permute.numel);
    std::memcpy(actual.data() + i * element_size, src.data() + from * element_size, element_size);
  }
  EXPECT_EQ(actual, expected);
}

void ExpectPermutationMatches(const std::vector<int64_t>& sizes,
                              const std::vector<int32_t>& dim_order) {
  for (size_t element_size : {size_t{4}, size_t{8}, size_t{1}, size_t{3}}) {
    ExpectSameAsGatherStrided(sizes, StridesFor(sizes, dim_order), element_size);
  }
}

TEST(PermuteLayout, TransposeMatchesGatherStrided) {
  ExpectPermutationMatches({3, 5}, {1, 0});
  ExpectPermutationMatches({64, 17}, {1, 0});
  ExpectPermutationMatches({1, 9}, {1, 0});
}

TEST(PermuteLayout, EveryPermutationOf3DMatchesGatherStrided) {
  std::vector<int32_t> order = {0, 1, 2};
  do {
    ExpectPermutationMatches({2, 3, 4}, order);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(PermuteLayout, EveryPermutationOf4DMatchesGatherStrided) {
  std::vector<int32_t> order = {0, 1, 2, 3};
  do {
    ExpectPermutationMatches({2, 3, 4, 5}, order);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(PermuteLayout, ChannelsLastMatchesGatherStrided) {
  // NCHW sizes stored NHWC, as conformance case 23 stores its constant.
  ExpectPermutationMatches({1, 2, 2, 3}, {0, 2, 3, 1});
  ExpectPermutationMatches({2, 8, 5, 7}, {0, 2, 3, 1});
  // Channels-last merges H and W into one dimension of stride C.
  PermuteLayout permute;
  const std::vector<int64_t> sizes = {2, 8, 5, 7};
  const std::vector<int64_t> strides = StridesFor(sizes, {0, 2, 3, 1});
  ASSERT_TRUE(MakePermuteLayout(StridedLayout{4, sizes.data(), strides.data(), 4}, &permute));
  EXPECT_EQ(permute.rank, 3);
  EXPECT_EQ(permute.sizes[2], 35);
  EXPECT_EQ(permute.strides[2], 8);
}

TEST(PermuteLayout, SizeOneDimensionsAreIgnoredWhateverTheirStrides) {
  ExpectPermutationMatches({1, 3, 1, 4}, {3, 1, 2, 0});
  ExpectPermutationMatches({3, 1, 4, 1}, {2, 0, 3, 1});
  // A size-1 dimension may carry any stride, even 0 or negative.
  ExpectSameAsGatherStrided({3, 1, 4}, {1, 0, 3}, 8);
  ExpectSameAsGatherStrided({3, 1, 4}, {1, -5, 3}, 4);
  ExpectSameAsGatherStrided({1, 1}, {7, 9}, 8);
  ExpectSameAsGatherStrided({}, {}, 4);
}

TEST(PermuteLayout, LargerRanksMatchGatherStrided) {
  ExpectPermutationMatches({2, 3, 2, 3, 2}, {4, 2, 0, 3, 1});
  ExpectPermutationMatches({2, 1, 3, 2, 1, 2}, {5, 3, 1, 0, 2, 4});
}

TEST(PermuteLayout, RowMajorIsTheIdentity) {
  for (const std::vector<int64_t>& sizes :
       {std::vector<int64_t>{6}, {2, 3}, {2, 3, 4}, {1, 5, 1}, {}}) {
    std::vector<int32_t> order(sizes.size());
    std::iota(order.begin(), order.end(), 0);
    const std::vector<int64_t> strides = StridesFor(sizes, order);
    PermuteLayout permute;
    ASSERT_TRUE(MakePermuteLayout(
        StridedLayout{static_cast<int32_t>(sizes.size()), sizes.data(), strides.data(), 4},
        &permute));
    EXPECT_TRUE(IsIdentity(permute));
  }
  const std::vector<int64_t> sizes = {2, 3};
  const std::vector<int64_t> transposed = {1, 2};
  PermuteLayout permute;
  ASSERT_TRUE(MakePermuteLayout(StridedLayout{2, sizes.data(), transposed.data(), 4}, &permute));
  EXPECT_FALSE(IsIdentity(permute));
}

TEST(PermuteLayout, RefusesLayoutsThatAreNotDensePermutations) {
  struct Case {
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;
  };
  const std::vector<Case> cases = {
      {{3, 5}, {10, 1}},     // gaps between rows (a slice)
      {{3, 5}, {5, 2}},      // gaps between elements
      {{2, 2}, {0, 1}},      // a broadcast dimension
      {{2, 2}, {1, 1}},      // overlapping dimensions
      {{2, 3}, {-3, 1}},     // a negative stride: the elements lie before `src`
      {{2, 3}, {3, -1}},     // the same, innermost
      {{2, 3}, {4, 1}},      // the span is right but elements are missing
      {{2, 3, 4}, {12, 4, 2}},  // innermost stride 2: no element at offset 1
      {{4, 0}, {1, 4}},      // empty
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(Describe(c.sizes, c.strides, 4));
    PermuteLayout permute;
    EXPECT_FALSE(MakePermuteLayout(
        StridedLayout{static_cast<int32_t>(c.sizes.size()), c.sizes.data(), c.strides.data(), 4},
        &permute));
  }
}

TEST(PermuteLayout, SourceOffsetOfAColumnMajorMatrix) {
  // [[0, 1, 2], [3, 4, 5]] stored column-major: element (i, j) at j * 2 + i.
  const std::vector<int64_t> sizes = {2, 3};
  const std::vector<int64_t> strides = {1, 2};
  PermuteLayout permute;
  ASSERT_TRUE(MakePermuteLayout(StridedLayout{2, sizes.data(), strides.data(), 4}, &permute));
  std::vector<int64_t> offsets;
  for (int64_t i = 0; i < permute.numel; ++i) offsets.push_back(PermuteSourceOffset(permute, i));
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 2, 4, 1, 3, 5}));
}

}  // namespace
}  // namespace ferry::internal
