#include "ferry/base/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

// The kernel's transparent huge page setting, read here independently of the allocator.
bool KernelHugePagesOn() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return false;
  return absl::StrContains(line, "[always]") || absl::StrContains(line, "[madvise]");
}

bool SanitizedBuild() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

// The VmFlags line of the mapping in /proc/self/smaps that holds `p`; empty if none does.
std::string VmFlagsOf(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    const std::string& range = fields[0];
    if (const size_t dash = range.find('-');
        dash != std::string::npos && range.find(':') == std::string::npos) {
      uint64_t lo = 0, hi = 0;
      if (absl::SimpleHexAtoi(range.substr(0, dash), &lo) &&
          absl::SimpleHexAtoi(range.substr(dash + 1), &hi)) {
        inside = addr >= lo && addr < hi;
        continue;
      }
    }
    if (inside && absl::StartsWith(line, "VmFlags:")) return line;
  }
  return "";
}

TEST(HugePages, SmallTablesComeFromTheHeap) {
  EXPECT_FALSE(internal::MapsLargeTable(0));
  EXPECT_FALSE(internal::MapsLargeTable(kLargeTableBytes - 1));
  EXPECT_FALSE(internal::MapsLargeTable(SIZE_MAX));  // refused by the mapping, not wrapped around
}

TEST(HugePages, LargeTablesAreMappedWhenTheKernelGivesHugePages) {
  EXPECT_EQ(internal::MapsLargeTable(kLargeTableBytes), KernelHugePagesOn() && !SanitizedBuild());
}

TEST(HugePages, AMappedTableStartsOnAHugePageAndAsksForHugePages) {
  if (!internal::MapsLargeTable(kLargeTableBytes)) {
    GTEST_SKIP() << "large tables come from the heap here (no transparent huge pages, or a "
                    "sanitizer build)";
  }
  LargeTable<int32_t> table(4 * kHugePageBytes / sizeof(int32_t));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(table.data()) % kHugePageBytes, 0u);
  const std::string flags = VmFlagsOf(table.data());
  ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds the table";
  EXPECT_TRUE(absl::StrContains(flags, " hg")) << flags;  // MADV_HUGEPAGE
}

TEST(HugePages, MappingsAreWholePagesOfTheirTier) {
  constexpr size_t kPage = 4096;
  EXPECT_EQ(internal::MappedTableBytes(kLargeTableBytes), kLargeTableBytes);
  EXPECT_EQ(internal::MappedTableBytes(kLargeTableBytes + 1), kLargeTableBytes + kPage);
  EXPECT_EQ(internal::MappedTableBytes(kHugeTableBytes - 1), kHugeTableBytes);
  EXPECT_EQ(internal::MappedTableBytes(kHugeTableBytes), kHugePageBytes);
  EXPECT_EQ(internal::MappedTableBytes(kHugePageBytes + 1), 2 * kHugePageBytes);
}

// A table between the two thresholds: a mapping of ordinary pages, kept and reused like the huge
// ones, so that a reload does not depend on whether the heap kept a block of its size.
TEST(HugePages, AMidSizedTableIsMappedOnOrdinaryPagesAndReused) {
  if (!internal::MapsLargeTable(kLargeTableBytes)) {
    GTEST_SKIP() << "large tables come from the heap here";
  }
  ReleaseCachedLargeTables();
  const size_t n = 2 * kLargeTableBytes / sizeof(int32_t);  // 256 KiB
  const int32_t* first = nullptr;
  {
    LargeTable<int32_t> table(n, 3);
    first = table.data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 4096, 0u);
    const std::string flags = VmFlagsOf(first);
    ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds the table";
    EXPECT_FALSE(absl::StrContains(flags, " hg")) << flags;
  }
  EXPECT_EQ(internal::CachedLargeTableBytes(), 2 * kLargeTableBytes);
  {
    LargeTable<int32_t> again(n);
    EXPECT_EQ(again.data(), first);
    EXPECT_EQ(std::count(again.begin(), again.end(), 0), static_cast<std::ptrdiff_t>(n));
  }
  // Another size does not take it.
  {
    LargeTable<int32_t> other(n + 4096 / sizeof(int32_t));
    EXPECT_NE(other.data(), first);
  }
  EXPECT_EQ(ReleaseCachedLargeTables(), 2 * kLargeTableBytes + (2 * kLargeTableBytes + 4096));
}

TEST(HugePages, ATableKeepsItsContentAcrossTheThresholdBothWays) {
  LargeTable<int64_t> table;
  const size_t large = 3 * kHugeTableBytes / sizeof(int64_t) + 7;  // past 2 MiB: whole pages
  for (size_t i = 0; i < large; ++i) table.push_back(static_cast<int64_t>(i) * 3 - 1);
  ASSERT_EQ(table.size(), large);
  for (size_t i = 0; i < large; i += 4099) ASSERT_EQ(table[i], static_cast<int64_t>(i) * 3 - 1);
  EXPECT_EQ(table.back(), static_cast<int64_t>(large - 1) * 3 - 1);
  table.resize(100);
  table.shrink_to_fit();  // back to the heap
  int64_t expected = 0;
  for (size_t i = 0; i < 100; ++i) expected += static_cast<int64_t>(i) * 3 - 1;
  EXPECT_EQ(std::accumulate(table.begin(), table.end(), int64_t{0}), expected);
  // Copies between a mapped table and a heap one.
  LargeTable<int64_t> big(large, 5);
  LargeTable<int64_t> copy = big;
  EXPECT_EQ(copy, big);
  copy = table;
  EXPECT_EQ(copy, table);
}

TEST(HugePages, AFreedTableIsReusedByTheNextOfItsSizeUntilReleased) {
  if (!internal::MapsLargeTable(kLargeTableBytes)) {
    GTEST_SKIP() << "large tables come from the heap here";
  }
  const size_t n = 3 * kHugePageBytes / sizeof(int32_t);  // 6 MiB
  const int32_t* first = nullptr;
  {
    LargeTable<int32_t> table(n, 7);
    first = table.data();
  }
  EXPECT_GE(internal::CachedLargeTableBytes(), 3 * kHugePageBytes);
  {
    LargeTable<int32_t> again(n);  // value-initialized: the old content does not show through
    EXPECT_EQ(again.data(), first);
    EXPECT_EQ(std::count(again.begin(), again.end(), 0), static_cast<std::ptrdiff_t>(n));
  }
  EXPECT_GE(ReleaseCachedLargeTables(), 3 * kHugePageBytes);
  EXPECT_EQ(internal::CachedLargeTableBytes(), 0u);
}

TEST(HugePages, TheTablesKeptForReuseAreBounded) {
  if (!internal::MapsLargeTable(kLargeTableBytes)) {
    GTEST_SKIP() << "large tables come from the heap here";
  }
  ReleaseCachedLargeTables();
  {
    // Freed at the end of the scope: more than the cache keeps, in tables of distinct sizes.
    std::vector<LargeTable<uint8_t>> tables;
    size_t total = 0;
    for (size_t i = 1; total <= kLargeTableCacheBytes + 8 * kHugePageBytes; ++i) {
      tables.emplace_back().reserve(i * kHugePageBytes);  // mapped, never touched
      total += i * kHugePageBytes;
    }
  }
  EXPECT_LE(internal::CachedLargeTableBytes(), kLargeTableCacheBytes);
  EXPECT_GT(internal::CachedLargeTableBytes(), 0u);
  // A table larger than the whole cache is never kept.
  ReleaseCachedLargeTables();
  {
    LargeTable<uint8_t> huge;
    huge.reserve(kLargeTableCacheBytes + kHugePageBytes);
  }
  EXPECT_EQ(internal::CachedLargeTableBytes(), 0u);
}

// Threads loading at once take and give back tables of the same sizes: no table is handed to two
// of them (each fills its own with its own number and finds it intact).
TEST(HugePages, ThreadsNeverShareATable) {
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::atomic<int> corrupted{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &corrupted] {
      for (int round = 0; round < 20; ++round) {
        LargeTable<int32_t> table(kHugePageBytes / sizeof(int32_t), t);
        std::this_thread::yield();
        if (std::count(table.begin(), table.end(), t) !=
            static_cast<std::ptrdiff_t>(table.size())) {
          ++corrupted;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(corrupted.load(), 0);
}

TEST(HugePages, MapHugePageMemoryAlignsLargeMappings) {
  const size_t bytes = 3 * kHugePageBytes;
  void* p = MapHugePageMemory(bytes, PROT_READ | PROT_WRITE);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  auto* bytes_p = static_cast<uint8_t*>(p);
  bytes_p[0] = 1;
  bytes_p[bytes - 1] = 2;
  EXPECT_EQ(bytes_p[0] + bytes_p[bytes - 1], 3);
  EXPECT_EQ(munmap(p, bytes), 0);
  EXPECT_EQ(MapHugePageMemory(SIZE_MAX - 4095, PROT_READ), nullptr);  // too large to map
}

}  // namespace
}  // namespace ferry
