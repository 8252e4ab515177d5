// The offset planner: a pure function from buffer lifetimes to offsets in one arena.
//
//   std::vector<BufferRequest> requests = {
//       {.size = 256, .alignment = 64, .first_use = 0, .last_use = 1},
//       {.size = 512, .alignment = 64, .first_use = 1, .last_use = 2},
//       {.size = 256, .alignment = 64, .first_use = 2, .last_use = 3}};
//   FERRY_ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(requests));
//   // plan.offsets == {512, 0, 512}: requests 0 and 2 never live at once, so they share memory.
//   // plan.arena_size == 768 == plan.lower_bound.
//
// Two requests conflict iff their [first_use, last_use] intervals (step indices, inclusive)
// intersect; conflicting requests never overlap in memory. Zero-size requests get offset 0 and
// take no space. `lower_bound` is the peak, over steps, of the summed sizes of the requests live
// at that step: no plan can have a smaller arena.
//
// Placement is greedy, in the spirit of TensorFlow Lite Micro's greedy memory planner:
//  1. Largest first (ties by index), each request at the lowest offset that is a multiple of its
//     alignment and overlaps no already placed conflicting request. When this reaches
//     `lower_bound` it is the plan.
//  2. Otherwise, also in order of first use (ties by index), each request in the smallest gap
//     that fits it, where the space between the conflicting requests and `lower_bound` is a gap
//     too and a request placed there sits against `lower_bound` (so neighbours alternate between
//     bottom and top, which is what a chain of varying sizes needs to reach the bound).
// The pass with the smaller arena wins (pass 1 on a tie). Deterministic.
// When many requests are live at once (thousands of outputs or states), so that the greedy
// passes would visit more than 2^16 + 32 n conflicts, one sweep replaces them: in order of first
// use (ties by index), the memory of requests whose lifetimes ended is freed and coalesced, and
// each request takes the smallest free block it fits in (lowest offset on a tie), else the space
// above everything in use.
//
// Cost: O(n) to order the requests (radix sorts) and O(n k log k) per greedy pass, k the number
// of placed requests a request conflicts with (found through an interval index, not a scan),
// bounded by the budget above; O(n log n) for the sweep. Requests of one size (a multiple of their
// one alignment) made in order of first use, as a chain of like layers gives, are planned in one
// O(n log k) sweep that makes the same plan as the route above, k the requests live at once.
// Errors: InvalidArgument naming the request index for a negative first_use, first_use >
// last_use, or an alignment that is zero or not a power of two; ResourceExhausted when the lower
// bound overflows size_t, or (naming the request) when no pass can place every request without
// its offset overflowing.
// Thread safety: pure; allocates only its result and scratch.
#ifndef FERRY_MEMORY_MEMORY_PLANNER_H_
#define FERRY_MEMORY_MEMORY_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ferry/base/huge_pages.h"

namespace ferry {

struct BufferRequest {
  size_t size = 0;
  size_t alignment = 1;  // a power of two
  int32_t first_use = 0;  // step indices, inclusive, 0 <= first_use <= last_use
  int32_t last_use = 0;
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request, in request order
  size_t arena_size = 0;        // max over requests of offset + size
  size_t lower_bound = 0;       // peak of live bytes
};

absl::StatusOr<MemoryPlan> PlanMemory(absl::Span<const BufferRequest> requests);

namespace internal {
// PlanMemory; with allow_uniform_pass false, without the shortcut that places requests of one
// size (tests compare the two).
absl::StatusOr<MemoryPlan> PlanMemory(absl::Span<const BufferRequest> requests,
                                      bool allow_uniform_pass);
}  // namespace internal

}  // namespace ferry

#endif  // FERRY_MEMORY_MEMORY_PLANNER_H_
