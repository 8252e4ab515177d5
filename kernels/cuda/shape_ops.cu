// CUDA kernels of the shape family (kernels/shape_ops.cc on the host): clone, reshape, cat and
// sym_size. Views need no kernel: the executor aliases them.
#include "ferry/kernels/cuda/internal/cuda_common.cuh"

namespace ferry::cuda_kernels {
namespace {

// Element i of dst (row-major over its shape) = element i of src (row-major over its own shape).
template <typename T>
__global__ void LogicalCopyStrided(T* o, const T* s, Offsets<1> dst, Offsets<1> src, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    int64_t d[1];
    int64_t r[1];
    Decompose(dst, i, d);
    Decompose(src, i, r);
    o[d[0]] = s[r[0]];
  }
}

absl::Status CloneKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  return BroadcastCopy("clone", *results[0], *args[0].tensor);
}

// Row-major element order of src into dst; the shapes may differ, the counts match.
template <typename T>
absl::Status RunLogicalCopy(const TensorRef& dst, const TensorRef& src) {
  const int64_t n = dst.numel();
  if (n == 0) return absl::OkStatus();
  T* o = dst.data_as<T>();
  const T* s = src.data_as<const T>();
  if (IsContiguousFast(dst) && IsContiguousFast(src)) {
    if (o != s) {
      FERRY_CUDA_OP_RETURN_IF_ERROR(
          "reshape",
          cudaMemcpyAsync(o, s, static_cast<size_t>(n) * sizeof(T), cudaMemcpyDefault,
                          CurrentStream()));
    }
    return absl::OkStatus();
  }
  int64_t dst_count = 0;
  int64_t src_count = 0;
  const Offsets<1> dl = Collapse<1>(dst.rank, dst.sizes.data(), {dst.strides.data()}, &dst_count);
  const Offsets<1> sl = Collapse<1>(src.rank, src.sizes.data(), {src.strides.data()}, &src_count);
  LogicalCopyStrided<T><<<Blocks(n), kThreads, 0, CurrentStream()>>>(o, s, dl, sl, n);
  return LaunchStatus("reshape", "LogicalCopyStrided");
}

absl::Status ReshapeKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& src = *args[0].tensor;
  if (src.dtype == DType::kFloat32) return RunLogicalCopy<float>(*results[0], src);
  if (src.dtype == DType::kInt64) return RunLogicalCopy<int64_t>(*results[0], src);
  return UnsupportedDType("reshape", src.dtype);
}

// cat(dim, t1, t2, ...): each input copied into its slab of the result along `dim`.
absl::Status CatKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& out = *results[0];
  const int64_t raw = IntScalar(*args[0].scalar);
  const int dim = static_cast<int>(raw < 0 ? raw + out.rank : raw);
  char* base = static_cast<char*>(out.data);
  const int64_t elem = static_cast<int64_t>(out.element_size());
  int64_t at = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    const TensorRef& src = *args[i].tensor;
    TensorRef dst = out;
    dst.sizes[dim] = src.sizes[dim];
    dst.data = base + at * out.strides[dim] * elem;
    FERRY_RETURN_IF_ERROR(BroadcastCopy("cat", dst, src));
    at += src.sizes[dim];
  }
  return absl::OkStatus();
}
// ---- sym_size -------------------------------------------------------------------------------

__global__ void WriteInt64(int64_t* o, int64_t value) { *o = value; }

absl::Status SymSizeKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  // Reads only the argument's metadata; the value travels as a kernel parameter.
  const TensorRef& t = *args[0].tensor;
  const int64_t raw = IntScalar(*args[1].scalar);
  const int dim = static_cast<int>(raw < 0 ? raw + t.rank : raw);
  WriteInt64<<<1, 1, 0, CurrentStream()>>>(results[0]->data_as<int64_t>(), t.sizes[dim]);
  return LaunchStatus("sym_size", "WriteInt64");
}

}  // namespace

void AddShapeKernels(KernelTable& t) {
  t.emplace("clone", &CloneKernel);
  t.emplace("reshape", &ReshapeKernel);
  t.emplace("cat", &CatKernel);
  t.emplace("sym_size", &SymSizeKernel);
}

}  // namespace ferry::cuda_kernels
