// Reductions over given dimensions (float32): mean and sum, as PyTorch's mean.dim and
// sum.dim_IntList.
#include <cstdint>
#include <limits>
#include <vector>

#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_ops.h"
#include "ferry/kernels/internal/op_util.h"
#include "ferry/kernels/internal/simd_loops.h"

namespace ferry::internal {
namespace {

// The reduced dimensions of a reduction as a mask over x's dimensions: `dims` normalized, each at
// most once; an empty list reduces every dimension (PyTorch's mean.dim and sum with dim=[]).
absl::StatusOr<uint32_t> ReducedMask(absl::string_view op, const TensorRef& x,
                                     const std::vector<int64_t>& dims) {
  if (dims.empty()) return x.rank == 0 ? 0u : (1u << x.rank) - 1;
  uint32_t mask = 0;
  for (int64_t raw : dims) {
    // A rank-0 tensor takes dim 0 or -1, as in PyTorch.
    FERRY_ASSIGN_OR_RETURN(int d, NormalizeDim(op, 1, raw, x.rank == 0 ? 1 : x.rank));
    if (x.rank == 0) continue;
    if (mask & (1u << d)) {
      return OpError(op, "argument 1 ", ShapeString(dims), " names dim ", d, " twice");
    }
    mask |= 1u << d;
  }
  return mask;
}

constexpr char kMean[] = "mean";
constexpr char kSum[] = "sum";

// mean|sum(t x, intlist dims, bool keepdim) -> float32.
template <const char* kOp>
absl::Status ReduceInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = kOp;
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 3, 3, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(op, args, 0));
  FERRY_RETURN_IF_ERROR(CheckDType(op, 0, *x, DType::kFloat32));
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* dims, IntListArg(op, args, 1));
  FERRY_ASSIGN_OR_RETURN(int64_t keepdim, IntArg(op, args, 2));
  FERRY_ASSIGN_OR_RETURN(uint32_t mask, ReducedMask(op, *x, *dims));
  std::vector<int64_t> sizes;
  for (int d = 0; d < x->rank; ++d) {
    if ((mask & (1u << d)) == 0) {
      sizes.push_back(x->sizes[d]);
    } else if (keepdim != 0) {
      sizes.push_back(1);
    }
  }
  results[0].layout = ContiguousLayout(DType::kFloat32, sizes);
  results[0].view_offset = 0;
  return absl::OkStatus();
}

// Sums in double; mean divides by the count (an empty mean is NaN, an empty sum 0, as in
// PyTorch).
template <const char* kOp>
absl::Status ReduceKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  constexpr bool kIsMean = kOp == kMean;
  const TensorRef& x = *args[0].tensor;
  const TensorRef& out = *results[0];
  const std::vector<int64_t>& dims = args[1].scalar->list;
  uint32_t mask = 0;
  if (dims.empty()) {
    mask = x.rank == 0 ? 0u : (1u << x.rank) - 1;
  } else if (x.rank > 0) {
    for (int64_t raw : dims) mask |= 1u << (raw < 0 ? raw + x.rank : raw);
  }
  // Kept dimensions (in order, as the result has them, with or without keepdim's 1s) and reduced
  // ones, each with x's strides; the kept ones also with the result's.
  int64_t kept_sizes[kMaxRank] = {};
  int64_t kept_x[kMaxRank] = {};
  int64_t kept_out[kMaxRank] = {};
  int64_t red_sizes[kMaxRank] = {};
  int64_t red_x[kMaxRank] = {};
  int kept = 0;
  int reduced = 0;
  int out_d = 0;
  int64_t count = 1;
  for (int d = 0; d < x.rank; ++d) {
    if (mask & (1u << d)) {
      red_sizes[reduced] = x.sizes[d];
      red_x[reduced] = x.strides[d];
      ++reduced;
      count *= x.sizes[d];
      if (out.rank == x.rank) ++out_d;  // keepdim: the result's size-1 dimension
    } else {
      kept_sizes[kept] = x.sizes[d];
      kept_x[kept] = x.strides[d];
      kept_out[kept] = out.strides[out_d];
      ++kept;
      ++out_d;
    }
  }
  const float* xd = x.data_as<const float>();
  float* o = out.data_as<float>();
  // Reduced dimensions that together form one contiguous block (the usual last-dimensions mean)
  // take the SIMD sum of the CPU's level.
  int64_t block = 1;
  for (int r = reduced - 1; r >= 0 && block >= 0; --r) {
    if (red_sizes[r] != 1 && red_x[r] != block) {
      block = -1;
    } else {
      block *= red_sizes[r];
    }
  }
  if (block > 0) {
    const FloatLoops& loops = Loops();
    ForEachOffset<2>(kept, kept_sizes, {kept_out, kept_x}, [&](const std::array<int64_t, 2>& k) {
      const double sum = loops.sum(xd + k[1], count);
      o[k[0]] = static_cast<float>(kIsMean ? sum / static_cast<double>(count) : sum);
    });
    return absl::OkStatus();
  }
  ForEachOffset<2>(kept, kept_sizes, {kept_out, kept_x}, [&](const std::array<int64_t, 2>& k) {
    double sum = 0.0;
    ForEachOffset<1>(reduced, red_sizes, {red_x},
                     [&](const std::array<int64_t, 1>& r) { sum += xd[k[1] + r[0]]; });
    if constexpr (kIsMean) {
      o[k[0]] = count == 0 ? std::numeric_limits<float>::quiet_NaN()
                           : static_cast<float>(sum / static_cast<double>(count));
    } else {
      o[k[0]] = static_cast<float>(sum);
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReduceOps(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema(kMean, 3, 3, 1, &ReduceInfer<kMean>, &ReduceKernel<kMean>)));
  return registry.Register(MakeSchema(kSum, 3, 3, 1, &ReduceInfer<kSum>, &ReduceKernel<kSum>));
}

}  // namespace ferry::internal
