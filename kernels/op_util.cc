#include "ferry/kernels/internal/op_util.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"

namespace ferry::internal {

std::string ShapeString(absl::Span<const int64_t> sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

absl::Status CheckArity(absl::string_view op, absl::Span<const OpArg> args, int min_args,
                        int max_args, absl::Span<InferredResult> results, int num_results) {
  const int n = static_cast<int>(args.size());
  if (n < min_args || (max_args != -1 && n > max_args)) {
    std::string expected;
    if (max_args == min_args) {
      expected = absl::StrCat(min_args);
    } else if (max_args == -1) {
      expected = absl::StrCat("at least ", min_args);
    } else {
      expected = absl::StrCat(min_args, " to ", max_args);
    }
    return OpError(op, "expected ", expected, " arguments, got ", n);
  }
  if (static_cast<int>(results.size()) != num_results) {
    return OpError(op, "expected ", num_results, " results, got ", results.size());
  }
  return absl::OkStatus();
}

absl::Status TensorArgError(absl::string_view op, absl::Span<const OpArg> args, int i,
                            bool any_dtype) {
  const TensorRef* t = args[i].tensor;
  if (t == nullptr) return OpError(op, "argument ", i, " must be a tensor");
  if (t->rank < 0 || t->rank > kMaxRank) {
    return OpError(op, "argument ", i, " has rank ", t->rank, ", the most supported is ", kMaxRank);
  }
  for (int d = 0; d < t->rank; ++d) {
    if (t->sizes[d] < 0) return OpError(op, "argument ", i, " has negative size ", t->sizes[d]);
  }
  if (!IsKnownDType(t->dtype)) return OpError(op, "argument ", i, " has an unknown dtype");
  if (!any_dtype && t->dtype != DType::kFloat32 && t->dtype != DType::kInt64) {
    return absl::UnimplementedError(absl::StrCat(op, ": argument ", i, " has dtype ",
                                                 DTypeName(t->dtype), ", which ", op,
                                                 " does not support (float32 and int64 only)"));
  }
  // Only reached when called for an argument the checks accept.
  return absl::InternalError(absl::StrCat(op, ": argument ", i, " passes every tensor check"));
}

absl::Status CheckDType(absl::string_view op, int i, const TensorRef& t, DType expected) {
  if (t.dtype != expected) {
    return OpError(op, "argument ", i, " has dtype ", DTypeName(t.dtype), ", expected ",
                   DTypeName(expected));
  }
  return absl::OkStatus();
}

absl::Status CheckSameDType(absl::string_view op, int i, const TensorRef& t, int j,
                            const TensorRef& u) {
  if (t.dtype != u.dtype) {
    return OpError(op, "argument ", i, " has dtype ", DTypeName(t.dtype), ", but argument ", j,
                   " has dtype ", DTypeName(u.dtype));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> IntArg(absl::string_view op, absl::Span<const OpArg> args, int i) {
  const Scalar* s = args[i].scalar;
  if (s == nullptr || (s->kind != Scalar::Kind::kInt && s->kind != Scalar::Kind::kBool)) {
    return OpError(op, "argument ", i, " must be an int");
  }
  return s->kind == Scalar::Kind::kInt ? s->i : static_cast<int64_t>(s->b);
}

absl::StatusOr<const std::vector<int64_t>*> IntListArg(absl::string_view op,
                                                       absl::Span<const OpArg> args, int i) {
  const Scalar* s = args[i].scalar;
  if (s == nullptr || s->kind != Scalar::Kind::kIntList) {
    return OpError(op, "argument ", i, " must be an int list");
  }
  return &s->list;
}

absl::StatusOr<const Scalar*> NumberArg(absl::string_view op, absl::Span<const OpArg> args, int i) {
  const Scalar* s = args[i].scalar;
  if (s == nullptr || !s->is_number()) {
    return OpError(op, "argument ", i, " must be a number (int, double or bool)");
  }
  return s;
}

absl::Status CheckNumberFits(absl::string_view op, int i, const Scalar& s, DType dtype) {
  if (dtype == DType::kInt64 && s.kind == Scalar::Kind::kDouble) {
    // 2^63 is exactly representable; anything at or beyond it (or NaN) has no int64 value.
    if (!(s.d > -9223372036854775808.0 && s.d < 9223372036854775808.0)) {
      return OpError(op, "argument ", i, " (", s.d, ") cannot be converted to int64");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> NormalizeDim(absl::string_view op, int i, int64_t dim, int rank) {
  if (rank <= 0 || dim < -rank || dim >= rank) {
    return OpError(op, "argument ", i, " (dim ", dim, ") is out of range for a tensor of rank ",
                   rank);
  }
  return static_cast<int>(dim < 0 ? dim + rank : dim);
}

bool BroadcastShapes(absl::Span<const int64_t> a, absl::Span<const int64_t> b, int64_t* out,
                     int* rank) {
  const size_t r = std::max(a.size(), b.size());
  if (r > static_cast<size_t>(kMaxRank)) return false;
  for (size_t d = 0; d < r; ++d) {
    const int64_t sa = d < r - a.size() ? 1 : a[d - (r - a.size())];
    const int64_t sb = d < r - b.size() ? 1 : b[d - (r - b.size())];
    if (sa != sb && sa != 1 && sb != 1) return false;
    out[d] = sa == 1 ? sb : sa;
  }
  *rank = static_cast<int>(r);
  return true;
}

bool BroadcastShapes(absl::Span<const int64_t> a, absl::Span<const int64_t> b,
                     std::vector<int64_t>* out) {
  int64_t sizes[kMaxRank];
  int rank = 0;
  if (!BroadcastShapes(a, b, sizes, &rank)) return false;
  out->assign(sizes, sizes + rank);
  return true;
}

bool BroadcastsTo(absl::Span<const int64_t> from, absl::Span<const int64_t> to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] != 1 && from[d] != to[d + lead]) return false;
  }
  return true;
}

void BroadcastCopy(const TensorRef& dst, const TensorRef& src) {
  int64_t strides[kMaxRank];
  BroadcastStrides(src, dst.rank, dst.sizes.data(), strides);
  switch (dst.element_size()) {
    case 1:
      StridedCopy<uint8_t>(dst, src.data_as<const uint8_t>(), strides);
      break;
    case 2:
      StridedCopy<uint16_t>(dst, src.data_as<const uint16_t>(), strides);
      break;
    case 4:
      StridedCopy<uint32_t>(dst, src.data_as<const uint32_t>(), strides);
      break;
    default:
      StridedCopy<uint64_t>(dst, src.data_as<const uint64_t>(), strides);
      break;
  }
}

}  // namespace ferry::internal
