// Helpers for the kernel tests: tensors with owned storage, element access by multi-index, a
// driver that runs an op the way the executor does (infer on metadata, then the kernel), and
// naive index loops for the references.
#ifndef FERRY_TESTS_KERNELS_OP_TEST_UTIL_H_
#define FERRY_TESTS_KERNELS_OP_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ferry/base/float16.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/op_registry.h"
#include "gtest/gtest.h"

namespace ferry::testing {

using Index = std::vector<int64_t>;

// Calls f(index) for every multi-index of `sizes` in row-major order.
inline void ForEachIndex(const std::vector<int64_t>& sizes, const std::function<void(const Index&)>& f) {
  for (int64_t s : sizes) {
    if (s == 0) return;
  }
  Index idx(sizes.size(), 0);
  while (true) {
    f(idx);
    int d = static_cast<int>(sizes.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

inline std::vector<int64_t> SizesOf(const TensorRef& t) {
  return std::vector<int64_t>(t.sizes.begin(), t.sizes.begin() + t.rank);
}
inline std::vector<int64_t> StridesOf(const TensorRef& t) {
  return std::vector<int64_t>(t.strides.begin(), t.strides.begin() + t.rank);
}

inline int64_t OffsetOf(const TensorRef& t, const Index& idx) {
  int64_t off = 0;
  for (int d = 0; d < t.rank; ++d) off += idx[d] * t.strides[d];
  return off;
}

// Element at `idx`, as double (int64 values used in tests fit exactly).
inline double Get(const TensorRef& t, const Index& idx) {
  const int64_t off = OffsetOf(t, idx);
  switch (t.dtype) {
    case DType::kFloat32:
      return static_cast<const float*>(t.data)[off];
    case DType::kInt32:
      return static_cast<const int32_t*>(t.data)[off];
    case DType::kBool:
      return static_cast<const uint8_t*>(t.data)[off];
    case DType::kInt8:
      return static_cast<const int8_t*>(t.data)[off];
    case DType::kUInt8:
      return static_cast<const uint8_t*>(t.data)[off];
    case DType::kInt16:
      return static_cast<const int16_t*>(t.data)[off];
    case DType::kUInt16:
      return static_cast<const uint16_t*>(t.data)[off];
    case DType::kFloat16:
      return Float16ToFloat(static_cast<const uint16_t*>(t.data)[off]);
    case DType::kBFloat16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(t.data)[off]);
    case DType::kFloat64:
      return static_cast<const double*>(t.data)[off];
    case DType::kInt64:
      break;
  }
  return static_cast<double>(static_cast<const int64_t*>(t.data)[off]);
}
inline int64_t GetInt(const TensorRef& t, const Index& idx) {
  return static_cast<const int64_t*>(t.data)[OffsetOf(t, idx)];
}

// Element of `t` read under NumPy broadcasting at the index `idx` of a larger shape.
inline double GetBroadcast(const TensorRef& t, const Index& idx) {
  Index sub(t.rank);
  const size_t lead = idx.size() - t.rank;
  for (int d = 0; d < t.rank; ++d) sub[d] = t.sizes[d] == 1 ? 0 : idx[lead + d];
  return Get(t, sub);
}

// A tensor owning its storage. Storage elements are 8 bytes so float and int64 views align.
class TestTensor {
 public:
  // Contiguous tensor with the given values (row-major).
  static TestTensor Float(std::vector<int64_t> sizes, const std::vector<float>& values) {
    TestTensor t(DType::kFloat32, sizes, RowMajor(sizes), 0);
    t.FillFrom([&](int64_t i) { return values.at(i); });
    return t;
  }
  static TestTensor Int(std::vector<int64_t> sizes, const std::vector<int64_t>& values) {
    TestTensor t(DType::kInt64, sizes, RowMajor(sizes), 0);
    t.FillFrom([&](int64_t i) { return static_cast<double>(values.at(i)); }, &values);
    return t;
  }
  static TestTensor Int32(std::vector<int64_t> sizes, const std::vector<int32_t>& values) {
    TestTensor t(DType::kInt32, sizes, RowMajor(sizes), 0);
    t.FillFrom([&](int64_t i) { return static_cast<double>(values.at(i)); });
    return t;
  }
  static TestTensor Bool(std::vector<int64_t> sizes, const std::vector<bool>& values) {
    TestTensor t(DType::kBool, sizes, RowMajor(sizes), 0);
    t.FillFrom([&](int64_t i) { return values.at(i) ? 1.0 : 0.0; });
    return t;
  }
  // Deterministic varied values; `seed` changes them.
  static TestTensor Filled(DType dtype, std::vector<int64_t> sizes, int seed = 0) {
    return Strided(dtype, sizes, RowMajor(sizes), seed);
  }
  // A tensor whose logical elements sit at the given strides inside a larger buffer (the gaps hold
  // a sentinel). Strides must not be 0 here; use View for broadcast views.
  static TestTensor Strided(DType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                            int seed = 0) {
    TestTensor t(dtype, sizes, strides, 0);
    t.FillFrom([&](int64_t i) { return Value(dtype, i, seed); });
    return t;
  }
  // Uninitialized (sentinel-filled) storage with the given layout, for result buffers.
  static TestTensor Empty(DType dtype, std::vector<int64_t> sizes,
                          std::optional<std::vector<int64_t>> strides = std::nullopt) {
    return TestTensor(dtype, sizes, strides.value_or(RowMajor(sizes)), 0);
  }

  TensorRef& ref() { return ref_; }
  const TensorRef& ref() const { return ref_; }
  TensorRef* ptr() { return &ref_; }
  // Another layout over the same storage (e.g. a transposed or 0-stride view).
  TensorRef View(std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset = 0) const {
    TensorRef v;
    v.dtype = ref_.dtype;
    v.rank = static_cast<int32_t>(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d) {
      v.sizes[d] = sizes[d];
      v.strides[d] = strides[d];
    }
    v.data = static_cast<char*>(ref_.data) + offset * static_cast<int64_t>(DTypeSize(ref_.dtype));
    return v;
  }
  // The raw storage, for checking that nothing outside the elements was written.
  const std::vector<uint64_t>& storage() const { return storage_; }
  // Whether storage element `element` (in units of this tensor's dtype, from the start of the
  // buffer) still holds the sentinel bytes it was created with.
  bool Untouched(int64_t element) const {
    const size_t size = DTypeSize(ref_.dtype);
    const auto* bytes = reinterpret_cast<const unsigned char*>(storage_.data());
    for (size_t b = 0; b < size; ++b) {
      const size_t pos = static_cast<size_t>(element) * size + b;
      const uint64_t word = kSentinel;
      if (bytes[pos] != reinterpret_cast<const unsigned char*>(&word)[pos % 8]) return false;
    }
    return true;
  }

  static std::vector<int64_t> RowMajor(const std::vector<int64_t>& sizes) {
    std::vector<int64_t> strides(sizes.size(), 1);
    int64_t s = 1;
    for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
      strides[d] = s;
      s *= std::max<int64_t>(sizes[d], 1);
    }
    return strides;
  }
  static double Value(DType dtype, int64_t i, int seed) {
    const int64_t h = (i * 37 + seed * 11 + 5) % 23;
    if (dtype == DType::kBool) return static_cast<double>(h % 2);
    if (dtype == DType::kUInt8 || dtype == DType::kUInt16) return static_cast<double>(h);
    if (!IsFloatDType(dtype)) return static_cast<double>(h - 11);
    return static_cast<double>(h - 11) * 0.25 + 0.125;  // exact in every float dtype
  }
  static constexpr uint64_t kSentinel = 0x7fc00000deadbeefULL;

  TestTensor(TestTensor&&) = default;
  TestTensor& operator=(TestTensor&&) = default;

 private:
  TestTensor(DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
             int) {
    int64_t extent = 1;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] == 0) extent = 0;
    }
    if (extent != 0) {
      for (size_t d = 0; d < sizes.size(); ++d) extent += (sizes[d] - 1) * strides[d];
    }
    storage_.assign(static_cast<size_t>(extent + 1), kSentinel);
    ref_.dtype = dtype;
    ref_.rank = static_cast<int32_t>(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d) {
      ref_.sizes[d] = sizes[d];
      ref_.strides[d] = strides[d];
    }
    ref_.data = storage_.data();
  }
  void FillFrom(const std::function<double(int64_t)>& value,
                const std::vector<int64_t>* exact_ints = nullptr) {
    int64_t i = 0;
    ForEachIndex(SizesOf(ref_), [&](const Index& idx) {
      const int64_t off = OffsetOf(ref_, idx);
      const double v = value(i);
      if (ref_.dtype == DType::kFloat32) {
        static_cast<float*>(ref_.data)[off] = static_cast<float>(v);
      } else if (ref_.dtype == DType::kInt32) {
        static_cast<int32_t*>(ref_.data)[off] = static_cast<int32_t>(v);
      } else if (ref_.dtype == DType::kBool) {
        static_cast<uint8_t*>(ref_.data)[off] = v != 0.0 ? 1 : 0;
      } else if (ref_.dtype == DType::kInt8) {
        static_cast<int8_t*>(ref_.data)[off] = static_cast<int8_t>(v);
      } else if (ref_.dtype == DType::kUInt8) {
        static_cast<uint8_t*>(ref_.data)[off] = static_cast<uint8_t>(v);
      } else if (ref_.dtype == DType::kInt16) {
        static_cast<int16_t*>(ref_.data)[off] = static_cast<int16_t>(v);
      } else if (ref_.dtype == DType::kUInt16) {
        static_cast<uint16_t*>(ref_.data)[off] = static_cast<uint16_t>(v);
      } else if (ref_.dtype == DType::kFloat16) {
        static_cast<uint16_t*>(ref_.data)[off] = FloatToFloat16(static_cast<float>(v));
      } else if (ref_.dtype == DType::kBFloat16) {
        static_cast<uint16_t*>(ref_.data)[off] = FloatToBFloat16(static_cast<float>(v));
      } else if (ref_.dtype == DType::kFloat64) {
        static_cast<double*>(ref_.data)[off] = v;
      } else {
        static_cast<int64_t*>(ref_.data)[off] =
            exact_ints != nullptr ? exact_ints->at(i) : static_cast<int64_t>(value(i));
      }
      ++i;
    });
  }

  std::vector<uint64_t> storage_;
  TensorRef ref_;
};

// Runs an op the way the executor does: `infer` on metadata only (data null), then result storage
// (or the alias for view results), then the kernel.
struct OpRun {
  absl::Status infer_status;
  absl::Status kernel_status;
  std::vector<InferredResult> inferred;
  std::vector<TestTensor> storage;  // one per non-view result
  std::vector<TensorRef> results;
};

inline OpArg T(TensorRef& t) { return OpArg{&t, nullptr}; }
inline OpArg T(TestTensor& t) { return OpArg{t.ptr(), nullptr}; }
inline OpArg S(const Scalar& s) { return OpArg{nullptr, &s}; }

// Infer only, as at load.
inline absl::Status InferOnly(const OpSchema& schema, const std::vector<OpArg>& args,
                              std::vector<InferredResult>* inferred = nullptr) {
  std::vector<TensorRef> meta(args.size());
  std::vector<OpArg> load_args(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    load_args[i].scalar = args[i].scalar;
    if (args[i].tensor != nullptr) {
      meta[i] = *args[i].tensor;
      meta[i].data = nullptr;
      load_args[i].tensor = &meta[i];
    }
  }
  std::vector<InferredResult> local(schema.num_results);
  absl::Status s = schema.infer(load_args, absl::MakeSpan(local));
  if (inferred != nullptr) *inferred = std::move(local);
  return s;
}

// `result_strides`, when given, replaces the inferred strides of non-view result 0 (a strided
// result buffer the kernel must honour).
inline OpRun RunOp(const OpSchema& schema, const std::vector<OpArg>& args,
                   std::optional<std::vector<int64_t>> result_strides = std::nullopt) {
  OpRun run;
  run.infer_status = InferOnly(schema, args, &run.inferred);
  if (!run.infer_status.ok()) return run;
  run.results.resize(schema.num_results);
  for (int r = 0; r < schema.num_results; ++r) {
    TensorRef layout = run.inferred[r].layout;
    const int j = schema.ViewOf(r);
    if (j >= 0) {
      layout.data = static_cast<char*>(args[j].tensor->data) +
                    run.inferred[r].view_offset * static_cast<int64_t>(DTypeSize(layout.dtype));
      run.results[r] = layout;
      continue;
    }
    std::optional<std::vector<int64_t>> strides;
    if (r == 0 && result_strides.has_value()) strides = result_strides;
    run.storage.push_back(TestTensor::Empty(layout.dtype, SizesOf(layout), strides));
    run.results[r] = run.storage.back().ref();
  }
  std::vector<TensorRef*> ptrs;
  for (TensorRef& t : run.results) ptrs.push_back(&t);
  if (schema.kernel != nullptr) run.kernel_status = schema.kernel(args, ptrs);
  return run;
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_KERNELS_OP_TEST_UTIL_H_
