#include "ferry/memory/memory_planner.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

BufferRequest Req(size_t size, size_t alignment, int32_t first, int32_t last) {
  return BufferRequest{size, alignment, first, last};
}

bool Conflict(const BufferRequest& a, const BufferRequest& b) {
  return a.first_use <= b.last_use && b.first_use <= a.last_use;
}

// Naive lower bound: the largest per-step sum of live sizes.
size_t NaiveLowerBound(const std::vector<BufferRequest>& requests) {
  int32_t last = 0;
  for (const BufferRequest& r : requests) last = std::max(last, r.last_use);
  size_t peak = 0;
  for (int32_t step = 0; step <= last; ++step) {
    size_t live = 0;
    for (const BufferRequest& r : requests) {
      if (r.first_use <= step && step <= r.last_use) live += r.size;
    }
    peak = std::max(peak, live);
  }
  return peak;
}

// Naive O(n^2) versions of the two passes the header describes, written without any index
// structure, and the choice between them. Returns the arena size and fills `offsets`.
size_t NaivePass(const std::vector<BufferRequest>& requests, bool by_size, size_t top,
                 std::vector<size_t>* offsets) {
  std::vector<size_t> order;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].size > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return by_size ? requests[a].size > requests[b].size
                   : requests[a].first_use < requests[b].first_use;
  });
  offsets->assign(requests.size(), 0);
  std::vector<size_t> placed;
  size_t arena = 0;
  for (size_t i : order) {
    const BufferRequest& r = requests[i];
    const auto align_up = [&](size_t x) { return (x + r.alignment - 1) / r.alignment * r.alignment; };
    std::vector<std::pair<size_t, size_t>> taken;
    for (size_t j : placed) {
      if (Conflict(r, requests[j])) {
        taken.emplace_back((*offsets)[j], (*offsets)[j] + requests[j].size);
      }
    }
    std::sort(taken.begin(), taken.end());
    // Gaps as (begin, end) between the taken ranges.
    std::vector<std::pair<size_t, size_t>> gaps;
    size_t covered = 0;
    for (const auto& [begin, end] : taken) {
      if (begin > covered) gaps.emplace_back(covered, begin);
      covered = std::max(covered, end);
    }
    size_t offset = SIZE_MAX, best_gap = SIZE_MAX;
    for (const auto& [begin, end] : gaps) {
      if (align_up(begin) + r.size > end) continue;
      if (by_size) {
        offset = align_up(begin);
        break;
      }
      if (end - begin < best_gap) {
        best_gap = end - begin;
        offset = align_up(begin);
      }
    }
    if (!by_size && covered <= top && align_up(covered) + r.size <= top &&
        top - covered < best_gap) {
      offset = std::max(align_up(covered), (top - r.size) / r.alignment * r.alignment);
    }
    if (offset == SIZE_MAX) offset = align_up(covered);
    (*offsets)[i] = offset;
    arena = std::max(arena, offset + r.size);
    placed.push_back(i);
  }
  return arena;
}

std::vector<size_t> NaivePlan(const std::vector<BufferRequest>& requests) {
  const size_t bound = NaiveLowerBound(requests);
  std::vector<size_t> by_size, by_time;
  const size_t size_arena = NaivePass(requests, true, bound, &by_size);
  if (size_arena == bound) return by_size;
  const size_t time_arena = NaivePass(requests, false, bound, &by_time);
  return time_arena < size_arena ? by_time : by_size;
}

// Checks the plan's invariants pairwise.
void ExpectValidPlan(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  ASSERT_EQ(plan.offsets.size(), requests.size());
  size_t arena = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const BufferRequest& a = requests[i];
    EXPECT_EQ(plan.offsets[i] % a.alignment, 0u) << "request " << i;
    if (a.size == 0) {
      EXPECT_EQ(plan.offsets[i], 0u) << "request " << i;
      continue;
    }
    arena = std::max(arena, plan.offsets[i] + a.size);
    for (size_t j = i + 1; j < requests.size(); ++j) {
      const BufferRequest& b = requests[j];
      if (b.size == 0 || !Conflict(a, b)) continue;
      const bool disjoint = plan.offsets[i] + a.size <= plan.offsets[j] ||
                            plan.offsets[j] + b.size <= plan.offsets[i];
      EXPECT_TRUE(disjoint) << "requests " << i << " and " << j << " overlap";
    }
  }
  EXPECT_EQ(plan.arena_size, arena);
  EXPECT_GE(plan.arena_size, plan.lower_bound);
}

TEST(MemoryPlannerTest, NoRequests) {
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory({}));
  EXPECT_THAT(plan.offsets, IsEmpty());
  EXPECT_EQ(plan.arena_size, 0u);
  EXPECT_EQ(plan.lower_bound, 0u);
}

TEST(MemoryPlannerTest, DisjointLifetimesShareOffsetZero) {
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan,
                       PlanMemory({Req(10, 1, 0, 1), Req(20, 1, 2, 3), Req(30, 1, 4, 5)}));
  EXPECT_THAT(plan.offsets, ElementsAre(0, 0, 0));
  EXPECT_EQ(plan.arena_size, 30u);
  EXPECT_EQ(plan.lower_bound, 30u);
}

TEST(MemoryPlannerTest, OverlappingLifetimesAreStackedLargestFirst) {
  // All three are live at step 2.
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan,
                       PlanMemory({Req(10, 1, 0, 2), Req(20, 1, 1, 3), Req(30, 1, 2, 4)}));
  EXPECT_THAT(plan.offsets, ElementsAre(50, 30, 0));
  EXPECT_EQ(plan.arena_size, 60u);
  EXPECT_EQ(plan.lower_bound, 60u);
}

TEST(MemoryPlannerTest, TouchingEndpointsConflict) {
  // Intervals are inclusive: [0, 1] and [1, 2] are both live at step 1.
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory({Req(8, 1, 0, 1), Req(8, 1, 1, 2)}));
  EXPECT_THAT(plan.offsets, ElementsAre(0, 8));
  EXPECT_EQ(plan.lower_bound, 16u);
}

TEST(MemoryPlannerTest, AlignmentIsRespected) {
  // Live at once: 20 bytes, but the second cannot start before 16. Both passes give 26.
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory({Req(10, 16, 0, 1), Req(10, 16, 0, 1)}));
  EXPECT_THAT(plan.offsets, ElementsAre(0, 16));
  EXPECT_EQ(plan.arena_size, 26u);
  EXPECT_EQ(plan.lower_bound, 20u);
}

TEST(MemoryPlannerTest, AlignedRequestGoesBelowAnUnalignedOne) {
  // Largest first stacks 5 (aligned to 16) at 16: arena 21 > bound 15. In order of first use,
  // the 10-byte request sits against the bound at [5, 15) and the aligned one fits at 0.
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory({Req(10, 1, 0, 1), Req(5, 16, 0, 1)}));
  EXPECT_THAT(plan.offsets, ElementsAre(5, 0));
  EXPECT_EQ(plan.arena_size, 15u);
  EXPECT_EQ(plan.lower_bound, 15u);
}

TEST(MemoryPlannerTest, ChainOfFallingAndRisingSizesReachesTheBound) {
  // Value i lives [i, i + 1]. Largest first leaves 70 between 80 at [0, 80) and 95 at
  // [100, 195): arena 265. The bound is 95 + 100 = 195; placing in order of first use,
  // alternately against the top (195) and the bottom, reaches it.
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan,
                       PlanMemory({Req(100, 1, 0, 1), Req(90, 1, 1, 2), Req(80, 1, 2, 3),
                                   Req(70, 1, 3, 4), Req(95, 1, 4, 5), Req(100, 1, 5, 6)}));
  EXPECT_THAT(plan.offsets, ElementsAre(95, 0, 115, 0, 100, 0));
  EXPECT_EQ(plan.arena_size, 195u);
  EXPECT_EQ(plan.lower_bound, 195u);
}

TEST(MemoryPlannerTest, ChainReusesFreedMemory) {
  // 100 is placed first at 0; 60 does not meet it and shares 0; 50 meets both and goes above
  // 100; 40 meets only 60 and goes right after it.
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory({Req(100, 1, 0, 1), Req(50, 1, 1, 2),
                                                    Req(60, 1, 2, 3), Req(40, 1, 3, 4)}));
  EXPECT_THAT(plan.offsets, ElementsAre(0, 100, 0, 60));
  EXPECT_EQ(plan.arena_size, 150u);
  EXPECT_EQ(plan.lower_bound, 150u);
}

TEST(MemoryPlannerTest, SmallRequestFillsAGapBetweenPlacedOnes) {
  // A: 100 @ 0; B: 90 meets A -> 100; C: 80 meets A -> 100; D: 50 meets B -> 0;
  // E: 30 at step 4 meets B [100, 190) and D [0, 50): the gap [50, 100) fits it.
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan,
                       PlanMemory({Req(100, 1, 0, 2), Req(90, 1, 2, 4), Req(80, 1, 0, 1),
                                   Req(50, 1, 3, 4), Req(30, 1, 4, 4)}));
  EXPECT_THAT(plan.offsets, ElementsAre(0, 100, 100, 0, 50));
  EXPECT_EQ(plan.arena_size, 190u);
  // Live bytes per step: 180, 180, 190, 140, 170.
  EXPECT_EQ(plan.lower_bound, 190u);
}

TEST(MemoryPlannerTest, ZeroSizeRequestsTakeNoSpace) {
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan,
                       PlanMemory({Req(0, 64, 0, 5), Req(16, 8, 0, 5), Req(0, 1, 3, 3)}));
  EXPECT_THAT(plan.offsets, ElementsAre(0, 0, 0));
  EXPECT_EQ(plan.arena_size, 16u);
  EXPECT_EQ(plan.lower_bound, 16u);
}

TEST(MemoryPlannerTest, TiesAreBrokenByIndex) {
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan,
                       PlanMemory({Req(8, 1, 0, 0), Req(8, 1, 0, 0), Req(8, 1, 0, 0)}));
  EXPECT_THAT(plan.offsets, ElementsAre(0, 8, 16));
}

TEST(MemoryPlannerTest, LowerBoundIsThePeakOfLiveBytes) {
  // Live per step: s0: 4; s1: 4 + 8 = 12; s2: 8 + 16 = 24; s3: 16 + 1 = 17; s4: 1; s5: 32.
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan,
                       PlanMemory({Req(4, 1, 0, 1), Req(8, 1, 1, 2), Req(16, 1, 2, 3),
                                   Req(1, 1, 3, 4), Req(32, 1, 5, 5)}));
  EXPECT_EQ(plan.lower_bound, 32u);
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan2,
                       PlanMemory({Req(4, 1, 0, 1), Req(8, 1, 1, 2), Req(16, 1, 2, 3),
                                   Req(1, 1, 3, 4), Req(20, 1, 5, 5)}));
  EXPECT_EQ(plan2.lower_bound, 24u);
}

TEST(MemoryPlannerTest, RejectsBadRequestsNamingThem) {
  EXPECT_THAT(PlanMemory({Req(8, 1, 0, 1), Req(8, 1, 3, 2)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("request 1"), HasSubstr("first_use 3"),
                             HasSubstr("last_use 2"))));
  EXPECT_THAT(PlanMemory({Req(8, 0, 0, 1)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("request 0"), HasSubstr("alignment 0"))));
  EXPECT_THAT(PlanMemory({Req(8, 1, 0, 1), Req(8, 1, 0, 1), Req(8, 24, 0, 1)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("request 2"), HasSubstr("alignment 24"))));
  EXPECT_THAT(PlanMemory({Req(8, 1, -1, 1)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("request 0"), HasSubstr("negative"))));
  // Zero-size requests are validated too.
  EXPECT_THAT(PlanMemory({Req(0, 3, 0, 0)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("request 0")));
}

TEST(MemoryPlannerTest, OverflowIsResourceExhausted) {
  const size_t half = SIZE_MAX / 2 + 1;
  EXPECT_THAT(PlanMemory({Req(half, 1, 0, 1), Req(half, 1, 1, 2)}),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("overflow")));
  // The live bytes fit (exactly SIZE_MAX), but no pass can place the second request: below the
  // first there are at most 4096 bytes, above it the aligned offset overflows.
  EXPECT_THAT(PlanMemory({Req(SIZE_MAX - 5000, 4096, 0, 0), Req(5000, 4096, 0, 0)}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("request 1"), HasSubstr("overflow"))));
  // Not conflicting: no overflow.
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory({Req(half, 1, 0, 0), Req(half, 1, 1, 1)}));
  EXPECT_THAT(plan.offsets, ElementsAre(0, 0));
  EXPECT_EQ(plan.arena_size, half);
}

TEST(MemoryPlannerTest, ExtremeStepsDoNotOverflow) {
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory({Req(8, 1, 0, INT32_MAX),
                                                    Req(8, 1, INT32_MAX, INT32_MAX)}));
  EXPECT_THAT(plan.offsets, ElementsAre(0, 8));
  EXPECT_EQ(plan.lower_bound, 16u);
}

std::vector<BufferRequest> RandomRequests(uint32_t seed, size_t n, int32_t steps,
                                          int32_t max_length) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> start(0, steps - 1);
  std::uniform_int_distribution<int32_t> length(0, max_length);
  std::uniform_int_distribution<size_t> size(0, 4096);
  std::uniform_int_distribution<int> log_alignment(0, 7);
  std::vector<BufferRequest> requests;
  for (size_t i = 0; i < n; ++i) {
    BufferRequest r;
    r.size = (i % 17 == 0) ? 0 : size(rng);
    r.alignment = size_t{1} << log_alignment(rng);
    r.first_use = start(rng);
    r.last_use = r.first_use + length(rng);
    requests.push_back(r);
  }
  return requests;
}

TEST(MemoryPlannerTest, RandomPlansNeverOverlapConflictingRequests) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    std::vector<BufferRequest> requests = RandomRequests(seed, 600, 200, seed * 5);
    ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(requests));
    ExpectValidPlan(requests, plan);
    EXPECT_EQ(plan.lower_bound, NaiveLowerBound(requests)) << "seed " << seed;
    EXPECT_EQ(plan.offsets, NaivePlan(requests)) << "seed " << seed;
  }
}

TEST(MemoryPlannerTest, RandomPlansWithLongLivedRequests) {
  std::vector<BufferRequest> requests = RandomRequests(99, 500, 300, 3);
  std::vector<BufferRequest> long_lived = RandomRequests(100, 40, 50, 250);
  requests.insert(requests.end(), long_lived.begin(), long_lived.end());
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(requests));
  ExpectValidPlan(requests, plan);
  EXPECT_EQ(plan.lower_bound, NaiveLowerBound(requests));
  EXPECT_EQ(plan.offsets, NaivePlan(requests));
}

// Requests of one size in order of first use (a chain of like layers) take a shortcut
// (PlanUniform); its plan must be the one the general route makes, and the naive planner's.
std::vector<BufferRequest> UniformRequests(uint32_t seed, size_t n, size_t size, size_t alignment,
                                           int32_t max_length) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> gap(0, 2);
  std::uniform_int_distribution<int32_t> length(0, max_length);
  std::vector<BufferRequest> requests;
  int32_t first = 0;
  for (size_t i = 0; i < n; ++i) {
    first += gap(rng);
    requests.push_back(Req(size, alignment, first, first + length(rng)));
  }
  return requests;
}

TEST(MemoryPlannerTest, RequestsOfOneSizeArePlannedAsByTheGreedyPasses) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const size_t size = seed % 3 == 0 ? 192 : 256;
    std::vector<BufferRequest> requests = UniformRequests(seed, 400, size, 64, seed % 4 * 6 + 1);
    if (seed % 2 == 0) requests[seed * 7].size = 0;  // empty requests take no slot
    ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(requests));
    ASSERT_OK_AND_ASSIGN(MemoryPlan general,
                         internal::PlanMemory(requests, /*allow_uniform_pass=*/false));
    ExpectValidPlan(requests, plan);
    EXPECT_EQ(plan.lower_bound, NaiveLowerBound(requests)) << "seed " << seed;
    EXPECT_EQ(plan.arena_size, plan.lower_bound) << "seed " << seed;
    EXPECT_EQ(plan.offsets, NaivePlan(requests)) << "seed " << seed;
    EXPECT_EQ(plan.offsets, general.offsets) << "seed " << seed;
    EXPECT_EQ(plan.arena_size, general.arena_size) << "seed " << seed;
  }
}

// Where the shortcut does not apply (a size that is not a multiple of the alignment, requests
// out of order of first use, mixed sizes), the plan is the general route's all the same; so it
// is where requests of one size are live at once in such numbers that the general route sweeps.
TEST(MemoryPlannerTest, RequestsTheShortcutDoesNotTakeArePlannedAsBefore) {
  std::vector<std::vector<BufferRequest>> cases = {
      UniformRequests(3, 300, 100, 64, 5),  // 100 is not a multiple of 64
      UniformRequests(4, 300, 256, 64, 5),
      UniformRequests(5, 300, 256, 64, 5),
  };
  std::reverse(cases[1].begin(), cases[1].end());  // last request first
  cases[2][150].size = 512;
  for (size_t c = 0; c < cases.size(); ++c) {
    ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(cases[c]));
    ASSERT_OK_AND_ASSIGN(MemoryPlan general,
                         internal::PlanMemory(cases[c], /*allow_uniform_pass=*/false));
    ExpectValidPlan(cases[c], plan);
    EXPECT_EQ(plan.offsets, NaivePlan(cases[c])) << "case " << c;
    EXPECT_EQ(plan.offsets, general.offsets) << "case " << c;
  }
  // At the budget of conflict visits (2^16 + 32 n), where the general route switches from the
  // greedy passes to the sweep, the shortcut switches with it: two inputs whose visits (per
  // request, the requests live at its first use, itself included) are just under or at the
  // budget and just over it.
  const size_t n = 600;
  const size_t budget = (size_t{1} << 16) + 32 * n;
  auto visits = [](const std::vector<BufferRequest>& requests) {
    size_t v = 0;
    for (const BufferRequest& a : requests) {
      for (const BufferRequest& b : requests) {
        v += b.first_use <= a.first_use && a.first_use <= b.last_use;
      }
    }
    return v;
  };
  bool under = false, over = false;
  for (uint32_t seed = 1; seed <= 4000 && !(under && over); ++seed) {
    std::vector<BufferRequest> requests = UniformRequests(seed, n, 256, 64, 330);
    const size_t v = visits(requests);
    const bool just_under = v <= budget && v + 100 > budget;
    const bool just_over = v > budget && v <= budget + 100;
    if ((!just_under || under) && (!just_over || over)) continue;
    under = under || just_under;
    over = over || just_over;
    ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(requests));
    ASSERT_OK_AND_ASSIGN(MemoryPlan general,
                         internal::PlanMemory(requests, /*allow_uniform_pass=*/false));
    EXPECT_EQ(plan.offsets, general.offsets) << "seed " << seed << ", " << v << " visits";
  }
  EXPECT_TRUE(under && over) << "no input found within 100 visits of the budget";
  // 3,000 nested lifetimes [i, 3000] of one size: 4.5 million conflict visits, over the budget.
  std::vector<BufferRequest> nested;
  for (int32_t i = 0; i < 3000; ++i) nested.push_back(Req(128, 64, i, 3000));
  // Three ended before request 101 starts: it has a free block of two slots (10, 11) and one of
  // one slot (50). The sweep takes the smallest block, the greedy passes the lowest offset.
  for (int i : {10, 11, 50}) nested[i].last_use = 100;
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(nested));
  ASSERT_OK_AND_ASSIGN(MemoryPlan general,
                       internal::PlanMemory(nested, /*allow_uniform_pass=*/false));
  ExpectValidPlan(nested, plan);
  EXPECT_EQ(plan.offsets, general.offsets);
  EXPECT_EQ(plan.arena_size, general.arena_size);
  EXPECT_EQ(plan.offsets[101], 50 * 128);  // the sweep's choice
}

TEST(MemoryPlannerTest, PlanningIsDeterministic) {
  std::vector<BufferRequest> requests = RandomRequests(7, 1000, 100, 10);
  ASSERT_OK_AND_ASSIGN(MemoryPlan a, PlanMemory(requests));
  ASSERT_OK_AND_ASSIGN(MemoryPlan b, PlanMemory(requests));
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.arena_size, b.arena_size);
}

// A chain of ops: value i is written at step i and read at step i + 1.
std::vector<BufferRequest> Chain(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> size(1, 64);
  std::vector<BufferRequest> requests;
  for (size_t i = 0; i < n; ++i) {
    requests.push_back(Req(size(rng) * 64, 64, static_cast<int32_t>(i),
                           static_cast<int32_t>(i + 1)));
  }
  return requests;
}

// Diamonds: x_k (step 3k) is read by b_k (step 3k + 1) and c_k (step 3k + 2); both are read by
// the op at step 3k + 3, which writes x_(k + 1).
std::vector<BufferRequest> Diamonds(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> size(1, 64);
  std::vector<BufferRequest> requests;
  for (size_t k = 0; k < n; ++k) {
    const int32_t s = static_cast<int32_t>(3 * k);
    requests.push_back(Req(4096, 64, s, s + 2));                  // x_k
    requests.push_back(Req(size(rng) * 64, 64, s + 1, s + 3));    // b_k
    requests.push_back(Req(size(rng) * 64, 64, s + 2, s + 3));    // c_k
  }
  return requests;
}

TEST(MemoryPlannerTest, ChainArenaIsCloseToTheLowerBound) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    std::vector<BufferRequest> requests = Chain(2000, seed);
    ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(requests));
    EXPECT_EQ(plan.lower_bound, NaiveLowerBound(requests));
    EXPECT_LE(static_cast<double>(plan.arena_size), 1.10 * static_cast<double>(plan.lower_bound))
        << "seed " << seed << ": arena " << plan.arena_size << ", bound " << plan.lower_bound;
  }
}

TEST(MemoryPlannerTest, DiamondArenaIsCloseToTheLowerBound) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    std::vector<BufferRequest> requests = Diamonds(700, seed);
    ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(requests));
    EXPECT_EQ(plan.lower_bound, NaiveLowerBound(requests));
    EXPECT_LE(static_cast<double>(plan.arena_size), 1.10 * static_cast<double>(plan.lower_bound))
        << "seed " << seed << ": arena " << plan.arena_size << ", bound " << plan.lower_bound;
  }
}

TEST(MemoryPlannerTest, PlansAHundredThousandRequests) {
  // Correctness at scale (its speed is measured in bench/): a long chain plus buffers that live
  // for the whole method, as state does.
  std::vector<BufferRequest> requests = Chain(100000, 3);
  for (int i = 0; i < 8; ++i) requests.push_back(Req(1 << 20, 64, 0, 100000));
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(requests));
  EXPECT_LE(static_cast<double>(plan.arena_size), 1.10 * static_cast<double>(plan.lower_bound));
  // The 8 long-lived buffers are the largest, so they are stacked at the bottom.
  for (int i = 0; i < 8; ++i) EXPECT_EQ(plan.offsets[100000 + i], static_cast<size_t>(i) << 20);
  // Neighbours in the chain never overlap.
  for (size_t i = 0; i + 1 < 100000; ++i) {
    const bool disjoint = plan.offsets[i] + requests[i].size <= plan.offsets[i + 1] ||
                          plan.offsets[i + 1] + requests[i + 1].size <= plan.offsets[i];
    ASSERT_TRUE(disjoint) << i;
  }
}

// Many requests live at once (a method returning thousands of results, or keeping thousands of
// states): beyond a budget of conflict visits the planner sweeps in order of first use instead
// of running the greedy passes, whose cost grows with the square of the requests live at once.
// N nested lifetimes [i, N] of one size stack exactly.
TEST(MemoryPlannerTest, ManyRequestsLiveAtOnceStackToTheBound) {
  const int32_t n = 3000;
  std::vector<BufferRequest> requests;
  for (int32_t i = 0; i < n; ++i) requests.push_back(Req(64, 64, i, n));
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(requests));
  ExpectValidPlan(requests, plan);
  EXPECT_EQ(plan.lower_bound, size_t{64} * n);
  EXPECT_EQ(plan.arena_size, plan.lower_bound);
}

// Two crowds one after the other: the second reuses the memory the first freed.
TEST(MemoryPlannerTest, ManyLiveRequestsReuseMemoryFreedBeforeThem) {
  std::vector<BufferRequest> requests;
  for (int i = 0; i < 2000; ++i) requests.push_back(Req(64 * (1 + i % 3), 64, 0, 1));
  for (int i = 0; i < 2000; ++i) requests.push_back(Req(64 * (1 + i % 5), 64, 2, 3));
  ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(requests));
  ExpectValidPlan(requests, plan);
  EXPECT_EQ(plan.lower_bound, NaiveLowerBound(requests));
  EXPECT_EQ(plan.arena_size, plan.lower_bound);
}

// Random dense lifetimes (about a thousand requests live at once) with mixed sizes and
// alignments: valid, deterministic, and within 10% of the bound (about 4% on these seeds).
TEST(MemoryPlannerTest, RandomDenseLifetimesArePlannedValidly) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    std::vector<BufferRequest> requests = RandomRequests(seed, 2500, 100, 100);
    ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanMemory(requests));
    ExpectValidPlan(requests, plan);
    EXPECT_EQ(plan.lower_bound, NaiveLowerBound(requests)) << "seed " << seed;
    EXPECT_LE(static_cast<double>(plan.arena_size), 1.10 * static_cast<double>(plan.lower_bound))
        << "seed " << seed;
    ASSERT_OK_AND_ASSIGN(MemoryPlan again, PlanMemory(requests));
    EXPECT_EQ(plan.offsets, again.offsets) << "seed " << seed;
  }
}

}  // namespace
}  // namespace ferry
