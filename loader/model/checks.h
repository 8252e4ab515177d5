// The model's invariants, written once: the checks both readers (loader/ferry/, loader/executorch/)
// run inside their single pass as they build a MethodDef, and VerifyMethodDef, which runs all of
// them over a MethodDef already built.
//
//   if (!IsDimOrder(order, rank)) return ...;                  // a permutation of 0..rank-1
//   std::optional<size_t> bytes = CheckedByteSize(dtype, sizes);  // nullopt: overflow or negative
//   FERRY_RETURN_IF_ERROR(VerifyMethodDef(method));             // every invariant below
//
// What a MethodDef promises (loader/model/method_def.h), and VerifyMethodDef checks:
//  - values: a known kind and a name; tensors of a known dtype, rank <= kMaxRank, non-negative
//    sizes whose byte size fits in int64, a dim order that is empty or a permutation of the rank;
//    constants and states hold exactly their byte size of data, other values none; only states
//    are `shared`;
//  - inputs: distinct kInput or kScalar values, and every kInput value listed;
//  - nodes, in order: a host op names its op, a delegate its backend; every argument is in range
//    and defined before the node (an input, constant, state or scalar, or an intermediate an
//    earlier node produces); every result is an intermediate that no other node produces; a
//    delegate's per-argument dim orders (if any) are one per argument, each empty or a
//    permutation of its tensor argument's rank, and its written arguments are distinct tensor
//    arguments;
//  - outputs: values defined by the end of the method (tensors or scalars);
//  - the exporter's records (imported programs): one instruction per node, or none; every value
//    they name in range.
//
// Errors: InvalidArgument naming the method and the element, e.g.
//   method "forward": node 3 (add): argument 1 is value 7 ("x"), an intermediate that no earlier
//   node produces
// Cost: one pass over values and nodes; allocates one byte-sized flag per value.
// Thread safety: pure functions.
#ifndef FERRY_LOADER_MODEL_CHECKS_H_
#define FERRY_LOADER_MODEL_CHECKS_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ferry/base/tensor.h"
#include "ferry/loader/model/method_def.h"

namespace ferry {

// Whether `order` is empty or a permutation of 0..rank-1, for the integer type a format stores
// dims in. Ranks above 64 have no valid non-empty order (formats allow at most 16).
template <typename Int>
bool IsDimOrder(absl::Span<const Int> order, size_t rank) {
  if (order.empty()) return true;
  if (order.size() != rank || rank > 64) return false;
  uint64_t seen = 0;
  for (Int d : order) {
    if constexpr (std::is_signed_v<Int>) {
      if (d < 0) return false;
    }
    if (static_cast<size_t>(d) >= rank) return false;
    const uint64_t bit = uint64_t{1} << static_cast<size_t>(d);
    if ((seen & bit) != 0) return false;
    seen |= bit;
  }
  return true;
}

// numel * element_size, or nullopt when a size is negative or the product overflows int64. Zero
// sizes count as one in the bound, so that a tensor whose other sizes multiply past the limit is
// refused even when it has no elements: strides are products of sizes too, and must fit in int64.
// An empty tensor's byte size is 0. `Int` is the type a format stores sizes in.
template <typename Int>
std::optional<size_t> CheckedByteSize(size_t element_size, absl::Span<const Int> sizes) {
  constexpr uint64_t kLimit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  static_assert(sizeof(size_t) >= sizeof(uint64_t), "byte sizes are 64-bit");
  uint64_t bound = element_size;
  bool empty = false;
  for (Int s : sizes) {
    if constexpr (std::is_signed_v<Int>) {
      if (s < 0) return std::nullopt;
    }
    if (s == 0) {
      empty = true;
      continue;
    }
    const uint64_t us = static_cast<uint64_t>(s);
    if (bound > kLimit / us) return std::nullopt;
    bound *= us;
  }
  return empty ? 0 : static_cast<size_t>(bound);
}
// The same for a Ferry dtype and sizes.
inline std::optional<size_t> CheckedByteSize(DType dtype, absl::Span<const int64_t> sizes) {
  return CheckedByteSize<int64_t>(DTypeSize(dtype), sizes);
}

// Defined-before-use and produce-once over a method's nodes in order, as a reader walks them.
//
//   DefinitionTracker defs(num_values);
//   defs.DefineAtStart(v);                      // inputs, constants, states, scalars
//   if (!defs.IsDefined(arg)) ...               // an argument read before it is produced
//   switch (defs.Produce(result, n)) { ... }    // kOk, kNotIntermediate, kAlreadyProduced
class DefinitionTracker {
 public:
  enum class ProduceResult : uint8_t { kOk, kNotIntermediate, kAlreadyProduced };
  static constexpr int32_t kFromStart = -1;   // producer() of a value defined before any node
  static constexpr int32_t kNotProduced = -2;  // producer() of an intermediate not produced yet

  DefinitionTracker() = default;
  explicit DefinitionTracker(size_t num_values) { Reset(num_values); }
  // `num_values` values, none of them defined.
  void Reset(size_t num_values) { producer_.assign(num_values, kNotProduced); }

  // `v` (in range) is defined before the first node.
  void DefineAtStart(size_t v) { producer_[v] = kFromStart; }
  // Whether `v` (in range) is defined at this point of the walk.
  bool IsDefined(size_t v) const { return producer_[v] != kNotProduced; }
  // Node `node` produces `v` (in range); on anything but kOk nothing is recorded.
  ProduceResult Produce(size_t v, int32_t node) {
    if (producer_[v] == kFromStart) return ProduceResult::kNotIntermediate;
    if (producer_[v] != kNotProduced) return ProduceResult::kAlreadyProduced;
    producer_[v] = node;
    return ProduceResult::kOk;
  }
  // The node that produced `v`, kFromStart, or kNotProduced.
  int32_t producer(size_t v) const { return producer_[v]; }

 private:
  std::vector<int32_t> producer_;
};

// Every invariant above, over a built method. InvalidArgument naming the first element that
// breaks one.
absl::Status VerifyMethodDef(const MethodDef& method);

// VerifyMethodDef over every method a reader built. A reader checks its file before it builds, so
// a method that breaks an invariant is the reader's bug, not the file's: Internal, naming the
// reader, e.g. "the ExecuTorch importer built an invalid method (a bug in Ferry): method ...".
absl::Status VerifyReaderOutput(absl::Span<const MethodDef> methods, absl::string_view reader);

}  // namespace ferry

#endif  // FERRY_LOADER_MODEL_CHECKS_H_
