// Shape host ops.
//
// Views (view, transpose, permute, slice, unsqueeze, squeeze, expand) have no kernel: `infer`
// gives the result's sizes, strides and offset within argument 0 and the executor aliases it.
// Copies (reshape, clone, cat) write a contiguous result. sym_size reads only metadata. Every op
// here takes every dtype: copies move elements by their size.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_ops.h"
#include "ferry/kernels/internal/op_util.h"

namespace ferry::internal {
namespace {

// Resolves a requested shape (at most one -1) against `numel` elements.
absl::StatusOr<std::vector<int64_t>> ResolveSizes(absl::string_view op, int arg,
                                                  const std::vector<int64_t>& requested,
                                                  const TensorRef& t) {
  if (requested.size() > static_cast<size_t>(kMaxRank)) {
    return OpError(op, "argument ", arg, " has ", requested.size(), " sizes, the most supported is ",
                   kMaxRank);
  }
  std::vector<int64_t> sizes = requested;
  int infer_at = -1;
  int64_t known = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == -1) {
      if (infer_at != -1) return OpError(op, "argument ", arg, " has more than one -1");
      infer_at = static_cast<int>(d);
      continue;
    }
    if (sizes[d] < 0) return OpError(op, "argument ", arg, " has invalid size ", sizes[d]);
    if (__builtin_mul_overflow(known, sizes[d], &known)) {
      return OpError(op, "argument ", arg, " ", ShapeString(requested), " has too many elements");
    }
  }
  const int64_t numel = t.numel();
  if (infer_at != -1) {
    if (known == 0 || numel % known != 0) {
      return OpError(op, "argument ", arg, " ", ShapeString(requested),
                     " does not fit the ", numel, " elements of argument 0 ", ShapeString(t));
    }
    sizes[infer_at] = numel / known;
  } else if (known != numel) {
    return OpError(op, "argument ", arg, " ", ShapeString(requested), " does not match the ", numel,
                   " elements of argument 0 ", ShapeString(t));
  }
  return sizes;
}

// Strides that view `t`'s elements as `sizes` without a copy, or nullopt when its strides do not
// allow it (PyTorch's rule: each run of mutually contiguous dimensions of `t` must map onto whole
// dimensions of the new shape).
std::optional<std::vector<int64_t>> ViewStrides(const TensorRef& t,
                                                const std::vector<int64_t>& sizes) {
  const int new_rank = static_cast<int>(sizes.size());
  std::vector<int64_t> strides(new_rank, 1);
  if (t.numel() == 0 || t.rank == 0) {
    // No element (or a single one) constrains the layout: use row-major strides.
    int64_t s = 1;
    for (int d = new_rank - 1; d >= 0; --d) {
      strides[d] = s;
      s *= std::max<int64_t>(sizes[d], 1);
    }
    return strides;
  }
  int view_d = new_rank - 1;
  int64_t chunk_base_stride = t.strides[t.rank - 1];
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int tensor_d = t.rank - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= t.sizes[tensor_d];
    if (tensor_d == 0 || (t.sizes[tensor_d - 1] != 1 &&
                          t.strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = t.strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

InferredResult MakeView(const TensorRef& t, absl::Span<const int64_t> sizes,
                        absl::Span<const int64_t> strides, int64_t offset) {
  InferredResult r;
  r.layout.dtype = t.dtype;
  r.layout.rank = static_cast<int32_t>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    r.layout.sizes[d] = sizes[d];
    r.layout.strides[d] = strides[d];
  }
  r.view_offset = offset;
  return r;
}

absl::Status ViewInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "view";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* requested, IntListArg(op, args, 1));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ResolveSizes(op, 1, *requested, *t));
  std::optional<std::vector<int64_t>> strides = ViewStrides(*t, sizes);
  if (!strides.has_value()) {
    return OpError(op, "argument 0 with shape ", ShapeString(*t), " and strides ",
                   ShapeString(Strides(*t)), " cannot be viewed as ", ShapeString(sizes),
                   "; use reshape, which copies");
  }
  results[0] = MakeView(*t, sizes, *strides, 0);
  return absl::OkStatus();
}

absl::Status TransposeInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "transpose";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 3, 3, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(int64_t d0_raw, IntArg(op, args, 1));
  FERRY_ASSIGN_OR_RETURN(int64_t d1_raw, IntArg(op, args, 2));
  FERRY_ASSIGN_OR_RETURN(int d0, NormalizeDim(op, 1, d0_raw, t->rank));
  FERRY_ASSIGN_OR_RETURN(int d1, NormalizeDim(op, 2, d1_raw, t->rank));
  results[0] = ViewResult(*t);
  std::swap(results[0].layout.sizes[d0], results[0].layout.sizes[d1]);
  std::swap(results[0].layout.strides[d0], results[0].layout.strides[d1]);
  return absl::OkStatus();
}

absl::Status PermuteInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "permute";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* dims, IntListArg(op, args, 1));
  if (static_cast<int>(dims->size()) != t->rank) {
    return OpError(op, "argument 1 ", ShapeString(*dims), " has ", dims->size(),
                   " dims for a tensor of rank ", t->rank);
  }
  results[0] = ViewResult(*t);
  bool seen[kMaxRank] = {};
  for (int i = 0; i < t->rank; ++i) {
    FERRY_ASSIGN_OR_RETURN(int d, NormalizeDim(op, 1, (*dims)[i], t->rank));
    if (seen[d]) {
      return OpError(op, "argument 1 ", ShapeString(*dims), " repeats dim ", d,
                     "; it must be a permutation");
    }
    seen[d] = true;
    results[0].layout.sizes[i] = t->sizes[d];
    results[0].layout.strides[i] = t->strides[d];
  }
  return absl::OkStatus();
}

absl::Status SliceInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "slice";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 5, 5, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(int64_t dim_raw, IntArg(op, args, 1));
  FERRY_ASSIGN_OR_RETURN(int64_t start, IntArg(op, args, 2));
  FERRY_ASSIGN_OR_RETURN(int64_t end, IntArg(op, args, 3));
  FERRY_ASSIGN_OR_RETURN(int64_t step, IntArg(op, args, 4));
  FERRY_ASSIGN_OR_RETURN(int dim, NormalizeDim(op, 1, dim_raw, t->rank));
  if (step < 1) return OpError(op, "argument 4 (step ", step, ") must be at least 1");
  const int64_t size = t->sizes[dim];
  // PyTorch's clamping: negative bounds count from the end once, then clamp into [0, size] with
  // end >= start.
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  const int64_t len = end == start ? 0 : (end - start - 1) / step + 1;
  results[0] = ViewResult(*t, start * t->strides[dim]);
  results[0].layout.sizes[dim] = len;
  int64_t stride = 0;
  if (__builtin_mul_overflow(t->strides[dim], step, &stride)) {
    // Only reachable when at most one element is selected; its stride is then irrelevant.
    stride = t->strides[dim];
  }
  results[0].layout.strides[dim] = stride;
  return absl::OkStatus();
}

// select(t, int dim, int index): the view of t at `index` along `dim`, which it drops; a
// negative index counts from the end, and one outside the dim is refused.
absl::Status SelectInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "select";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 3, 3, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(int64_t dim_raw, IntArg(op, args, 1));
  FERRY_ASSIGN_OR_RETURN(int64_t index, IntArg(op, args, 2));
  if (t->rank < 1) return OpError(op, "argument 0 has no dimension to select from");
  FERRY_ASSIGN_OR_RETURN(int dim, NormalizeDim(op, 1, dim_raw, t->rank));
  const int64_t size = t->sizes[dim];
  if (index < -size || index >= size) {
    return OpError(op, "argument 2 (index ", index, ") is out of range for dim ", dim, " of size ",
                   size);
  }
  if (index < 0) index += size;
  std::vector<int64_t> sizes(Sizes(*t).begin(), Sizes(*t).end());
  std::vector<int64_t> strides(Strides(*t).begin(), Strides(*t).end());
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  results[0] = MakeView(*t, sizes, strides, index * t->strides[dim]);
  return absl::OkStatus();
}

absl::Status UnsqueezeInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "unsqueeze";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(int64_t dim_raw, IntArg(op, args, 1));
  if (t->rank >= kMaxRank) {
    return OpError(op, "argument 0 has rank ", t->rank, ", the most supported is ", kMaxRank);
  }
  FERRY_ASSIGN_OR_RETURN(int dim, NormalizeDim(op, 1, dim_raw, t->rank + 1));
  std::vector<int64_t> sizes(Sizes(*t).begin(), Sizes(*t).end());
  std::vector<int64_t> strides(Strides(*t).begin(), Strides(*t).end());
  const int64_t stride = dim >= t->rank ? 1 : t->sizes[dim] * t->strides[dim];
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  results[0] = MakeView(*t, sizes, strides, 0);
  return absl::OkStatus();
}

absl::Status SqueezeInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "squeeze";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(int64_t dim_raw, IntArg(op, args, 1));
  FERRY_ASSIGN_OR_RETURN(int dim, NormalizeDim(op, 1, dim_raw, t->rank));
  std::vector<int64_t> sizes(Sizes(*t).begin(), Sizes(*t).end());
  std::vector<int64_t> strides(Strides(*t).begin(), Strides(*t).end());
  // As in PyTorch, squeezing a dimension whose size is not 1 leaves the tensor unchanged.
  if (sizes[dim] == 1) {
    sizes.erase(sizes.begin() + dim);
    strides.erase(strides.begin() + dim);
  }
  results[0] = MakeView(*t, sizes, strides, 0);
  return absl::OkStatus();
}

absl::Status ExpandInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "expand";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* requested, IntListArg(op, args, 1));
  const int rank = static_cast<int>(requested->size());
  if (rank < t->rank || rank > kMaxRank) {
    return OpError(op, "argument 1 ", ShapeString(*requested), " has ", rank,
                   " sizes; expected between ", t->rank, " (the rank of argument 0) and ", kMaxRank);
  }
  const int lead = rank - t->rank;
  std::vector<int64_t> sizes(rank);
  std::vector<int64_t> strides(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t want = (*requested)[d];
    if (d < lead) {
      if (want < 0) {
        return OpError(op, "argument 1 ", ShapeString(*requested), " has size ", want,
                       " for new dimension ", d);
      }
      sizes[d] = want;
      strides[d] = 0;
      continue;
    }
    const int64_t have = t->sizes[d - lead];
    if (want == -1 || want == have) {
      sizes[d] = have;
      strides[d] = t->strides[d - lead];
    } else if (have == 1 && want >= 0) {
      sizes[d] = want;
      strides[d] = 0;
    } else {
      return OpError(op, "argument 0 has shape ", ShapeString(*t), ", which cannot be expanded to ",
                     ShapeString(*requested));
    }
  }
  results[0] = MakeView(*t, sizes, strides, 0);
  return absl::OkStatus();
}

// ---- Copies ---------------------------------------------------------------------------------

// Walks a tensor's offsets in row-major order, one element per Next().
struct Cursor {
  const TensorRef& t;
  int64_t index[kMaxRank] = {};
  int64_t offset = 0;

  void Next() {
    for (int d = t.rank - 1; d >= 0; --d) {
      offset += t.strides[d];
      if (++index[d] < t.sizes[d]) return;
      offset -= t.strides[d] * t.sizes[d];
      index[d] = 0;
    }
  }
};

// Copies src's elements into dst in row-major order; the shapes may differ, the counts match.
template <typename T>
void LogicalCopy(const TensorRef& dst, const TensorRef& src) {
  T* o = dst.data_as<T>();
  const T* s = src.data_as<const T>();
  const bool dst_contiguous = IsContiguousFast(dst);
  const bool src_contiguous = IsContiguousFast(src);
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (dst_contiguous && src_contiguous) {
    std::memcpy(o, s, static_cast<size_t>(n) * sizeof(T));
    return;
  }
  if (src_contiguous) {
    int64_t i = 0;
    ForEachOffset<1>(dst.rank, dst.sizes.data(), {dst.strides.data()},
                     [&](const std::array<int64_t, 1>& off) { o[off[0]] = s[i++]; });
    return;
  }
  if (dst_contiguous) {
    int64_t i = 0;
    ForEachOffset<1>(src.rank, src.sizes.data(), {src.strides.data()},
                     [&](const std::array<int64_t, 1>& off) { o[i++] = s[off[0]]; });
    return;
  }
  Cursor cursor{src};
  ForEachOffset<1>(dst.rank, dst.sizes.data(), {dst.strides.data()},
                   [&](const std::array<int64_t, 1>& off) {
                     o[off[0]] = s[cursor.offset];
                     cursor.Next();
                   });
}

absl::Status ReshapeInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "reshape";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* requested, IntListArg(op, args, 1));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ResolveSizes(op, 1, *requested, *t));
  results[0].layout = ContiguousLayout(t->dtype, sizes);
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status ReshapeKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& src = *args[0].tensor;
  switch (src.element_size()) {
    case 1:
      LogicalCopy<uint8_t>(*results[0], src);
      break;
    case 2:
      LogicalCopy<uint16_t>(*results[0], src);
      break;
    case 4:
      LogicalCopy<uint32_t>(*results[0], src);
      break;
    default:
      LogicalCopy<uint64_t>(*results[0], src);
      break;
  }
  return absl::OkStatus();
}

absl::Status CloneInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "clone";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 1, 1, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  results[0].layout = ContiguousLayout(t->dtype, Sizes(*t));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status CloneKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  BroadcastCopy(*results[0], *args[0].tensor);
  return absl::OkStatus();
}

absl::Status CatInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "cat";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, -1, results, 1));
  FERRY_ASSIGN_OR_RETURN(int64_t dim_raw, IntArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* first, AnyTensorArg(op, args, 1));
  FERRY_ASSIGN_OR_RETURN(int dim, NormalizeDim(op, 0, dim_raw, first->rank));
  std::vector<int64_t> sizes(Sizes(*first).begin(), Sizes(*first).end());
  for (int i = 2; i < static_cast<int>(args.size()); ++i) {
    FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, i));
    FERRY_RETURN_IF_ERROR(CheckSameDType(op, i, *t, 1, *first));
    bool match = t->rank == first->rank;
    for (int d = 0; match && d < t->rank; ++d) match = d == dim || t->sizes[d] == first->sizes[d];
    if (!match) {
      return OpError(op, "argument ", i, " has shape ", ShapeString(*t),
                     ", which differs from argument 1 ", ShapeString(*first),
                     " outside dimension ", dim);
    }
    if (__builtin_add_overflow(sizes[dim], t->sizes[dim], &sizes[dim])) {
      return OpError(op, "the result is too large along dimension ", dim);
    }
  }
  results[0].layout = ContiguousLayout(first->dtype, sizes);
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status CatKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  const Scalar& dim_arg = *args[0].scalar;
  const int64_t raw = dim_arg.kind == Scalar::Kind::kInt ? dim_arg.i : dim_arg.b;
  const int dim = static_cast<int>(raw < 0 ? raw + out.rank : raw);
  char* base = static_cast<char*>(out.data);
  int64_t at = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    const TensorRef& src = *args[i].tensor;
    TensorRef dst = out;
    dst.sizes[dim] = src.sizes[dim];
    dst.data = base + at * out.strides[dim] * static_cast<int64_t>(out.element_size());
    BroadcastCopy(dst, src);
    at += src.sizes[dim];
  }
  return absl::OkStatus();
}

// ---- constant_pad ---------------------------------------------------------------------------

// ATen's constant_pad_nd: `pad` holds (before, after) pairs from the last dim backwards; a
// negative amount removes elements. Per dim of x: how much comes before it in the result.
absl::StatusOr<std::vector<int64_t>> PadSizes(absl::string_view op, const TensorRef& x,
                                              const std::vector<int64_t>& pad,
                                              std::vector<int64_t>* before) {
  if (pad.size() % 2 != 0 || pad.size() > 2 * static_cast<size_t>(x.rank)) {
    return OpError(op, "the padding has ", pad.size(), " entries; it takes pairs, at most ",
                   2 * x.rank, " for an input of rank ", x.rank);
  }
  std::vector<int64_t> sizes(Sizes(x).begin(), Sizes(x).end());
  before->assign(x.rank, 0);
  for (size_t p = 0; p < pad.size() / 2; ++p) {
    const int d = x.rank - 1 - static_cast<int>(p);
    int64_t size = 0;
    if (std::abs(pad[2 * p]) > (int64_t{1} << 40) ||
        std::abs(pad[2 * p + 1]) > (int64_t{1} << 40) ||
        __builtin_add_overflow(sizes[d], pad[2 * p] + pad[2 * p + 1], &size) || size < 0) {
      return OpError(op, "padding (", pad[2 * p], ", ", pad[2 * p + 1], ") of dimension ", d,
                     " (size ", sizes[d], ") gives no valid size");
    }
    sizes[d] = size;
    (*before)[d] = pad[2 * p];
  }
  return sizes;
}

absl::Status ConstantPadInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "constant_pad";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 3, 3, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* x, TensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(const std::vector<int64_t>* pad, IntListArg(op, args, 1));
  FERRY_ASSIGN_OR_RETURN(const Scalar* value, NumberArg(op, args, 2));
  FERRY_RETURN_IF_ERROR(CheckNumberFits(op, 2, *value, x->dtype));
  std::vector<int64_t> before;
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, PadSizes(op, *x, *pad, &before));
  results[0].layout = ContiguousLayout(x->dtype, sizes);
  results[0].view_offset = 0;
  return absl::OkStatus();
}

template <typename T>
void Fill(const TensorRef& out, T value) {
  std::fill_n(out.data_as<T>(), out.numel(), value);
}

absl::Status ConstantPadKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  const TensorRef& x = *args[0].tensor;
  const Scalar& value = *args[2].scalar;
  if (out.dtype == DType::kFloat32) {
    Fill<float>(out, static_cast<float>(value.AsDouble()));
  } else {
    Fill<int64_t>(out, value.kind == Scalar::Kind::kDouble ? static_cast<int64_t>(value.d)
                       : value.kind == Scalar::Kind::kBool ? int64_t{value.b}
                                                           : value.i);
  }
  // The part of x that survives, copied to where it lands.
  TensorRef src = x, dst = out;
  const int64_t element = static_cast<int64_t>(x.element_size());
  const std::vector<int64_t>& pad = args[1].scalar->list;
  for (int d = 0; d < x.rank; ++d) {
    const size_t p = static_cast<size_t>(x.rank - 1 - d);
    const int64_t before = 2 * p < pad.size() ? pad[2 * p] : 0;
    const int64_t src_start = std::max<int64_t>(0, -before);
    const int64_t dst_start = std::max<int64_t>(0, before);
    const int64_t len = std::min(x.sizes[d] - src_start, out.sizes[d] - dst_start);
    if (len <= 0) return absl::OkStatus();
    src.data = static_cast<char*>(src.data) + src_start * x.strides[d] * element;
    dst.data = static_cast<char*>(dst.data) + dst_start * out.strides[d] * element;
    src.sizes[d] = dst.sizes[d] = len;
  }
  BroadcastCopy(dst, src);
  return absl::OkStatus();
}

// ---- sym_size -------------------------------------------------------------------------------

absl::Status SymSizeInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  constexpr absl::string_view op = "sym_size";
  FERRY_RETURN_IF_ERROR(CheckArity(op, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* t, AnyTensorArg(op, args, 0));
  FERRY_ASSIGN_OR_RETURN(int64_t dim_raw, IntArg(op, args, 1));
  FERRY_RETURN_IF_ERROR(NormalizeDim(op, 1, dim_raw, t->rank).status());
  results[0].layout = ContiguousLayout(DType::kInt64, {});
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status SymSizeKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  // Reads only the argument's metadata, never its data (which may live on a device).
  const TensorRef& t = *args[0].tensor;
  const Scalar& dim_arg = *args[1].scalar;
  const int64_t raw = dim_arg.kind == Scalar::Kind::kInt ? dim_arg.i : dim_arg.b;
  const int dim = static_cast<int>(raw < 0 ? raw + t.rank : raw);
  *results[0]->data_as<int64_t>() = t.sizes[dim];
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterShapeOps(OpRegistry& registry) {
  const std::vector<int> view0 = {0};
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("view", 2, 2, 1, &ViewInfer, nullptr, {}, view0)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("transpose", 3, 3, 1, &TransposeInfer, nullptr, {}, view0)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("permute", 2, 2, 1, &PermuteInfer, nullptr, {}, view0)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("slice", 5, 5, 1, &SliceInfer, nullptr, {}, view0)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("select", 3, 3, 1, &SelectInfer, nullptr, {}, view0)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("unsqueeze", 2, 2, 1, &UnsqueezeInfer, nullptr, {}, view0)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("squeeze", 2, 2, 1, &SqueezeInfer, nullptr, {}, view0)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("expand", 2, 2, 1, &ExpandInfer, nullptr, {}, view0)));
  FERRY_RETURN_IF_ERROR(
      registry.Register(MakeSchema("reshape", 2, 2, 1, &ReshapeInfer, &ReshapeKernel)));
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema("clone", 1, 1, 1, &CloneInfer, &CloneKernel)));
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema("cat", 2, -1, 1, &CatInfer, &CatKernel)));
  FERRY_RETURN_IF_ERROR(registry.Register(
      MakeSchema("constant_pad", 3, 3, 1, &ConstantPadInfer, &ConstantPadKernel)));
  return registry.Register(MakeSchema("sym_size", 2, 2, 1, &SymSizeInfer, &SymSizeKernel, {}, {},
                                      /*shape_only_args=*/{0}));
}

}  // namespace ferry::internal
