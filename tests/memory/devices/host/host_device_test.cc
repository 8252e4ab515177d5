#include "ferry/memory/devices/host/host_device.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// MemAvailable of /proc/meminfo in bytes, read here independently; 0 when it cannot be.
size_t MemAvailableNow() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return kib * 1024;
  }
  return 0;
}

// Within a quarter of `expected` either way (other processes change it between the readings).
::testing::AssertionResult Near(size_t actual, size_t expected) {
  if (actual >= expected / 4 * 3 && actual <= expected / 4 * 5) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << actual << " is not within 25% of " << expected;
}

TEST(HostAvailableBytes, ReportsMemAvailableOnEveryQuery) {
  const size_t expected = MemAvailableNow();
  if (expected == 0) GTEST_SKIP() << "no MemAvailable in /proc/meminfo here";
  if (::access("/sys/fs/cgroup/memory.max", R_OK) == 0) {
    GTEST_SKIP() << "a cgroup memory limit may bind before MemAvailable here";
  }
  // Repeated queries read the file from its start each time.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Near(internal::HostAvailableBytes(), expected)) << i;
}

TEST(HostAvailableBytes, SurvivesItsDescriptorBeingReplaced) {
  const size_t expected = MemAvailableNow();
  if (expected == 0) GTEST_SKIP() << "no MemAvailable in /proc/meminfo here";
  if (::access("/sys/fs/cgroup/memory.max", R_OK) == 0) {
    GTEST_SKIP() << "a cgroup memory limit may bind before MemAvailable here";
  }
  ASSERT_TRUE(Near(internal::HostAvailableBytes(), expected));  // opens /proc/meminfo
  // A process that closes descriptors it did not open and reuses the numbers: the query's
  // descriptor now reads other text.
  int replaced = 0;
  for (int fd = 3; fd < 1024; ++fd) {
    char target[256] = {};
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0 || std::string(target, n) != "/proc/meminfo") continue;
    const int other = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(other, 0);
    ASSERT_EQ(::dup2(other, fd), fd);
    ::close(other);
    ++replaced;
  }
  ASSERT_GT(replaced, 0) << "the query keeps no descriptor of /proc/meminfo";
  EXPECT_TRUE(Near(internal::HostAvailableBytes(), MemAvailableNow()));
}

TEST(HostDeviceTest, AllocatesAlignedMemoryItOwns) {
  HostDevice host;
  EXPECT_EQ(host.device(), Device::Host());
  for (size_t alignment : {1, 8, 64, 256, 4096}) {
    ASSERT_OK_AND_ASSIGN(void* p, host.Allocate(100, alignment));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u) << alignment;
    EXPECT_TRUE(host.Owns(p, 100));
    std::memset(p, 0xab, 100);  // ordinary memory, touchable without a scope
    host.Free(p);
    EXPECT_FALSE(host.Owns(p, 1));
  }
  EXPECT_EQ(host.live_allocations(), 0u);
}

TEST(HostDeviceTest, OwnsChecksTheWholeRange) {
  HostDevice host;
  ASSERT_OK_AND_ASSIGN(void* p, host.Allocate(64, 64));
  char* c = static_cast<char*>(p);
  EXPECT_TRUE(host.Owns(c, 64));
  EXPECT_TRUE(host.Owns(c + 63, 1));
  EXPECT_TRUE(host.Owns(c + 10, 0));
  EXPECT_FALSE(host.Owns(c + 60, 8));  // straddles the end
  EXPECT_FALSE(host.Owns(c + 64, 1));  // just past the end
  EXPECT_FALSE(host.Owns(c - 1, 2));   // starts before
  EXPECT_FALSE(host.Owns(c, SIZE_MAX));
  int on_stack = 0;
  EXPECT_FALSE(host.Owns(&on_stack, sizeof(on_stack)));
  EXPECT_FALSE(host.Owns(nullptr, 0));
  host.Free(p);
}

TEST(HostDeviceTest, RejectsBadAllocationRequests) {
  HostDevice host;
  EXPECT_THAT(host.Allocate(0, 8), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("host")));
  EXPECT_THAT(host.Allocate(8, 3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alignment 3")));
  EXPECT_THAT(host.Allocate(8, 8192),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alignment 8192")));
  EXPECT_THAT(host.Allocate(SIZE_MAX - 2, 64),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("host")));
  EXPECT_EQ(host.live_allocations(), 0u);
}

TEST(HostDeviceTest, AllocationLimitFailsLaterAllocations) {
  HostDevice host;
  host.set_allocation_limit(2);
  ASSERT_OK_AND_ASSIGN(void* a, host.Allocate(16, 8));
  ASSERT_OK_AND_ASSIGN(void* b, host.Allocate(16, 8));
  EXPECT_THAT(host.Allocate(16, 8),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("host")));
  EXPECT_THAT(host.Allocate(16, 8), StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("")));
  host.set_allocation_limit(-1);
  ASSERT_OK_AND_ASSIGN(void* c, host.Allocate(16, 8));
  host.Free(a);
  host.Free(b);
  host.Free(c);
}

TEST(HostDeviceTest, FreeIgnoresNullAndForeignPointers) {
  HostDevice host;
  ASSERT_OK_AND_ASSIGN(void* p, host.Allocate(32, 8));
  int other = 0;
  host.Free(nullptr);
  host.Free(&other);
  host.Free(static_cast<char*>(p) + 1);  // not the start of an allocation
  EXPECT_EQ(host.live_allocations(), 1u);
  EXPECT_TRUE(host.Owns(p, 32));
  host.Free(p);
  EXPECT_EQ(host.live_allocations(), 0u);
}

TEST(HostDeviceTest, CopiesAreCounted) {
  HostDevice host;
  std::vector<int32_t> a = {1, 2, 3, 4}, b(4, 0), c(4, 0);
  ASSERT_OK(host.CopyHostToDevice(b.data(), a.data(), 16));
  EXPECT_EQ(b, a);
  ASSERT_OK(host.CopyDeviceToHost(c.data(), b.data(), 8));
  EXPECT_THAT(c, ElementsAre(1, 2, 0, 0));
  ASSERT_OK(host.CopyDeviceToDevice(c.data() + 2, a.data() + 2, 8));
  EXPECT_EQ(c, a);
  ASSERT_OK(host.Synchronize());
  DeviceCounters counters = host.counters();
  EXPECT_EQ(counters.h2d_copies, 1u);
  EXPECT_EQ(counters.h2d_bytes, 16u);
  EXPECT_EQ(counters.d2h_copies, 1u);
  EXPECT_EQ(counters.d2h_bytes, 8u);
  EXPECT_EQ(counters.d2d_copies, 1u);
  EXPECT_EQ(counters.d2d_bytes, 8u);
  host.ResetCounters();
  EXPECT_EQ(host.counters().h2d_copies, 0u);
}

TEST(HostDeviceTest, CountsAllocationsAndLiveBytes) {
  HostDevice host;
  ASSERT_OK_AND_ASSIGN(void* a, host.Allocate(100, 8));
  ASSERT_OK_AND_ASSIGN(void* b, host.Allocate(28, 8));
  EXPECT_EQ(host.counters().allocations, 2u);
  EXPECT_EQ(host.counters().allocated_bytes, 128u);
  host.ResetCounters();
  EXPECT_EQ(host.counters().allocations, 0u);
  EXPECT_EQ(host.counters().allocated_bytes, 128u);  // a gauge, not reset
  host.Free(a);
  EXPECT_EQ(host.counters().allocated_bytes, 28u);
  host.Free(b);
  EXPECT_EQ(host.counters().allocated_bytes, 0u);
}

TEST(HostDeviceTest, NullPointerCopyIsAnError) {
  HostDevice host;
  int x = 0;
  EXPECT_THAT(host.CopyHostToDevice(nullptr, &x, 4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null")));
  EXPECT_OK(host.CopyHostToDevice(nullptr, nullptr, 0));  // nothing to copy
  EXPECT_EQ(host.counters().h2d_copies, 0u);
}

TEST(HostDeviceTest, ZeroClearsMemoryWithoutCountingACopy) {
  HostDevice host;
  std::vector<uint8_t> bytes(100, 0xff);
  ASSERT_OK(host.Zero(bytes.data() + 10, 80));
  for (size_t i = 0; i < bytes.size(); ++i) {
    EXPECT_EQ(bytes[i], (i >= 10 && i < 90) ? 0 : 0xff) << i;
  }
  EXPECT_EQ(host.counters().h2d_copies, 0u);
}

// Naive reference: element (i0, ..., ik) of a row-major dense tensor reads the source at
// sum(i_d * stride_d).
std::vector<int32_t> NaiveGather(const std::vector<int32_t>& src, std::vector<int64_t> sizes,
                                 std::vector<int64_t> strides, int64_t base) {
  int64_t count = 1;
  for (int64_t s : sizes) count *= s;
  std::vector<int32_t> out;
  for (int64_t linear = 0; linear < count; ++linear) {
    int64_t rest = linear, offset = base;
    for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
      offset += (rest % sizes[d]) * strides[d];
      rest /= sizes[d];
    }
    out.push_back(src[offset]);
  }
  return out;
}

TEST(HostDeviceTest, StridedCopyOfATransposedSource) {
  HostDevice host;
  // A 3x4 row-major matrix m; the source is m^T (4x3) viewed through strides {1, 4}.
  std::vector<int32_t> m(12);
  std::iota(m.begin(), m.end(), 0);
  const int64_t sizes[] = {4, 3};
  const int64_t strides[] = {1, 4};
  StridedLayout layout{2, sizes, strides, sizeof(int32_t)};
  std::vector<int32_t> out(12, -1);
  ASSERT_OK(host.CopyHostStridedToDevice(out.data(), m.data(), layout));
  EXPECT_THAT(out, ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
  EXPECT_EQ(host.counters().h2d_copies, 1u);
  EXPECT_EQ(host.counters().h2d_bytes, 48u);
}

TEST(HostDeviceTest, StridedCopyOfDenseSourceIsExact) {
  HostDevice host;
  std::vector<int32_t> m(24);
  std::iota(m.begin(), m.end(), 100);
  const int64_t sizes[] = {2, 1, 3, 4};
  const int64_t strides[] = {12, 999, 4, 1};  // size-1 dimension: its stride does not matter
  std::vector<int32_t> out(24, -1);
  ASSERT_OK(host.CopyHostStridedToDevice(out.data(), m.data(),
                                         StridedLayout{4, sizes, strides, 4}));
  EXPECT_EQ(out, m);
}

TEST(HostDeviceTest, StridedCopyOfSlicedSources) {
  HostDevice host;
  // A 4x5x6 tensor t; sources are slices of it.
  std::vector<int32_t> t(120);
  std::iota(t.begin(), t.end(), 0);
  struct Case {
    std::vector<int64_t> sizes, strides;
    int64_t base;
  };
  const Case cases[] = {
      {{4, 5, 3}, {30, 6, 1}, 2},          // t[:, :, 2:5]: rows of 3
      {{2, 5, 6}, {30, 6, 1}, 30},         // t[1:3]: dense block
      {{4, 2, 3}, {30, 12, 2}, 1},         // t[:, ::2 (2 of them), 1::2]
      {{6, 4}, {1, 30}, 6},                // t[:, 1, :] transposed
      {{3}, {-6}, 18},                     // negative stride: t[0, 3::-1 (3), 0]
      {{2, 2, 2, 2, 2}, {60, 30, 12, 6, 2}, 0},
  };
  for (const Case& c : cases) {
    std::vector<int32_t> expected = NaiveGather(t, c.sizes, c.strides, c.base);
    std::vector<int32_t> out(expected.size(), -1);
    StridedLayout layout{static_cast<int32_t>(c.sizes.size()), c.sizes.data(), c.strides.data(),
                         sizeof(int32_t)};
    ASSERT_OK(host.CopyHostStridedToDevice(out.data(), t.data() + c.base, layout));
    EXPECT_EQ(out, expected) << "case with base " << c.base;
  }
}

TEST(HostDeviceTest, StridedCopyOfWideElements) {
  HostDevice host;
  // 12-byte elements (no specialized path), transposed 2x3 -> 3x2.
  struct Elem {
    int32_t a, b, c;
  };
  std::vector<Elem> src(6);
  for (int i = 0; i < 6; ++i) src[i] = {i, 10 * i, 100 * i};
  const int64_t sizes[] = {3, 2};
  const int64_t strides[] = {1, 3};
  std::vector<Elem> out(6);
  ASSERT_OK(host.CopyHostStridedToDevice(out.data(), src.data(),
                                         StridedLayout{2, sizes, strides, sizeof(Elem)}));
  const int order[] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(out[i].a, order[i]);
    EXPECT_EQ(out[i].c, 100 * order[i]);
  }
}

TEST(HostDeviceTest, StridedCopyScalarAndEmpty) {
  HostDevice host;
  int64_t scalar = 42, out = 0;
  ASSERT_OK(host.CopyHostStridedToDevice(&out, &scalar, StridedLayout{0, nullptr, nullptr, 8}));
  EXPECT_EQ(out, 42);
  const int64_t sizes[] = {3, 0};
  const int64_t strides[] = {1, 1};
  ASSERT_OK(host.CopyHostStridedToDevice(nullptr, nullptr, StridedLayout{2, sizes, strides, 4}));
  EXPECT_EQ(host.counters().h2d_copies, 1u);  // the empty copy is not counted
}

TEST(HostDeviceTest, StridedCopyRejectsMalformedLayouts) {
  HostDevice host;
  int32_t buffer[4] = {};
  const int64_t negative[] = {-1, 2};
  const int64_t strides[] = {2, 1};
  EXPECT_THAT(host.CopyHostStridedToDevice(buffer, buffer, StridedLayout{2, negative, strides, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative size")));
  const int64_t sizes[] = {2, 2};
  EXPECT_THAT(host.CopyHostStridedToDevice(buffer, buffer, StridedLayout{2, sizes, strides, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("element_size")));
  EXPECT_THAT(host.CopyHostStridedToDevice(buffer, buffer, StridedLayout{-1, sizes, strides, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank")));
  EXPECT_THAT(host.CopyHostStridedToDevice(buffer, buffer, StridedLayout{2, nullptr, nullptr, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 2")));
  const int64_t huge[] = {INT64_MAX, INT64_MAX};
  EXPECT_THAT(host.CopyHostStridedToDevice(buffer, buffer, StridedLayout{2, huge, strides, 4}),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("overflow")));
  EXPECT_EQ(host.counters().h2d_copies, 0u);
}

TEST(HostDeviceTest, DestructorFreesWhatIsLeft) {
  // Under ASan/LSan a leak here fails the run; without it this checks nothing crashes.
  auto host = std::make_unique<HostDevice>();
  ASSERT_OK(host->Allocate(1024, 64).status());
  ASSERT_OK(host->Allocate(10, 8).status());
  EXPECT_EQ(host->live_allocations(), 2u);
  host.reset();
}

}  // namespace
}  // namespace ferry
