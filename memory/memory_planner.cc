#include "ferry/memory/memory_planner.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"

namespace ferry {
namespace {

absl::Status CheckRequest(const BufferRequest& r, size_t index) {
  if (r.first_use < 0) {
    return absl::InvalidArgumentError(absl::StrCat("memory plan: buffer request ", index,
                                                   " has negative first_use ", r.first_use));
  }
  if (r.first_use > r.last_use) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory plan: buffer request ", index, " has first_use ", r.first_use,
        " after last_use ", r.last_use, "; expected first_use <= last_use"));
  }
  if (r.alignment == 0 || (r.alignment & (r.alignment - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("memory plan: buffer request ", index,
                                                   " has alignment ", r.alignment,
                                                   "; expected a power of two"));
  }
  return absl::OkStatus();
}

absl::Status Overflow(size_t index, const BufferRequest& r) {
  return absl::ResourceExhaustedError(
      absl::StrCat("memory plan: buffer request ", index, " (", r.size,
                   " bytes) cannot be placed: the arena offset overflows size_t"));
}

// `ids` sorted by key(id) ascending, stably (equal keys keep their order in `ids`): an LSD radix
// sort over bytes, skipping the bytes in which all keys agree. O(n) per byte that differs, with no
// comparison; planning sorts every request three times, so this is most of what a sort costs.
template <typename Key>
void RadixSortByKey(LargeTable<int32_t>& ids, Key key) {
  const size_t n = ids.size();
  if (n < 2) return;
  // Already in order (requests made in order of first use, as loading makes them): nothing to do.
  bool sorted = true;
  for (size_t i = 1; i < n && sorted; ++i) sorted = key(ids[i - 1]) <= key(ids[i]);
  if (sorted) return;
  LargeTable<uint64_t> keys(n);
  uint64_t all_or = 0, all_and = ~uint64_t{0};
  for (size_t i = 0; i < n; ++i) {
    keys[i] = key(ids[i]);
    all_or |= keys[i];
    all_and &= keys[i];
  }
  const uint64_t differing = all_or ^ all_and;
  LargeTable<int32_t> ids_tmp(n);
  LargeTable<uint64_t> keys_tmp(n);
  for (int shift = 0; shift < 64; shift += 8) {
    if (((differing >> shift) & 0xff) == 0) continue;
    size_t count[257] = {};
    for (size_t i = 0; i < n; ++i) ++count[((keys[i] >> shift) & 0xff) + 1];
    for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
    for (size_t i = 0; i < n; ++i) {
      const size_t at = count[(keys[i] >> shift) & 0xff]++;
      ids_tmp[at] = ids[i];
      keys_tmp[at] = keys[i];
    }
    ids.swap(ids_tmp);
    keys.swap(keys_tmp);
  }
}

// Peak over steps of the bytes live at once: a sweep over the requests in order of first use
// and in order of last use, retiring before adding at equal steps since intervals are inclusive
// (a request whose last_use is s is gone at step s + 1).
absl::StatusOr<size_t> LowerBound(absl::Span<const BufferRequest> requests,
                                  const LargeTable<int32_t>& by_first,
                                  const LargeTable<int32_t>& by_last) {
  size_t live = 0, peak = 0;
  size_t j = 0;
  for (int32_t id : by_first) {
    const BufferRequest& r = requests[id];
    while (j < by_last.size() &&
           static_cast<int64_t>(requests[by_last[j]].last_use) + 1 <= r.first_use) {
      live -= requests[by_last[j]].size;
      ++j;
    }
    if (__builtin_add_overflow(live, r.size, &live)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "memory plan: the bytes live at step ", r.first_use, " overflow size_t"));
    }
    peak = std::max(peak, live);
  }
  return peak;
}

// The placed requests, indexed by lifetime so that a request finds the placed ones it conflicts
// with without scanning all of them. A placed interval [s, e] conflicts with a query [a, b] iff
// it contains a (found by a stabbing query on a segment tree over the distinct first_use values)
// or it starts in (a, b] (found through a bitset of the start positions in use). The two sets are
// disjoint. Lists are intrusive (indices into one pool), so insertion allocates only amortized.
class PlacedIndex {
 public:
  // `positions` is the number of distinct first_use values; requests are given by the range
  // [lo, hi] of those values their interval covers (see Positions).
  PlacedIndex(size_t positions, size_t num_requests) : positions_(positions) {
    while (leaves_ < positions_) leaves_ *= 2;
    tree_head_.assign(2 * leaves_, -1);
    start_head_.assign(positions_, -1);
    start_next_.assign(num_requests, -1);
    // Short lifetimes, the common case, take one or two tree nodes each.
    pool_.reserve(2 * num_requests);
    bits_.assign((positions_ + 63) / 64, 0);
    summary_.assign((bits_.size() + 63) / 64, 0);
  }

  void Insert(int32_t id, size_t lo, size_t hi) {
    int level = 0;
    for (size_t l = lo + leaves_, r = hi + 1 + leaves_; l < r; l /= 2, r /= 2, ++level) {
      if (l & 1) Push(l++, id, level);
      if (r & 1) Push(--r, id, level);
    }
    start_next_[id] = start_head_[lo];
    start_head_[lo] = id;
    bits_[lo / 64] |= uint64_t{1} << (lo % 64);
    summary_[lo / 4096] |= uint64_t{1} << ((lo / 64) % 64);
    if (max_start_ == SIZE_MAX || lo > max_start_) max_start_ = lo;
  }

  // Appends the ids of placed requests whose interval intersects [first_use, last_use].
  void Conflicts(size_t a, size_t b, LargeTable<int32_t>* out) const {
    // Only the tree levels that hold entries: short lifetimes use the lowest one or two.
    for (uint64_t levels = levels_; levels != 0; levels &= levels - 1) {
      const size_t node = (a + leaves_) >> __builtin_ctzll(levels);
      for (int32_t e = tree_head_[node]; e >= 0; e = pool_[e].next) out->push_back(pool_[e].id);
    }
    for (size_t p = NextOccupied(a + 1); p <= b; p = NextOccupied(p + 1)) {
      for (int32_t id = start_head_[p]; id >= 0; id = start_next_[id]) out->push_back(id);
    }
  }

 private:
  struct Entry {
    int32_t id;
    int32_t next;
  };

  void Push(size_t node, int32_t id, int level) {
    pool_.push_back({id, tree_head_[node]});
    tree_head_[node] = static_cast<int32_t>(pool_.size() - 1);
    levels_ |= uint64_t{1} << level;
  }

  // The smallest occupied start position >= p, or SIZE_MAX.
  size_t NextOccupied(size_t p) const {
    // Past the last occupied position (requests placed in order of first use query there):
    // no scan of the empty words above it.
    if (p >= positions_ || max_start_ == SIZE_MAX || p > max_start_) return SIZE_MAX;
    size_t word = p / 64;
    uint64_t bits = bits_[word] & (~uint64_t{0} << (p % 64));
    if (bits != 0) return word * 64 + static_cast<size_t>(__builtin_ctzll(bits));
    // Find the next non-empty word through the summary (one bit per word).
    ++word;
    size_t group = word / 64;
    if (group >= summary_.size()) return SIZE_MAX;
    uint64_t words = summary_[group] & (word % 64 == 0 ? ~uint64_t{0} : ~uint64_t{0} << (word % 64));
    while (words == 0) {
      if (++group >= summary_.size()) return SIZE_MAX;
      words = summary_[group];
    }
    word = group * 64 + static_cast<size_t>(__builtin_ctzll(words));
    return word * 64 + static_cast<size_t>(__builtin_ctzll(bits_[word]));
  }

  size_t positions_;
  size_t leaves_ = 1;
  LargeTable<int32_t> tree_head_;  // per segment tree node: first pool entry, or -1
  LargeTable<Entry> pool_;
  LargeTable<int32_t> start_head_;  // per start position: first placed id, or -1
  LargeTable<int32_t> start_next_;  // per id: next placed id with the same start
  LargeTable<uint64_t> bits_;       // start positions with a placed request
  LargeTable<uint64_t> summary_;    // words of bits_ that are not zero
  size_t max_start_ = SIZE_MAX;     // the largest occupied start position; SIZE_MAX: none
  uint64_t levels_ = 0;             // bit k: some tree node k levels above the leaves has entries
};

// Lifetimes in compressed coordinates: the distinct first_use values of the non-empty requests,
// sorted, are positions 0..count-1; request i covers positions [lo[i], hi[i]]. Two requests
// conflict iff one covers the other's lo. Computed by two sweeps over the requests sorted by first
// and by last use.
struct Positions {
  size_t count = 0;
  LargeTable<size_t> lo, hi;
};

Positions ComputePositions(absl::Span<const BufferRequest> requests,
                           const LargeTable<int32_t>& by_first,
                           const LargeTable<int32_t>& by_last) {
  Positions p;
  p.lo.assign(requests.size(), 0);
  p.hi.assign(requests.size(), 0);
  LargeTable<int32_t> starts;  // distinct first_use values, ascending
  starts.reserve(by_first.size());
  for (int32_t id : by_first) {
    const int32_t first = requests[id].first_use;
    if (starts.empty() || starts.back() != first) starts.push_back(first);
    p.lo[id] = starts.size() - 1;
  }
  p.count = starts.size();
  // hi: the last start position at or before last_use (there is one: the request's own start).
  size_t k = 0;
  for (int32_t id : by_last) {
    const int32_t last = requests[id].last_use;
    while (k < starts.size() && starts[k] <= last) ++k;
    p.hi[id] = k - 1;
  }
  return p;
}

// Rounds up to a power-of-two alignment; false on overflow.
bool AlignUp(size_t value, size_t alignment, size_t* out) {
  if (__builtin_add_overflow(value, alignment - 1, out)) return false;
  *out &= ~(alignment - 1);
  return true;
}

enum class Fit {
  // The lowest aligned offset that fits (TensorFlow Lite Micro's greedy planner).
  kLowest,
  // The smallest gap that fits, where the space between the highest conflicting request and
  // `top` also counts as a gap and a request placed there sits against `top`. Placing requests
  // alternately against the bottom and the top is what lets a chain reach the lower bound.
  kBestFitTwoSided,
};

// Places the non-empty requests in `order`. On success fills `offsets` and returns the arena
// size; ResourceExhausted naming the request when an offset overflows.
absl::StatusOr<size_t> PlacePass(absl::Span<const BufferRequest> requests,
                                 const LargeTable<int32_t>& order, const Positions& positions,
                                 Fit fit, size_t top, std::vector<size_t>* offsets) {
  PlacedIndex placed(positions.count, requests.size());
  LargeTable<size_t> ends(requests.size(), 0);
  LargeTable<int32_t> conflict_ids;
  LargeTable<std::pair<size_t, size_t>> conflicts;  // (offset, end) of placed conflicting ones
  size_t arena = 0;
  for (int32_t id : order) {
    const BufferRequest& r = requests[id];
    const size_t mask = ~(r.alignment - 1);
    conflict_ids.clear();
    placed.Conflicts(positions.lo[id], positions.hi[id], &conflict_ids);
    conflicts.clear();
    for (int32_t c : conflict_ids) conflicts.emplace_back((*offsets)[c], ends[c]);
    std::sort(conflicts.begin(), conflicts.end());
    // Walk the gaps between conflicting requests from offset 0 up; `covered` is the end of the
    // space taken so far.
    size_t covered = 0;
    size_t best = SIZE_MAX;
    size_t best_gap = SIZE_MAX;
    for (const auto& [other_offset, other_end] : conflicts) {
      size_t candidate;
      if (other_offset > covered && AlignUp(covered, r.alignment, &candidate) &&
          candidate <= other_offset && other_offset - candidate >= r.size) {
        if (fit == Fit::kLowest) {
          best = candidate;
          break;
        }
        if (other_offset - covered < best_gap) {
          best_gap = other_offset - covered;
          best = candidate;
        }
      }
      covered = std::max(covered, other_end);
    }
    if (best == SIZE_MAX && fit == Fit::kLowest) {
      if (!AlignUp(covered, r.alignment, &best)) return Overflow(id, r);
    }
    if (fit == Fit::kBestFitTwoSided) {
      size_t candidate;
      if (covered <= top && AlignUp(covered, r.alignment, &candidate) && candidate <= top &&
          top - candidate >= r.size && top - covered < best_gap) {
        best = std::max(candidate, (top - r.size) & mask);
      } else if (best == SIZE_MAX && !AlignUp(covered, r.alignment, &best)) {
        return Overflow(id, r);
      }
    }
    size_t end;
    if (__builtin_add_overflow(best, r.size, &end)) return Overflow(id, r);
    (*offsets)[id] = best;
    ends[id] = end;
    arena = std::max(arena, end);
    placed.Insert(id, positions.lo[id], positions.hi[id]);
  }
  return arena;
}

// An upper estimate of the conflicts the greedy passes visit: per request, the requests live at
// its first use (each conflicting pair is counted once or twice). O(n) over the positions.
size_t ConflictVisits(const Positions& positions, const LargeTable<int32_t>& ids) {
  LargeTable<int64_t> cover(positions.count + 1, 0);  // starts minus ends, then prefix sums
  for (int32_t id : ids) {
    ++cover[positions.lo[id]];
    --cover[positions.hi[id] + 1];
  }
  std::partial_sum(cover.begin(), cover.end(), cover.begin());
  size_t visits = 0;
  for (int32_t id : ids) visits += static_cast<size_t>(cover[positions.lo[id]]);
  return visits;
}

// One pass in order of first use that reuses the memory of requests whose lifetimes have ended:
// free blocks coalesce, a request takes the smallest free block it fits in (lowest offset on a
// tie), else the space above everything in use. O(n log n) whatever the conflicts.
absl::StatusOr<size_t> SweepPass(absl::Span<const BufferRequest> requests,
                                 const LargeTable<int32_t>& by_first,
                                 std::vector<size_t>* offsets) {
  std::map<size_t, size_t> free_at;                  // offset -> end, below `top`
  std::set<std::pair<size_t, size_t>> free_by_size;  // (size, offset)
  using Live = std::pair<int32_t, int32_t>;          // (last_use, id)
  std::priority_queue<Live, std::vector<Live>, std::greater<Live>> live;
  size_t top = 0, arena = 0;
  auto take = [&](std::map<size_t, size_t>::iterator it) {
    free_by_size.erase({it->second - it->first, it->first});
    free_at.erase(it);
  };
  auto add_free = [&](size_t begin, size_t end) {
    if (begin == end) return;
    free_at.emplace(begin, end);
    free_by_size.emplace(end - begin, begin);
  };
  for (int32_t id : by_first) {
    const BufferRequest& r = requests[id];
    while (!live.empty() && live.top().first < r.first_use) {
      const int32_t done = live.top().second;
      live.pop();
      size_t begin = (*offsets)[done];
      size_t end = begin + requests[done].size;
      if (auto next = free_at.find(end); next != free_at.end()) {
        end = next->second;
        take(next);
      }
      if (auto prev = free_at.lower_bound(begin); prev != free_at.begin()) {
        --prev;
        if (prev->second == begin) {
          begin = prev->first;
          take(prev);
        }
      }
      if (end == top) {
        top = begin;
      } else {
        add_free(begin, end);
      }
    }
    // The smallest free block that fits. Blocks of at least size + alignment - 1 bytes fit
    // wherever they start; a few smaller ones are tried first.
    size_t offset = 0;
    auto fits = [&](std::set<std::pair<size_t, size_t>>::iterator block) {
      return AlignUp(block->second, r.alignment, &offset) &&
             offset - block->second <= block->first - r.size;
    };
    auto fit = free_by_size.end();
    auto it = free_by_size.lower_bound({r.size, 0});
    for (int tries = 0; it != free_by_size.end() && tries < 8; ++it, ++tries) {
      if (fits(it)) {
        fit = it;
        break;
      }
    }
    if (fit == free_by_size.end() && r.size <= SIZE_MAX - (r.alignment - 1)) {
      it = free_by_size.lower_bound({r.size + r.alignment - 1, 0});
      if (it != free_by_size.end() && fits(it)) fit = it;
    }
    if (fit != free_by_size.end()) {
      const size_t block = fit->second;
      auto at = free_at.find(block);
      const size_t block_end = at->second;
      take(at);
      add_free(block, offset);
      add_free(offset + r.size, block_end);
    } else {
      if (!AlignUp(top, r.alignment, &offset)) return Overflow(id, r);
      size_t end;
      if (__builtin_add_overflow(offset, r.size, &end)) return Overflow(id, r);
      add_free(top, offset);
      top = end;
    }
    (*offsets)[id] = offset;
    arena = std::max(arena, offset + r.size);
    live.emplace(r.last_use, id);
  }
  return arena;
}

// Requests of one size, a multiple of their one alignment, in order of first use (a chain of
// like layers, as loading makes them): the whole plan in one sweep in index order, each request at
// the lowest multiple of the size that no request live at its first use holds. That is the plan
// PlanMemory makes there by its general route, which the sweep also follows to the letter:
//  - the lower bound is the peak count of requests live at once, times the size;
//  - the conflict visits (ConflictVisits) are, per request, the requests live at its first use
//    that came before it plus those from it on that start at the same step; above the budget
//    the general route sweeps (SweepPass), and so this returns false;
//  - pass 1 places largest first, which on equal sizes is index order, here also order of first
//    use, each at the lowest fitting gap, which with every offset a multiple of the size is the
//    lowest free slot; it reaches the lower bound (greedy colouring of intervals in order of
//    start uses as many slots as are live at once), so pass 2 does not run.
// Fills `plan` and returns true, or returns false (plan untouched) where this does not apply.
bool PlanUniform(absl::Span<const BufferRequest> requests, const LargeTable<int32_t>& ids,
                 size_t visit_budget, MemoryPlan* plan) {
  if (ids.empty()) return false;
  const BufferRequest& head = requests[ids.front()];
  const size_t size = head.size;
  const size_t alignment = head.alignment;
  size_t total = 0;
  if (size % alignment != 0 || __builtin_mul_overflow(size, ids.size(), &total)) return false;
  int32_t previous_first = head.first_use;
  for (int32_t id : ids) {
    const BufferRequest& r = requests[id];
    if (r.size != size || r.alignment != alignment || r.first_use < previous_first) return false;
    previous_first = r.first_use;
  }
  using Held = std::pair<int32_t, size_t>;  // (last_use, slot)
  std::priority_queue<Held, std::vector<Held>, std::greater<Held>> live;
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> free_slots;
  std::vector<size_t> offsets(requests.size(), 0);
  size_t slots = 0, peak = 0, visits = 0;
  size_t run_left = 0;  // requests from this one on with the same first use
  for (size_t i = 0; i < ids.size(); ++i) {
    const BufferRequest& r = requests[ids[i]];
    if (run_left == 0) {
      run_left = 1;
      while (i + run_left < ids.size() && requests[ids[i + run_left]].first_use == r.first_use) {
        ++run_left;
      }
    }
    while (!live.empty() && live.top().first < r.first_use) {
      free_slots.push(live.top().second);
      live.pop();
    }
    visits += live.size() + run_left;
    --run_left;
    size_t slot = slots;
    if (!free_slots.empty()) {
      slot = free_slots.top();
      free_slots.pop();
    } else {
      ++slots;
    }
    offsets[ids[i]] = slot * size;
    live.emplace(r.last_use, slot);
    peak = std::max(peak, live.size());
  }
  if (visits > visit_budget || slots != peak) return false;
  plan->offsets = std::move(offsets);
  plan->lower_bound = peak * size;
  plan->arena_size = slots * size;
  return true;
}

// Above this many conflict visits the greedy passes give way to the sweep: their cost grows with
// the square of the requests live at once (many outputs or states), the sweep's does not.
size_t GreedyVisitBudget(size_t n) { return (size_t{1} << 16) + 32 * n; }

}  // namespace

absl::StatusOr<MemoryPlan> PlanMemory(absl::Span<const BufferRequest> requests) {
  return internal::PlanMemory(requests, /*allow_uniform_pass=*/true);
}

namespace internal {

absl::StatusOr<MemoryPlan> PlanMemory(absl::Span<const BufferRequest> requests,
                                      bool allow_uniform_pass) {
  const size_t n = requests.size();
  for (size_t i = 0; i < n; ++i) {
    if (absl::Status s = CheckRequest(requests[i], i); !s.ok()) return s;
  }
  MemoryPlan plan;
  plan.offsets.assign(n, 0);

  // The non-empty requests in index order, then sorted three ways (stably, so ties stay in
  // index order): by first use, by last use, and by size, largest first.
  LargeTable<int32_t> by_first;
  by_first.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (requests[i].size > 0) by_first.push_back(static_cast<int32_t>(i));
  }
  if (allow_uniform_pass && PlanUniform(requests, by_first, GreedyVisitBudget(n), &plan)) {
    return plan;
  }
  LargeTable<int32_t> by_last = by_first;
  LargeTable<int32_t> by_size = by_first;
  RadixSortByKey(by_first, [&](int32_t id) { return static_cast<uint64_t>(requests[id].first_use); });
  RadixSortByKey(by_last, [&](int32_t id) { return static_cast<uint64_t>(requests[id].last_use); });
  RadixSortByKey(by_size, [&](int32_t id) { return ~static_cast<uint64_t>(requests[id].size); });

  absl::StatusOr<size_t> lower_bound = LowerBound(requests, by_first, by_last);
  if (!lower_bound.ok()) return lower_bound.status();
  plan.lower_bound = *lower_bound;
  const Positions positions = ComputePositions(requests, by_first, by_last);
  const LargeTable<int32_t>& by_time = by_first;

  if (ConflictVisits(positions, by_first) > GreedyVisitBudget(n)) {
    FERRY_ASSIGN_OR_RETURN(plan.arena_size, SweepPass(requests, by_time, &plan.offsets));
    return plan;
  }
  // Pass 1: greedy by size, lowest fit. Usually at or near the lower bound.
  absl::StatusOr<size_t> by_size_arena =
      PlacePass(requests, by_size, positions, Fit::kLowest, plan.lower_bound, &plan.offsets);
  if (by_size_arena.ok() && *by_size_arena == plan.lower_bound) {
    plan.arena_size = *by_size_arena;
    return plan;
  }
  // Pass 2: in order of first use, best fit against the bottom and against the lower bound.
  // Greedy by size strands requests between larger neighbours on chains of varying sizes; this
  // pass reaches the bound there. The smaller arena wins, pass 1 on a tie.
  std::vector<size_t> by_time_offsets(n, 0);
  absl::StatusOr<size_t> by_time_arena = PlacePass(
      requests, by_time, positions, Fit::kBestFitTwoSided, plan.lower_bound, &by_time_offsets);
  if (by_time_arena.ok() && (!by_size_arena.ok() || *by_time_arena < *by_size_arena)) {
    plan.offsets = std::move(by_time_offsets);
    plan.arena_size = *by_time_arena;
    return plan;
  }
  if (!by_size_arena.ok()) return by_size_arena.status();
  plan.arena_size = *by_size_arena;
  return plan;
}

}  // namespace internal
}  // namespace ferry
