// ParallelMemcpy: the bytes land exactly where memcpy puts them for every split, nothing outside
// the destination is written, and back-to-back copies each see their own job.
#include "ferry/memory/parallel_memcpy.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

constexpr size_t kMin = ParallelMemcpy::kMinPartBytes;
constexpr uint8_t kSentinel = 0xA5;
constexpr size_t kGuard = 4096;

// Byte i of a source made for copy `seed`: differs between neighbouring bytes and between seeds.
uint8_t Pattern(size_t i, uint32_t seed) {
  uint32_t x = static_cast<uint32_t>(i) * 2654435761u + seed * 40503u;
  return static_cast<uint8_t>(x >> 13);
}

// Copies `bytes` from an offset source into an offset destination between guard bytes and
// checks every byte of the destination and of the guards.
void CheckCopy(ParallelMemcpy& copier, size_t bytes, size_t src_offset, size_t dst_offset,
               uint32_t seed) {
  std::vector<uint8_t> src(bytes + src_offset);
  for (size_t i = 0; i < bytes; ++i) src[src_offset + i] = Pattern(i, seed);
  std::vector<uint8_t> dst(kGuard + dst_offset + bytes + kGuard, kSentinel);
  uint8_t* out = dst.data() + kGuard + dst_offset;
  copier.Copy(out, src.data() + src_offset, bytes);
  size_t wrong = 0;
  for (size_t i = 0; i < bytes; ++i) wrong += out[i] != Pattern(i, seed);
  EXPECT_EQ(wrong, 0u) << bytes << " bytes, " << copier.threads() << " threads";
  for (size_t i = 0; i < kGuard + dst_offset; ++i) {
    ASSERT_EQ(dst[i], kSentinel) << "written before the destination, byte " << i;
  }
  for (size_t i = kGuard + dst_offset + bytes; i < dst.size(); ++i) {
    ASSERT_EQ(dst[i], kSentinel) << "written after the destination, byte " << i;
  }
}

TEST(ParallelMemcpy, ThreadCountIsClamped) {
  EXPECT_EQ(ParallelMemcpy(0).threads(), 1);
  EXPECT_EQ(ParallelMemcpy(-3).threads(), 1);
  EXPECT_EQ(ParallelMemcpy(3).threads(), 3);
  EXPECT_EQ(ParallelMemcpy(1000).threads(), ParallelMemcpy::kMaxThreads);
  EXPECT_GE(ParallelMemcpy::DefaultThreads(), 1);
  EXPECT_LE(ParallelMemcpy::DefaultThreads(), 4);
}

TEST(ParallelMemcpy, SmallCopiesStayOnTheCallingThreadAndPartsAreAtLeastTheMinimum) {
  ParallelMemcpy one(1), four(4);
  EXPECT_EQ(one.PartsFor(64 << 20), 1);
  EXPECT_EQ(four.PartsFor(0), 1);
  EXPECT_EQ(four.PartsFor(2 * kMin - 1), 1);
  EXPECT_EQ(four.PartsFor(2 * kMin), 2);
  EXPECT_EQ(four.PartsFor(3 * kMin + 5), 3);
  EXPECT_EQ(four.PartsFor(4 * kMin), 4);
  EXPECT_EQ(four.PartsFor(64 << 20), 4);
}

TEST(ParallelMemcpy, EverySplitCopiesExactlyTheBytes) {
  for (int threads : {1, 2, 3, 4, 8}) {
    ParallelMemcpy copier(threads);
    uint32_t seed = 1;
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4095}, 2 * kMin - 1, 2 * kMin, 2 * kMin + 1,
                         3 * kMin + 4097, (size_t{4} << 20) + 13}) {
      CheckCopy(copier, bytes, 0, 0, seed++);
      CheckCopy(copier, bytes, 3, 7, seed++);  // unaligned source and destination
    }
  }
}

TEST(ParallelMemcpy, BackToBackCopiesEachSeeTheirOwnJob) {
  ParallelMemcpy copier(4);
  const size_t bytes = 4 * kMin + 123;
  std::vector<uint8_t> src(bytes), dst(bytes);
  for (uint32_t seed = 0; seed < 300; ++seed) {
    for (size_t i = 0; i < bytes; i += 997) src[i] = Pattern(i, seed);
    copier.Copy(dst.data(), src.data(), bytes);
    ASSERT_EQ(std::memcmp(dst.data(), src.data(), bytes), 0) << "copy " << seed;
  }
}

TEST(ParallelMemcpy, DestroyedWithoutACopyOrRightAfterOne) {
  for (int i = 0; i < 20; ++i) {
    ParallelMemcpy idle(4);
    EXPECT_EQ(idle.threads(), 4);
  }
  for (int i = 0; i < 20; ++i) {
    ParallelMemcpy busy(4);
    CheckCopy(busy, 4 * kMin, 0, 0, static_cast<uint32_t>(i));
  }
}

}  // namespace
}  // namespace ferry
