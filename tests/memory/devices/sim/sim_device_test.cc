#include "ferry/memory/devices/sim/sim_device.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/memory/devices/host/host_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

int ReadByte(const void* p) { return *static_cast<const volatile char*>(p); }
void WriteByte(void* p, char value) { *static_cast<volatile char*>(p) = value; }

// Reads `n` int32 from sim memory through the device (so the test itself never opens a scope).
std::vector<int32_t> ReadBack(SimDevice& sim, const void* p, size_t n) {
  std::vector<int32_t> out(n, -1);
  EXPECT_OK(sim.CopyDeviceToHost(out.data(), p, n * sizeof(int32_t)));
  return out;
}

TEST(SimDeviceTest, AllocatesPageBackedMemoryItOwns) {
  SimDevice sim(2);
  EXPECT_EQ(sim.device(), Device::Sim(2));
  EXPECT_TRUE(sim.guarded());
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(100, 4096));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  char* c = static_cast<char*>(p);
  EXPECT_TRUE(sim.Owns(p, 100));
  EXPECT_TRUE(sim.Owns(c + 99, 1));
  EXPECT_FALSE(sim.Owns(c + 90, 20));   // straddles the end of the request
  EXPECT_FALSE(sim.Owns(c + 100, 1));   // inside the page, past the request
  EXPECT_FALSE(sim.Owns(c - 1, 1));
  int on_stack = 0;
  EXPECT_FALSE(sim.Owns(&on_stack, sizeof(on_stack)));
  EXPECT_EQ(sim.live_allocations(), 1u);
  EXPECT_EQ(sim.counters().allocations, 1u);
  EXPECT_EQ(sim.counters().allocated_bytes, 100u);
  sim.Free(p);
  EXPECT_FALSE(sim.Owns(p, 1));
  EXPECT_EQ(sim.live_allocations(), 0u);
  EXPECT_EQ(sim.counters().allocated_bytes, 0u);
}

TEST(SimDeviceTest, EveryAllocationIsItsOwnMapping) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* a, sim.Allocate(8, 8));
  ASSERT_OK_AND_ASSIGN(void* b, sim.Allocate(8, 8));
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % page, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % page, 0u);
  EXPECT_NE(a, b);
  sim.Free(a);
  sim.Free(b);
}

TEST(SimDeviceTest, DevicesDoNotOwnEachOthersMemory) {
  SimDevice sim0(0), sim1(1);
  HostDevice host;
  ASSERT_OK_AND_ASSIGN(void* p, sim0.Allocate(64, 64));
  EXPECT_TRUE(sim0.Owns(p, 64));
  EXPECT_FALSE(sim1.Owns(p, 64));
  EXPECT_FALSE(host.Owns(p, 64));
  sim0.Free(p);
}

TEST(SimDeviceTest, RejectsBadAllocationRequests) {
  SimDevice sim(0);
  EXPECT_THAT(sim.Allocate(0, 8), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sim:0")));
  EXPECT_THAT(sim.Allocate(8, 12),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alignment 12")));
  EXPECT_THAT(sim.Allocate(SIZE_MAX - 10, 8),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("sim:0")));
  EXPECT_EQ(sim.live_allocations(), 0u);
}

TEST(SimDeviceTest, CopiesInAllDirectionsAreCounted) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* a, sim.Allocate(16, 16));
  ASSERT_OK_AND_ASSIGN(void* b, sim.Allocate(16, 16));
  const int32_t in[4] = {7, 8, 9, 10};
  ASSERT_OK(sim.CopyHostToDevice(a, in, 16));
  ASSERT_OK(sim.CopyDeviceToDevice(b, static_cast<char*>(a) + 8, 8));
  ASSERT_OK(sim.CopyDeviceToDevice(static_cast<char*>(b) + 8, a, 8));
  int32_t out[4] = {};
  ASSERT_OK(sim.CopyDeviceToHost(out, b, 16));
  ASSERT_OK(sim.Synchronize());
  EXPECT_THAT(out, ElementsAre(9, 10, 7, 8));
  DeviceCounters c = sim.counters();
  EXPECT_EQ(c.h2d_copies, 1u);
  EXPECT_EQ(c.h2d_bytes, 16u);
  EXPECT_EQ(c.d2d_copies, 2u);
  EXPECT_EQ(c.d2d_bytes, 16u);
  EXPECT_EQ(c.d2h_copies, 1u);
  EXPECT_EQ(c.d2h_bytes, 16u);
  sim.ResetCounters();
  EXPECT_EQ(sim.counters().h2d_copies, 0u);
  EXPECT_EQ(sim.counters().d2d_bytes, 0u);
  EXPECT_EQ(sim.counters().allocated_bytes, 32u);
  EXPECT_FALSE(sim.accessible());  // every copy closed the scope it opened
  sim.Free(a);
  sim.Free(b);
}

TEST(SimDeviceTest, ZeroByteCopiesAreNoOps) {
  SimDevice sim(0);
  EXPECT_OK(sim.CopyHostToDevice(nullptr, nullptr, 0));
  EXPECT_OK(sim.CopyDeviceToHost(nullptr, nullptr, 0));
  EXPECT_EQ(sim.counters().h2d_copies + sim.counters().d2h_copies, 0u);
}

TEST(SimDeviceTest, StridedCopyGathersTransposedAndSlicedSources) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* dst, sim.Allocate(48, 64));
  // m is 3x4 row-major; its transpose (4x3) has strides {1, 4}.
  std::vector<int32_t> m(12);
  std::iota(m.begin(), m.end(), 0);
  const int64_t t_sizes[] = {4, 3};
  const int64_t t_strides[] = {1, 4};
  ASSERT_OK(sim.CopyHostStridedToDevice(dst, m.data(), StridedLayout{2, t_sizes, t_strides, 4}));
  EXPECT_THAT(ReadBack(sim, dst, 12), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
  // m[:, 1:3] is 3x2 with strides {4, 1}.
  const int64_t s_sizes[] = {3, 2};
  const int64_t s_strides[] = {4, 1};
  ASSERT_OK(
      sim.CopyHostStridedToDevice(dst, m.data() + 1, StridedLayout{2, s_sizes, s_strides, 4}));
  EXPECT_THAT(ReadBack(sim, dst, 6), ElementsAre(1, 2, 5, 6, 9, 10));
  // A dense source takes the fast path; same bytes.
  const int64_t d_sizes[] = {3, 4};
  const int64_t d_strides[] = {4, 1};
  ASSERT_OK(sim.CopyHostStridedToDevice(dst, m.data(), StridedLayout{2, d_sizes, d_strides, 4}));
  EXPECT_EQ(ReadBack(sim, dst, 12), m);
  EXPECT_EQ(sim.counters().h2d_copies, 3u);
  EXPECT_EQ(sim.counters().h2d_bytes, 48u + 24u + 48u);
  sim.Free(dst);
}

TEST(SimDeviceTest, StridedCopyRefusesADestinationTooSmall) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* dst, sim.Allocate(40, 64));
  std::vector<int32_t> m(12, 1);
  const int64_t sizes[] = {3, 4};
  const int64_t strides[] = {4, 1};
  EXPECT_THAT(sim.CopyHostStridedToDevice(dst, m.data(), StridedLayout{2, sizes, strides, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("sim:0"), HasSubstr("48 bytes"))));
  EXPECT_EQ(sim.counters().h2d_copies, 0u);
  sim.Free(dst);
}

TEST(SimDeviceTest, CopyFromAnotherSimDevice) {
  SimDevice sim0(0), sim1(1);
  ASSERT_OK_AND_ASSIGN(void* src, sim0.Allocate(16, 16));
  ASSERT_OK_AND_ASSIGN(void* dst, sim1.Allocate(16, 16));
  const int32_t in[4] = {1, -2, 3, -4};
  ASSERT_OK(sim0.CopyHostToDevice(src, in, 16));
  sim0.ResetCounters();
  ASSERT_OK(sim1.CopyFromPeer(dst, sim0, src, 16));
  EXPECT_THAT(ReadBack(sim1, dst, 4), ElementsAre(1, -2, 3, -4));
  EXPECT_EQ(sim1.counters().d2d_copies, 1u);
  EXPECT_EQ(sim1.counters().d2d_bytes, 16u);
  EXPECT_EQ(sim0.counters().d2h_copies, 0u);  // counted once, on the destination
  EXPECT_EQ(sim0.scope_depth(), 0);
  EXPECT_EQ(sim1.scope_depth(), 0);
  sim0.Free(src);
  sim1.Free(dst);
}

TEST(SimDeviceTest, CopyFromPeerRefusesASourceThePeerDoesNotOwn) {
  SimDevice sim0(0), sim1(1);
  ASSERT_OK_AND_ASSIGN(void* on1, sim1.Allocate(16, 16));
  ASSERT_OK_AND_ASSIGN(void* dst, sim1.Allocate(16, 16));
  // The source is sim:1's memory, claimed to be sim:0's.
  EXPECT_THAT(sim1.CopyFromPeer(dst, sim0, on1, 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("from sim:0"), HasSubstr("not memory of sim:0"))));
  int32_t host[4] = {};
  EXPECT_THAT(sim1.CopyFromPeer(dst, sim0, host, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not memory of sim:0")));
  EXPECT_EQ(sim1.counters().d2d_copies, 0u);
  sim1.Free(on1);
  sim1.Free(dst);
}

TEST(SimDeviceTest, CopyFromTheHostPeerIsAHostToDeviceCopy) {
  SimDevice sim(0);
  HostDevice host;
  ASSERT_OK_AND_ASSIGN(void* dst, sim.Allocate(8, 8));
  const int32_t in[2] = {5, 6};
  ASSERT_OK(sim.CopyFromPeer(dst, host, in, 8));
  EXPECT_THAT(ReadBack(sim, dst, 2), ElementsAre(5, 6));
  EXPECT_EQ(sim.counters().h2d_copies, 1u);
  // And the host receiving from a sim peer is that device's d2h.
  int32_t out[2] = {};
  ASSERT_OK(host.CopyFromPeer(out, sim, dst, 8));
  EXPECT_THAT(out, ElementsAre(5, 6));
  EXPECT_EQ(sim.counters().d2h_copies, 2u);  // ReadBack and CopyFromPeer
  sim.Free(dst);
}

// A device whose memory the host may not read directly (as CUDA's): it only moves bytes through
// its own copy calls.
class OpaqueDevice final : public DeviceRuntime {
 public:
  Device device() const override { return Device::Cuda(0); }
  absl::StatusOr<void*> Allocate(size_t, size_t) override { return memory_.data(); }
  void Free(void*) override {}
  bool Owns(const void* p, size_t bytes) const override {
    auto* c = static_cast<const char*>(p);
    return c >= memory_.data() && c + bytes <= memory_.data() + memory_.size();
  }
  absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) override {
    if (!Owns(src, bytes)) return absl::InvalidArgumentError("cuda:0: not mine");
    std::memcpy(dst, src, bytes);
    ++d2h_;
    return absl::OkStatus();
  }
  absl::Status CopyDeviceToDevice(void*, const void*, size_t) override {
    return absl::UnimplementedError("");
  }
  absl::Status CopyHostStridedToDevice(void*, const void*, const StridedLayout&) override {
    return absl::UnimplementedError("");
  }
  absl::Status CopyFromPeer(void*, DeviceRuntime&, const void*, size_t) override {
    return absl::UnimplementedError("");
  }
  absl::Status Zero(void*, size_t) override { return absl::UnimplementedError(""); }
  absl::Status Synchronize() override {
    ++syncs_;
    return absl::OkStatus();
  }
  DeviceCounters counters() const override { return {}; }
  void ResetCounters() override {}

  std::vector<char> memory_ = std::vector<char>(64, 0);
  int d2h_ = 0;
  int syncs_ = 0;
};

TEST(SimDeviceTest, CopyFromAnOpaquePeerUsesThePeersCopy) {
  SimDevice sim(0);
  OpaqueDevice cuda;
  std::memcpy(cuda.memory_.data(), "abcdefgh", 8);
  ASSERT_OK_AND_ASSIGN(void* dst, sim.Allocate(8, 8));
  ASSERT_OK(sim.CopyFromPeer(dst, cuda, cuda.memory_.data(), 8));
  EXPECT_EQ(cuda.d2h_, 1);
  EXPECT_GE(cuda.syncs_, 1);
  char out[9] = {};
  ASSERT_OK(sim.CopyDeviceToHost(out, dst, 8));
  EXPECT_STREQ(out, "abcdefgh");
  EXPECT_EQ(sim.counters().d2d_copies, 1u);
  sim.Free(dst);
}

TEST(SimDeviceTest, CopiesRefuseRangesTheDeviceDoesNotOwn) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(16, 16));
  int32_t host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int32_t host_copy[8];
  std::memcpy(host_copy, host, sizeof(host));
  // A host pointer posing as device memory, on either side.
  EXPECT_THAT(sim.CopyHostToDevice(host, host_copy, 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("sim:0"), HasSubstr("destination"),
                             HasSubstr("not memory of sim:0"))));
  EXPECT_THAT(sim.CopyDeviceToHost(host_copy, host, 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("source"), HasSubstr("not memory of sim:0"))));
  EXPECT_THAT(sim.CopyDeviceToDevice(p, host, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not memory of sim:0")));
  EXPECT_THAT(sim.CopyDeviceToDevice(host, p, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not memory of sim:0")));
  // Straddling the end of the allocation.
  EXPECT_THAT(sim.CopyHostToDevice(static_cast<char*>(p) + 8, host, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("16 bytes")));
  // Device memory posing as host memory.
  ASSERT_OK_AND_ASSIGN(void* q, sim.Allocate(16, 16));
  EXPECT_THAT(sim.CopyHostToDevice(p, q, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not host memory")));
  EXPECT_THAT(sim.CopyDeviceToHost(q, p, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not host memory")));
  // Nothing was written and nothing counted.
  EXPECT_EQ(std::memcmp(host, host_copy, sizeof(host)), 0);
  DeviceCounters c = sim.counters();
  EXPECT_EQ(c.h2d_copies + c.d2h_copies + c.d2d_copies, 0u);
  EXPECT_THAT(ReadBack(sim, p, 4), ElementsAre(0, 0, 0, 0));
  sim.Free(p);
  sim.Free(q);
}

// Unguarded copies into the allocation the previous copy used skip the map lookups; every range
// check must still hold once that shortcut is warm.
TEST(SimDeviceTest, UnguardedCopiesStillCheckRangesAfterFastCopies) {
  SimDevice sim(0, SimDeviceOptions{.guard = false});
  SimDevice other(1, SimDeviceOptions{.guard = false});
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(64, 64));
  ASSERT_OK_AND_ASSIGN(void* q, sim.Allocate(64, 64));
  ASSERT_OK_AND_ASSIGN(void* r, other.Allocate(64, 64));
  int32_t host[16];
  std::iota(host, host + 16, 1);
  ASSERT_OK(sim.CopyHostToDevice(p, host, 64));  // warms the shortcut on p
  ASSERT_OK(sim.CopyHostToDevice(p, host, 64));
  // Past the end of p.
  EXPECT_THAT(sim.CopyHostToDevice(static_cast<char*>(p) + 32, host, 64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not memory of sim:0")));
  EXPECT_THAT(sim.CopyDeviceToHost(host, static_cast<char*>(p) + 8, 64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not memory of sim:0")));
  // Device memory as the host side, and host memory as the device side.
  EXPECT_THAT(sim.CopyHostToDevice(p, q, 64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not host memory")));
  EXPECT_THAT(sim.CopyDeviceToHost(q, p, 64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not host memory")));
  EXPECT_THAT(sim.CopyDeviceToDevice(p, host, 64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not memory of sim:0")));
  // From a peer: a source the peer does not own, after a fast peer copy.
  ASSERT_OK(other.CopyFromPeer(r, sim, p, 64));
  ASSERT_OK(other.CopyFromPeer(r, sim, p, 64));
  EXPECT_THAT(other.CopyFromPeer(r, sim, host, 64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not memory of sim:0")));
  // A valid copy into the other allocation, then the data everywhere.
  ASSERT_OK(sim.CopyDeviceToDevice(q, p, 64));
  int32_t out[16] = {};
  ASSERT_OK(sim.CopyDeviceToHost(out, q, 64));
  EXPECT_EQ(std::memcmp(out, host, 64), 0);
  ASSERT_OK(other.CopyDeviceToHost(out, r, 64));
  EXPECT_EQ(std::memcmp(out, host, 64), 0);
  EXPECT_EQ(sim.counters().h2d_copies, 2u);
  EXPECT_EQ(sim.counters().d2h_copies, 1u);
  EXPECT_EQ(sim.counters().d2d_copies, 1u);
  EXPECT_EQ(other.counters().d2d_copies, 2u);
  // Freed memory is not memory of the device any more, even if it was the last one used.
  sim.Free(q);
  EXPECT_THAT(sim.CopyDeviceToHost(out, q, 64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not memory of sim:0")));
  sim.Free(p);
  other.Free(r);
}

TEST(SimDeviceTest, ScopesNestAndGuardAgainWhenTheLastCloses) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(64, 64));
  EXPECT_FALSE(sim.accessible());
  {
    DeviceScope outer(sim);
    WriteByte(p, 1);
    {
      DeviceScope inner(sim);
      EXPECT_EQ(sim.scope_depth(), 2);
      WriteByte(p, 2);
    }
    EXPECT_TRUE(sim.accessible());
    EXPECT_EQ(ReadByte(p), 2);  // still inside the outer scope
  }
  EXPECT_FALSE(sim.accessible());
  EXPECT_EQ(sim.scope_depth(), 0);
  sim.ExitScope();  // unbalanced: ignored
  EXPECT_EQ(sim.scope_depth(), 0);
  char out = 0;
  ASSERT_OK(sim.CopyDeviceToHost(&out, p, 1));
  EXPECT_EQ(out, 2);
  sim.Free(p);
}

TEST(SimDeviceTest, CopyInsideAnOpenScopeLeavesItOpen) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(4, 4));
  DeviceScope scope(sim);
  const int32_t v = 99;
  ASSERT_OK(sim.CopyHostToDevice(p, &v, 4));
  EXPECT_EQ(sim.scope_depth(), 1);
  EXPECT_EQ(*static_cast<volatile int32_t*>(p), 99);
  sim.Free(p);
}

TEST(SimDeviceTest, UnguardedMemoryIsAlwaysAccessible) {
  SimDevice sim(0, SimDeviceOptions{.guard = false});
  EXPECT_FALSE(sim.guarded());
  EXPECT_TRUE(sim.accessible());
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(64, 64));
  WriteByte(p, 5);
  EXPECT_EQ(ReadByte(p), 5);
  sim.EnterScope();
  sim.ExitScope();
  EXPECT_EQ(ReadByte(p), 5);
  sim.Free(p);
}

TEST(SimDeviceTest, ZeroWritesZerosWithoutCountingACopy) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(16, 16));
  const int32_t ones[4] = {1, 1, 1, 1};
  ASSERT_OK(sim.CopyHostToDevice(p, ones, 16));
  ASSERT_OK(sim.Zero(static_cast<char*>(p) + 4, 8));
  EXPECT_THAT(ReadBack(sim, p, 4), ElementsAre(1, 0, 0, 1));
  EXPECT_EQ(sim.counters().h2d_copies, 1u);
  int32_t host[4];
  EXPECT_THAT(sim.Zero(host, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not memory of sim:0")));
  sim.Free(p);
}

TEST(SimDeviceTest, AllocationLimitFailsLaterAllocations) {
  SimDevice sim(3);
  sim.set_allocation_limit(1);
  ASSERT_OK_AND_ASSIGN(void* a, sim.Allocate(8, 8));
  EXPECT_THAT(sim.Allocate(8, 8),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("sim:3")));
  EXPECT_THAT(sim.Allocate(8, 8), StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("")));
  EXPECT_EQ(sim.live_allocations(), 1u);
  sim.set_allocation_limit(-1);
  ASSERT_OK_AND_ASSIGN(void* b, sim.Allocate(8, 8));
  sim.Free(a);
  sim.Free(b);
}

TEST(SimDeviceTest, CapacityLimitsLiveBytes) {
  SimDevice sim(0);
  sim.set_capacity_bytes(100);
  ASSERT_OK_AND_ASSIGN(void* a, sim.Allocate(60, 8));
  EXPECT_THAT(sim.Allocate(41, 8),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("sim:0"), HasSubstr("60 of 100 bytes"))));
  ASSERT_OK_AND_ASSIGN(void* b, sim.Allocate(40, 8));  // exactly full
  sim.Free(a);
  ASSERT_OK_AND_ASSIGN(void* c, sim.Allocate(60, 8));  // freed bytes are available again
  sim.Free(b);
  sim.Free(c);
}

TEST(SimDeviceTest, InjectedCopyFailure) {
  SimDevice sim(1);
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(4, 4));
  sim.set_copy_failure_after(2);
  int32_t v = 1, out = 0;
  ASSERT_OK(sim.CopyHostToDevice(p, &v, 4));
  // A copy refused for its range does not count as one of the successful copies.
  EXPECT_THAT(sim.CopyHostToDevice(&out, &v, 4), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("")));
  ASSERT_OK(sim.CopyDeviceToHost(&out, p, 4));
  EXPECT_EQ(out, 1);
  v = 2;
  EXPECT_THAT(sim.CopyHostToDevice(p, &v, 4),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("sim:1")));
  EXPECT_EQ(sim.scope_depth(), 0);
  // The failed copy wrote nothing and counted nothing; the next one succeeds again.
  EXPECT_EQ(sim.counters().h2d_copies, 1u);
  ASSERT_OK(sim.CopyDeviceToHost(&out, p, 4));
  EXPECT_EQ(out, 1);
  sim.Free(p);
}

TEST(SimDeviceTest, DestructorUnmapsWhatIsLeft) {
  auto sim = std::make_unique<SimDevice>(0);
  ASSERT_OK_AND_ASSIGN(void* p, sim->Allocate(1 << 20, 64));
  ASSERT_OK(sim->Zero(p, 1 << 20));
  sim.reset();
  // The mapping is gone: a fresh mapping may reuse the address, but nothing crashed.
  SUCCEED();
}

TEST(SimDeviceTest, AsSimDeviceFindsOnlySimRuntimes) {
  SimDevice sim(0);
  HostDevice host;
  EXPECT_EQ(AsSimDevice(&sim), &sim);
  EXPECT_EQ(AsSimDevice(&host), nullptr);
  EXPECT_EQ(AsSimDevice(nullptr), nullptr);
}

// Guard faults. Each death test builds its own device so the parent never faults.

TEST(SimDeviceDeathTest, ReadOutsideAScopeFaults) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(64, 64));
  EXPECT_DEATH({ (void)ReadByte(p); }, "");
  sim.Free(p);
}

TEST(SimDeviceDeathTest, WriteOutsideAScopeFaults) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(64, 64));
  EXPECT_DEATH(WriteByte(static_cast<char*>(p) + 63, 1), "");
  sim.Free(p);
}

TEST(SimDeviceDeathTest, FaultHandlerExplainsTheFault) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(64, 64));
  char* target = static_cast<char*>(p) + 40;
  const std::string expected = absl::StrCat(
      "ferry: sim:0 memory touched outside a device scope \\(address 0x",
      absl::Hex(reinterpret_cast<uintptr_t>(target)), "\\)");
  EXPECT_DEATH(
      {
        InstallSimGuardFaultHandler();
        WriteByte(target, 1);
      },
      expected);
  sim.Free(p);
}

TEST(SimDeviceDeathTest, FaultHandlerNamesTheDevice) {
  SimDevice sim(5);
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(64, 64));
  EXPECT_DEATH(
      {
        InstallSimGuardFaultHandler();
        (void)ReadByte(p);
      },
      "sim:5 memory touched outside a device scope");
  sim.Free(p);
}

TEST(SimDeviceDeathTest, AccessAfterTheLastScopeClosesFaults) {
  SimDevice sim(0);
  ASSERT_OK_AND_ASSIGN(void* p, sim.Allocate(64, 64));
  {
    DeviceScope outer(sim);
    { DeviceScope inner(sim); }
    WriteByte(p, 1);  // fine: the outer scope is still open
  }
  EXPECT_DEATH(WriteByte(p, 2), "");
  sim.Free(p);
}

TEST(SimDeviceDeathTest, AllocationMadeInsideAScopeIsGuardedAfterIt) {
  SimDevice sim(0);
  void* p = nullptr;
  {
    DeviceScope scope(sim);
    ASSERT_OK_AND_ASSIGN(p, sim.Allocate(64, 64));
    WriteByte(p, 3);  // accessible while the scope is open
    EXPECT_EQ(ReadByte(p), 3);
  }
  EXPECT_DEATH({ (void)ReadByte(p); }, "");
  sim.Free(p);
}

TEST(SimDeviceDeathTest, OtherFaultsStillCrash) {
  // With the handler installed, a fault outside sim memory goes to the default action, silently.
  EXPECT_DEATH(
      {
        InstallSimGuardFaultHandler();
        volatile uintptr_t unmapped = 16;
        WriteByte(reinterpret_cast<void*>(unmapped), 1);
      },
      "");
}

}  // namespace
}  // namespace ferry
