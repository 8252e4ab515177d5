#include "ferry/base/tensor.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/base/float16.h"

namespace ferry {
namespace {

// The stride of the next dimension out: stride * size, saturated at INT64_MAX where it would
// overflow. A layout that large describes no tensor that fits in
// memory (shape inference can propose one from arguments that each fit: a linear of [2^49, k] by
// [2^49, k]); its declared sizes or the memory plan refuse it, and until then the arithmetic
// must not overflow.
int64_t SaturatingStride(int64_t stride, int64_t size) {
  int64_t next = 0;
  return __builtin_mul_overflow(stride, size, &next) ? INT64_MAX : next;
}

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
    case DType::kInt32:
      return 4;
    case DType::kInt8:
    case DType::kUInt8:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

bool IsKnownDType(DType dtype) { return DTypeSize(dtype) != 0; }

namespace {
template <typename T>
T LoadUnaligned(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

double ElementAsDouble(DType dtype, const void* p) {
  switch (dtype) {
    case DType::kFloat32:
      return LoadUnaligned<float>(p);
    case DType::kInt64:
      return static_cast<double>(LoadUnaligned<int64_t>(p));
    case DType::kBool:
      return LoadUnaligned<uint8_t>(p) != 0 ? 1.0 : 0.0;
    case DType::kInt32:
      return LoadUnaligned<int32_t>(p);
    case DType::kInt8:
      return LoadUnaligned<int8_t>(p);
    case DType::kUInt8:
      return LoadUnaligned<uint8_t>(p);
    case DType::kInt16:
      return LoadUnaligned<int16_t>(p);
    case DType::kUInt16:
      return LoadUnaligned<uint16_t>(p);
    case DType::kFloat16:
      return Float16ToFloat(LoadUnaligned<uint16_t>(p));
    case DType::kBFloat16:
      return BFloat16ToFloat(LoadUnaligned<uint16_t>(p));
    case DType::kFloat64:
      return LoadUnaligned<double>(p);
  }
  return 0.0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
    case DType::kInt32:
      return "int32";
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt16:
      return "int16";
    case DType::kUInt16:
      return "uint16";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat64:
      return "float64";
  }
  return "unknown";
}

bool TensorRef::IsContiguous() const {
  int64_t expected = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

TensorRef TensorRef::Contiguous(DType dtype, absl::Span<const int64_t> sizes, void* data) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(std::min<size_t>(sizes.size(), kMaxRank));
  int64_t stride = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    t.sizes[i] = sizes[i];
    t.strides[i] = stride;
    if (i > 0) stride = SaturatingStride(stride, sizes[i]);
  }
  return t;
}

std::vector<int32_t> TensorMeta::ResolvedDimOrder() const {
  if (!dim_order.empty()) return dim_order;
  std::vector<int32_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::vector<int64_t> TensorMeta::DenseStrides() const {
  std::vector<int32_t> order = ResolvedDimOrder();
  std::vector<int64_t> strides(sizes.size(), 1);
  int64_t stride = 1;
  for (int i = static_cast<int>(order.size()) - 1; i >= 0; --i) {
    strides[order[i]] = stride;
    stride *= sizes[order[i]];
  }
  return strides;
}

std::optional<size_t> TensorMeta::ByteSize() const {
  size_t n = DTypeSize(dtype);
  for (int64_t s : sizes) {
    if (s < 0) return std::nullopt;
    size_t us = static_cast<size_t>(s);
    if (us != 0 && n > SIZE_MAX / us) return std::nullopt;
    n *= us;
  }
  return n;
}

TensorRef TensorMeta::ToRef(void* data) const {
  TensorRef t;
  FillRef(t, data);
  return t;
}

void TensorMeta::FillRef(TensorRef& t, void* data) const {
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(std::min<size_t>(sizes.size(), kMaxRank));
  t.sizes = {};
  t.strides = {};
  for (int i = 0; i < t.rank; ++i) t.sizes[i] = sizes[i];
  // Dense strides in dim order, innermost last (DenseStrides without its allocations).
  const bool row_major = dim_order.size() != sizes.size();
  int64_t stride = 1;
  for (int i = static_cast<int>(sizes.size()) - 1; i >= 0; --i) {
    const int d = row_major ? i : dim_order[i];
    if (d < t.rank) t.strides[d] = stride;
    if (i > 0) stride = SaturatingStride(stride, sizes[d]);
  }
}

std::string TensorMeta::ToString() const {
  std::string s = absl::StrCat(DTypeName(dtype), "[", absl::StrJoin(sizes, ", "), "]");
  std::vector<int32_t> order = ResolvedDimOrder();
  if (!std::is_sorted(order.begin(), order.end())) {
    absl::StrAppend(&s, " dim_order (", absl::StrJoin(order, ", "), ")");
  }
  return s;
}

bool IsDenseLayout(absl::Span<const int64_t> sizes, absl::Span<const int64_t> strides,
                   std::vector<int32_t>* dim_order) {
  if (sizes.size() != strides.size()) return false;
  const int rank = static_cast<int>(sizes.size());
  // Row-major (size-1 dimensions ignored): the identity order, which the sort below would keep.
  int64_t row_major = 1;
  bool is_row_major = true;
  for (int i = rank - 1; i >= 0 && is_row_major; --i) {
    if (sizes[i] != 1 && strides[i] != row_major) is_row_major = false;
    row_major *= sizes[i];
  }
  if (is_row_major) {
    if (dim_order != nullptr) {
      dim_order->resize(rank);
      std::iota(dim_order->begin(), dim_order->end(), 0);
    }
    return true;
  }
  std::vector<int32_t> order(rank);
  std::iota(order.begin(), order.end(), 0);
  // Outermost first: larger strides first; ties (size-1 dims) keep their logical order.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    if (sizes[a] == 1 || sizes[b] == 1) return false;
    return strides[a] > strides[b];
  });
  int64_t expected = 1;
  for (int i = rank - 1; i >= 0; --i) {
    int32_t d = order[i];
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  if (dim_order != nullptr) *dim_order = order;
  return true;
}

Scalar Scalar::String(std::string v) {
  Scalar s;
  s.kind = Kind::kString;
  s.heap_.p = std::make_unique<Heap>();
  s.heap_.p->str = std::move(v);
  return s;
}

Scalar Scalar::DoubleList(std::vector<double> v) {
  Scalar s;
  s.kind = Kind::kDoubleList;
  s.heap_.p = std::make_unique<Heap>();
  s.heap_.p->doubles = std::move(v);
  return s;
}

Scalar Scalar::BoolList(const std::vector<bool>& v) {
  Scalar s;
  s.kind = Kind::kBoolList;
  s.list.assign(v.begin(), v.end());
  return s;
}

absl::string_view Scalar::str() const {
  if (kind != Kind::kString || heap_.p == nullptr) return {};
  return heap_.p->str;
}

absl::Span<const double> Scalar::doubles() const {
  if (kind != Kind::kDoubleList || heap_.p == nullptr) return {};
  return heap_.p->doubles;
}

bool operator==(const Scalar& a, const Scalar& b) {
  if (a.kind != b.kind || a.i != b.i || a.b != b.b || a.list != b.list) return false;
  // Bitwise for doubles would tell 0.0 from -0.0; == is what the tests and callers mean.
  if (!(a.d == b.d || (a.d != a.d && b.d != b.d))) return false;
  return a.str() == b.str() &&
         std::equal(a.doubles().begin(), a.doubles().end(), b.doubles().begin(), b.doubles().end());
}

double Scalar::AsDouble() const {
  switch (kind) {
    case Kind::kInt:
      return static_cast<double>(i);
    case Kind::kDouble:
      return d;
    case Kind::kBool:
      return b ? 1.0 : 0.0;
    default:
      return 0.0;
  }
}

std::string Scalar::ToString() const {
  switch (kind) {
    case Kind::kInt:
      return absl::StrCat(i);
    case Kind::kDouble:
      return absl::StrCat(d);
    case Kind::kBool:
      return b ? "true" : "false";
    case Kind::kIntList:
      return absl::StrCat("[", absl::StrJoin(list, ", "), "]");
    case Kind::kNone:
      return "None";
    case Kind::kString:
      return absl::StrCat("\"", absl::CHexEscape(str()), "\"");
    case Kind::kDoubleList:
      return absl::StrCat("[", absl::StrJoin(doubles(), ", "), "]");
    case Kind::kBoolList:
      return absl::StrCat("[",
                          absl::StrJoin(list, ", ",
                                        [](std::string* out, int64_t v) {
                                          out->append(v != 0 ? "true" : "false");
                                        }),
                          "]");
  }
  return "?";
}

const char* ScalarKindName(Scalar::Kind kind) {
  switch (kind) {
    case Scalar::Kind::kInt:
      return "int";
    case Scalar::Kind::kDouble:
      return "double";
    case Scalar::Kind::kBool:
      return "bool";
    case Scalar::Kind::kIntList:
      return "int list";
    case Scalar::Kind::kNone:
      return "None";
    case Scalar::Kind::kString:
      return "string";
    case Scalar::Kind::kDoubleList:
      return "double list";
    case Scalar::Kind::kBoolList:
      return "bool list";
  }
  return "unknown kind";
}

}  // namespace ferry
