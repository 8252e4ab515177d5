// What reading a program costs in host memory (loader/internal/read_memory.h): counts that add
// up and saturate, and the check against the caller's limit and the host's memory.
#include "ferry/loader/internal/read_memory.h"

#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::internal {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ReadMemory, AddCountsValuesNodesAndTheirBytes) {
  ReadMemory need;
  need.Add(3, 10, 2, 100);
  EXPECT_EQ(need.values, 3u);
  EXPECT_EQ(need.nodes, 2u);
  EXPECT_EQ(need.bytes, 3u * 10 + 2u * 100);
  need.Add(1, 7, 0, 1000);
  EXPECT_EQ(need.values, 4u);
  EXPECT_EQ(need.nodes, 2u);
  EXPECT_EQ(need.bytes, 237u);
}

TEST(ReadMemory, BytesSaturateInsteadOfWrapping) {
  ReadMemory need;
  need.Add(SIZE_MAX / 2, 4, 0, 0);
  EXPECT_EQ(need.bytes, SIZE_MAX);
  need.Add(1, 1, 1, 1);  // stays saturated
  EXPECT_EQ(need.bytes, SIZE_MAX);
  ReadMemory sum;
  sum.Add(1, SIZE_MAX - 5, 1, 10);
  EXPECT_EQ(sum.bytes, SIZE_MAX);
}

TEST(ReadMemory, CheckHonoursTheCallersLimit) {
  ReadMemory need;
  need.Add(5, 200, 3, 1000);  // 4000 bytes
  EXPECT_OK(CheckReadMemory(need, 4000));
  EXPECT_OK(CheckReadMemory(need, SIZE_MAX));
  EXPECT_THAT(CheckReadMemory(need, 3999),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("5 values and 3 nodes"),
                             HasSubstr("ProgramLoadOptions::memory_limit_bytes"),
                             HasSubstr("nothing was built"))));
}

TEST(ReadMemory, CheckRefusesMoreThanTheHostHas) {
  ReadMemory need;
  need.Add(1, SIZE_MAX, 0, 0);
  EXPECT_THAT(CheckReadMemory(need, SIZE_MAX),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("the host has available")));
}

}  // namespace
}  // namespace ferry::internal
