// Reductions: mean over given dimensions (float32), as PyTorch's mean.dim.
#include <cstdint>
#include <limits>
#include <vector>

#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_ops.h"
#include "ferry/kernels/internal/op_util.h"
#include "ferry/kernels/internal/simd_loops.h"

namespace ferry::internal {
namespace {

constexpr absl::string_view kMean = "mean";

// The reduced dimensions of a mean call as a mask over x's dimensions: `dims` normalized, each at
// most once; an empty list reduces every dimension (PyTorch's mean.dim with dim=[]).
absl::StatusOr<uint32_t> ReducedMask(const TensorRef& x, const std::vector<int64_t>& dims) {
  if (dims.empty()) return x.rank == 0 ? 0u : (1u << x.rank) - 1;
  uint32_t mask = 0;
  for (int64_t raw : dims) {
    // A rank-0 tensor takes dim 0 or -1, as in PyTorch.
    FERRY_ASSIGN_OR_RETURN(int d, NormalizeDim(kMean, 1, raw, x.rank == 0 ? 1 : x.rank));
    if (x.rank == 0) continue;
    if (mask & (1u << d)) {
      return OpError(kMean, "argument 1 ", ShapeString(dims), " names dim ", d, " twice");
    }
    mask |= 1u << d;
  }
  return mask;
}

// mean(t x, intlist dims, bool keepdim) -> float32.
absl::Status MeanInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  FERRY_RETURN_IF_ERROR(CheckArity(kMean, args, 3, 3, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(kMean, args, 0));
  FERRY_RETURN_IF_ERROR(CheckDType(kMean, 0, *x, DType::kFloat32));
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* dims, IntListArg(kMean, args, 1));
  FERRY_ASSIGN_OR_RETURN(int64_t keepdim, IntArg(kMean, args, 2));
  FERRY_ASSIGN_OR_RETURN(uint32_t mask, ReducedMask(*x, *dims));
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

absl::Status MeanKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
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
      o[k[0]] = static_cast<float>(loops.sum(xd + k[1], count) / static_cast<double>(count));
    });
    return absl::OkStatus();
  }
  ForEachOffset<2>(kept, kept_sizes, {kept_out, kept_x}, [&](const std::array<int64_t, 2>& k) {
    double sum = 0.0;
    ForEachOffset<1>(reduced, red_sizes, {red_x},
                     [&](const std::array<int64_t, 1>& r) { sum += xd[k[1] + r[0]]; });
    // An empty reduction is NaN, as in PyTorch.
    o[k[0]] = count == 0 ? std::numeric_limits<float>::quiet_NaN()
                         : static_cast<float>(sum / static_cast<double>(count));
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReduceOps(OpRegistry& registry) {
  return registry.Register(MakeSchema("mean", 3, 3, 1, &MeanInfer, &MeanKernel));
}

}  // namespace ferry::internal
