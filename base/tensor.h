// Tensors as kernels see them: plain metadata plus a data pointer, and scalars.
//
// TensorRef is a fixed-size POD (no heap): the executor builds every TensorRef at load and kernels
// read and write through them during Execute without allocating. Sizes and strides are in
// elements; `data` already includes any view offset.
//
//   TensorRef t = TensorRef::Contiguous(DType::kFloat32, {2, 3}, buffer);
//   t.numel();    // 6
//   t.nbytes();   // 24 (the dense size; see StorageBytes for a strided extent)
//
// TensorMeta is the load-time description of a tensor value (dtype, sizes, dim order); it may
// allocate.
#ifndef FERRY_BASE_TENSOR_H_
#define FERRY_BASE_TENSOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ferry {

// The numbers are stored in program files (loader/ferry/schema/program.fbs): new dtypes are
// appended. Ops support float32 and int64 unless their schema says otherwise; the others (bool,
// one byte, 0 or 1; the narrower and unsigned integers; float16 and bfloat16, base/float16.h;
// float64) are carried by copies and views, compared, selected and cast, and refused at load by
// the other ops, naming the op, the argument and the dtype.
enum class DType : uint8_t {
  kFloat32 = 0,
  kInt64 = 1,
  kBool = 2,
  kInt32 = 3,
  kInt8 = 4,
  kUInt8 = 5,
  kInt16 = 6,
  kUInt16 = 7,
  kFloat16 = 8,
  kBFloat16 = 9,
  kFloat64 = 10,
};
inline constexpr int kNumDTypes = 11;

// Whether `dtype` is one of the values above (a DType read from bytes may be anything).
bool IsKnownDType(DType dtype);

// Bytes per element; "float32", "int64", "bool", "int32", "int8", "uint8", "int16", "uint16",
// "float16", "bfloat16", "float64".
size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);
// The element at `p` (DTypeSize(dtype) bytes, any alignment) as a double: exact for every dtype
// but the int64 values beyond 2^53; bool is 0 or 1.
double ElementAsDouble(DType dtype, const void* p);
// float32, float64, float16 or bfloat16.
inline bool IsFloatDType(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

inline constexpr int kMaxRank = 8;

struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int32_t rank = 0;
  std::array<int64_t, kMaxRank> sizes{};
  std::array<int64_t, kMaxRank> strides{};

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= sizes[i];
    return n;
  }
  size_t element_size() const { return DTypeSize(dtype); }
  // Bytes of the elements themselves (numel * element size).
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  // Row-major contiguous.
  bool IsContiguous() const;

  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data);
  }

  // A row-major contiguous tensor over `sizes`.
  static TensorRef Contiguous(DType dtype, absl::Span<const int64_t> sizes, void* data = nullptr);
};

// Element offset of the multi-index `index` (rank entries) in `t`.
inline int64_t ElementOffset(const TensorRef& t, const int64_t* index) {
  int64_t off = 0;
  for (int i = 0; i < t.rank; ++i) off += index[i] * t.strides[i];
  return off;
}

// Sizes of a tensor at load: inline up to rank 4, so most values allocate nothing.
using TensorSizes = absl::InlinedVector<int64_t, 4>;

// Load-time description of a tensor value.
struct TensorMeta {
  DType dtype = DType::kFloat32;
  TensorSizes sizes;
  // Physical order of dimensions, outermost first: {0, 1, ..., rank-1} is row-major; {1, 0} on a
  // 2-D tensor is column-major (a stored transpose); {0, 2, 3, 1} on 4-D is channels-last.
  // Empty means row-major.
  std::vector<int32_t> dim_order;

  int32_t rank() const { return static_cast<int32_t>(sizes.size()); }
  // The dim order with the empty default expanded.
  std::vector<int32_t> ResolvedDimOrder() const;
  // Dense strides (elements) for sizes laid out in dim_order.
  std::vector<int64_t> DenseStrides() const;
  // numel * element size, or nullopt on overflow.
  std::optional<size_t> ByteSize() const;
  // A TensorRef with this metadata, dense in dim_order, pointing at `data`.
  TensorRef ToRef(void* data = nullptr) const;
  // The same written into `out` (every field; sizes and strides past the rank zero): a table of
  // TensorRefs is filled in place, with no copy of a temporary.
  void FillRef(TensorRef& out, void* data = nullptr) const;
  // "float32[2, 2]" (plus " dim_order (1, 0)" when not row-major).
  std::string ToString() const;

  friend bool operator==(const TensorMeta&, const TensorMeta&) = default;
};

// Whether (sizes, strides) is dense: every element at a distinct offset in [0, numel) with no gaps,
// i.e. a permutation of the dimensions of a row-major layout (size-1 dimensions ignored). On
// success, `*dim_order` (if not null) receives that permutation.
bool IsDenseLayout(absl::Span<const int64_t> sizes, absl::Span<const int64_t> strides,
                   std::vector<int32_t>* dim_order);

// A value that is not a tensor: an op's scalar argument (an integer, a floating point number, a
// boolean, a list of integers for sizes and dims), or a method's non-tensor input or output,
// which may also be None, a string, or a list of doubles or booleans (ExecuTorch's EValue kinds).
//
// Layout: 56 bytes, so that ValueDef (loader/model/method_def.h) keeps to three cache lines. The
// kinds ops read (int, double, bool, int list) are inline; a string's bytes and a double list's
// items, which only method inputs and outputs hold, are behind one pointer.
struct Scalar {
  // Appended only: Ferry's program format stores these numbers (loader/ferry/schema).
  enum class Kind : uint8_t {
    kInt,
    kDouble,
    kBool,
    kIntList,
    kNone,
    kString,
    kDoubleList,
    kBoolList,
  };
  Kind kind = Kind::kInt;
  bool b = false;
  int64_t i = 0;
  double d = 0.0;
  std::vector<int64_t> list;  // kIntList; kBoolList as 0 and 1

  static Scalar Int(int64_t v) {
    Scalar s;
    s.kind = Kind::kInt;
    s.i = v;
    return s;
  }
  static Scalar Double(double v) {
    Scalar s;
    s.kind = Kind::kDouble;
    s.d = v;
    return s;
  }
  static Scalar Bool(bool v) {
    Scalar s;
    s.kind = Kind::kBool;
    s.b = v;
    return s;
  }
  static Scalar IntList(std::vector<int64_t> v) {
    Scalar s;
    s.kind = Kind::kIntList;
    s.list = std::move(v);
    return s;
  }
  static Scalar None() {
    Scalar s;
    s.kind = Kind::kNone;
    return s;
  }
  static Scalar String(std::string v);
  static Scalar DoubleList(std::vector<double> v);
  static Scalar BoolList(const std::vector<bool>& v);

  // Whether it is a number (int, double or bool), what ops take as a scalar operand.
  bool is_number() const {
    return kind == Kind::kInt || kind == Kind::kDouble || kind == Kind::kBool;
  }
  // kString: its bytes (empty otherwise).
  absl::string_view str() const;
  // kDoubleList: its items (empty otherwise).
  absl::Span<const double> doubles() const;
  // Numeric value as double (int, double or bool; 0 for the other kinds).
  double AsDouble() const;
  // The value as text: 3, 0.5, true, [1, 2], None, "text" (escaped), [0.5, 1], [true, false].
  std::string ToString() const;
  friend bool operator==(const Scalar&, const Scalar&);

 private:
  struct Heap {
    std::string str;
    std::vector<double> doubles;
    friend bool operator==(const Heap&, const Heap&) = default;
  };
  // A deep-copied pointer: a Scalar is a value.
  struct HeapPtr {
    HeapPtr() = default;
    HeapPtr(const HeapPtr& other)
        : p(other.p == nullptr ? nullptr : std::make_unique<Heap>(*other.p)) {}
    HeapPtr& operator=(const HeapPtr& other) {
      if (this != &other) p = other.p == nullptr ? nullptr : std::make_unique<Heap>(*other.p);
      return *this;
    }
    HeapPtr(HeapPtr&&) noexcept = default;
    HeapPtr& operator=(HeapPtr&&) noexcept = default;
    std::unique_ptr<Heap> p;
  };
  HeapPtr heap_;
};

// "int", "double", "bool", "int list", "None", "string", "double list", "bool list".
const char* ScalarKindName(Scalar::Kind kind);

}  // namespace ferry

#endif  // FERRY_BASE_TENSOR_H_
