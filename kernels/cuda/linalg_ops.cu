// CUDA kernels of the linalg family (kernels/linalg_ops.cc on the host): softmax and rms_norm over
// rows, matmul and linear through cuBLAS or a tiled kernel, and the cuBLAS handles that
// PrepareCudaKernels makes per device.
#include "ferry/kernels/cuda/internal/cuda_common.cuh"
#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>

namespace ferry::cuda_kernels {
namespace {

// ---- Reductions over a row: softmax, rms_norm -----------------------------------------------

template <typename T>
struct MaxOp {
  __device__ T operator()(T a, T b) const { return fmax(a, b); }
};
template <typename T>
struct SumOp {
  __device__ T operator()(T a, T b) const { return a + b; }
};

// Reduces v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `shared` holds one value per warp.
template <typename T, typename F>
__device__ T BlockReduce(T v, T* shared, F f) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  __syncthreads();  // the previous reduction's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = shared[0];
  for (int w = 1; w < warps; ++w) v = f(v, shared[w]);
  return v;
}

// The rows a reduction along one dimension produces: Offsets over the other dimensions for the
// result (operand 0) and the input (operand 1).
struct Rows {
  Offsets<2> layout;
  int64_t count = 0;
};

Rows RowsWithout(const TensorRef& out, const TensorRef& x, int dim) {
  int64_t sizes[kMaxRank];
  int64_t os[kMaxRank];
  int64_t xs[kMaxRank];
  int r = 0;
  for (int d = 0; d < x.rank; ++d) {
    if (d == dim) continue;
    sizes[r] = x.sizes[d];
    os[r] = out.strides[d];
    xs[r] = x.strides[d];
    ++r;
  }
  Rows rows;
  rows.layout = Collapse<2>(r, sizes, {os, xs}, &rows.count);
  return rows;
}

// Threads per row for block-per-row kernels: a multiple of 32 up to 256.
int RowThreads(int64_t len) {
  return static_cast<int>(std::min<int64_t>(kThreads, (len + 31) / 32 * 32));
}

// Rows this short go one per thread (no reduction across threads needed).
constexpr int64_t kShortRow = 32;

__global__ void SoftmaxBlockRows(float* o, const float* x, Offsets<2> rows, int64_t nrows,
                                 int64_t len, int64_t xstep, int64_t ostep) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
    int64_t off[2];
    Decompose(rows, r, off);
    const float* xr = x + off[1];
    float* orow = o + off[0];
    float max = -INFINITY;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) max = fmaxf(max, xr[j * xstep]);
    max = BlockReduce(max, shared, MaxOp<float>());
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) sum += expf(xr[j * xstep] - max);
    sum = BlockReduce(sum, shared, SumOp<float>());
    const float inv = 1.0f / sum;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      orow[j * ostep] = expf(xr[j * xstep] - max) * inv;
    }
  }
}

__global__ void SoftmaxThreadRows(float* o, const float* x, Offsets<2> rows, int64_t nrows,
                                  int64_t len, int64_t xstep, int64_t ostep) {
  for (int64_t r = GridStart(); r < nrows; r += GridStep()) {
    int64_t off[2];
    Decompose(rows, r, off);
    const float* xr = x + off[1];
    float* orow = o + off[0];
    float max = -INFINITY;
    for (int64_t j = 0; j < len; ++j) max = fmaxf(max, xr[j * xstep]);
    float sum = 0.0f;
    for (int64_t j = 0; j < len; ++j) {
      const float e = expf(xr[j * xstep] - max);
      orow[j * ostep] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < len; ++j) orow[j * ostep] *= inv;
  }
}

absl::Status SoftmaxKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& x = *args[0].tensor;
  const TensorRef& out = *results[0];
  if (x.dtype != DType::kFloat32) return UnsupportedDType("softmax", x.dtype);
  const int64_t raw = IntScalar(*args[1].scalar);
  const int dim = static_cast<int>(raw < 0 ? raw + x.rank : raw);
  const int64_t len = x.sizes[dim];
  const Rows rows = RowsWithout(out, x, dim);
  if (len == 0 || rows.count == 0) return absl::OkStatus();
  float* o = out.data_as<float>();
  const float* xd = x.data_as<const float>();
  if (len <= kShortRow) {
    SoftmaxThreadRows<<<Blocks(rows.count), kThreads, 0, CurrentStream()>>>(
        o, xd, rows.layout, rows.count, len, x.strides[dim], out.strides[dim]);
    return LaunchStatus("softmax", "SoftmaxThreadRows");
  }
  const int blocks = static_cast<int>(std::min(rows.count, kMaxBlocks));
  SoftmaxBlockRows<<<blocks, RowThreads(len), 0, CurrentStream()>>>(
      o, xd, rows.layout, rows.count, len, x.strides[dim], out.strides[dim]);
  return LaunchStatus("softmax", "SoftmaxBlockRows");
}

__global__ void RmsNormBlockRows(float* o, const float* x, const float* w, Offsets<2> rows,
                                 int64_t nrows, int64_t len, int64_t xstep, int64_t ostep,
                                 int64_t wstep, double eps) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
    int64_t off[2];
    Decompose(rows, r, off);
    const float* xr = x + off[1];
    float* orow = o + off[0];
    double sum_sq = 0.0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      const double v = xr[j * xstep];
      sum_sq += v * v;
    }
    sum_sq = BlockReduce(sum_sq, shared, SumOp<double>());
    const float scale = static_cast<float>(1.0 / sqrt(sum_sq / static_cast<double>(len) + eps));
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      orow[j * ostep] = xr[j * xstep] * scale * w[j * wstep];
    }
  }
}

__global__ void RmsNormThreadRows(float* o, const float* x, const float* w, Offsets<2> rows,
                                  int64_t nrows, int64_t len, int64_t xstep, int64_t ostep,
                                  int64_t wstep, double eps) {
  for (int64_t r = GridStart(); r < nrows; r += GridStep()) {
    int64_t off[2];
    Decompose(rows, r, off);
    const float* xr = x + off[1];
    float* orow = o + off[0];
    double sum_sq = 0.0;
    for (int64_t j = 0; j < len; ++j) {
      const double v = xr[j * xstep];
      sum_sq += v * v;
    }
    const float scale = static_cast<float>(1.0 / sqrt(sum_sq / static_cast<double>(len) + eps));
    for (int64_t j = 0; j < len; ++j) orow[j * ostep] = xr[j * xstep] * scale * w[j * wstep];
  }
}

absl::Status RmsNormKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& x = *args[0].tensor;
  const TensorRef& w = *args[1].tensor;
  const TensorRef& out = *results[0];
  if (x.dtype != DType::kFloat32) return UnsupportedDType("rms_norm", x.dtype);
  const double eps = args[2].scalar->AsDouble();
  const int last = x.rank - 1;
  const int64_t len = x.sizes[last];
  const Rows rows = RowsWithout(out, x, last);
  if (len == 0 || rows.count == 0) return absl::OkStatus();
  float* o = out.data_as<float>();
  const float* xd = x.data_as<const float>();
  const float* wd = w.data_as<const float>();
  if (len <= kShortRow) {
    RmsNormThreadRows<<<Blocks(rows.count), kThreads, 0, CurrentStream()>>>(
        o, xd, wd, rows.layout, rows.count, len, x.strides[last], out.strides[last], w.strides[0],
        eps);
    return LaunchStatus("rms_norm", "RmsNormThreadRows");
  }
  const int blocks = static_cast<int>(std::min(rows.count, kMaxBlocks));
  RmsNormBlockRows<<<blocks, RowThreads(len), 0, CurrentStream()>>>(
      o, xd, wd, rows.layout, rows.count, len, x.strides[last], out.strides[last], w.strides[0],
      eps);
  return LaunchStatus("rms_norm", "RmsNormBlockRows");
}

// ---- matmul, linear -------------------------------------------------------------------------

constexpr int kTile = 16;

// O[i, j] = sum_k A[i, k] * B[k, j] (+ bias[j]) per batch, with every operand strided:
//   A[i, k] at a + batch_a + row_a(i) + k * a_k
//   B[k, j] at b + batch_b + k * b_k + j * b_n
//   O[i, j] at o + batch_o + row_o(i) + j * o_n
// row_*(i) come from `rows` (one dimension for matmul, the leading dimensions of x for linear),
// batch_* from `batch`. The sum runs over k in order, as on the host.
struct GemmParams {
  float* o = nullptr;
  const float* a = nullptr;
  const float* b = nullptr;
  const float* bias = nullptr;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t a_k = 0;
  int64_t b_k = 0;
  int64_t b_n = 0;
  int64_t o_n = 0;
  int64_t bias_n = 0;
  Offsets<2> rows;   // (o, a)
  Offsets<3> batch;  // (o, a, b)
  int64_t batch_count = 1;
  // B is read along k when b_k == 1 (a transposed weight, as in linear), so tile loads coalesce.
  bool b_along_k = false;
};

__global__ void GemmTiled(GemmParams p) {
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  // Every loop bound below depends on block indices only, so the barriers are uniform.
  for (int64_t bt = blockIdx.z; bt < p.batch_count; bt += gridDim.z) {
    int64_t boff[3];
    Decompose(p.batch, bt, boff);
    const float* b = p.b + boff[2];
    for (int64_t rt = blockIdx.y; rt * kTile < p.m; rt += gridDim.y) {
      const int64_t row = rt * kTile + ty;
      const bool row_ok = row < p.m;
      int64_t roff[2] = {0, 0};
      if (row_ok) Decompose(p.rows, row, roff);
      const float* arow = p.a + boff[1] + roff[1];
      for (int64_t ct = blockIdx.x; ct * kTile < p.n; ct += gridDim.x) {
        const int64_t col = ct * kTile + tx;
        float acc = 0.0f;
        for (int64_t k0 = 0; k0 < p.k; k0 += kTile) {
          const int64_t ka = k0 + tx;
          as[ty][tx] = (row_ok && ka < p.k) ? arow[ka * p.a_k] : 0.0f;
          if (p.b_along_k) {
            const int64_t kb = k0 + tx;
            const int64_t cb = ct * kTile + ty;
            bs[tx][ty] = (kb < p.k && cb < p.n) ? b[kb * p.b_k + cb * p.b_n] : 0.0f;
          } else {
            const int64_t kb = k0 + ty;
            bs[ty][tx] = (kb < p.k && col < p.n) ? b[kb * p.b_k + col * p.b_n] : 0.0f;
          }
          __syncthreads();
#pragma unroll
          for (int kk = 0; kk < kTile; ++kk) acc += as[ty][kk] * bs[kk][tx];
          __syncthreads();
        }
        if (row_ok && col < p.n) {
          if (p.bias != nullptr) acc += p.bias[col * p.bias_n];
          p.o[boff[0] + roff[0] + col * p.o_n] = acc;
        }
      }
    }
  }
}

absl::Status LaunchGemm(absl::string_view op, const GemmParams& p) {
  if (p.m == 0 || p.n == 0 || p.batch_count == 0) return absl::OkStatus();
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((p.n + kTile - 1) / kTile, kMaxBlocks)),
                  static_cast<unsigned>(std::min<int64_t>((p.m + kTile - 1) / kTile, kMaxGridYZ)),
                  static_cast<unsigned>(std::min<int64_t>(p.batch_count, kMaxGridYZ)));
  GemmTiled<<<grid, block, 0, CurrentStream()>>>(p);
  return LaunchStatus(op, "GemmTiled");
}

// ---- cuBLAS ---------------------------------------------------------------------------------

// cuBLAS is opened with dlopen by the first PrepareCudaKernels, not linked: linking it makes every
// process that links the kernels (each test binary, the CLI, the benchmarks) load cuBLAS and
// cuBLASLt at start-up, GPU or not, which costs about half a second per process. `cublas` holds
// the entry points; it is filled under g_cublas_mutex before any device is marked ready, and read
// only after that (see CublasDevice).
#define FERRY_STRINGIFY_EXPANDED(x) FERRY_STRINGIFY(x)
#define FERRY_STRINGIFY(x) #x

constexpr const char* kCublasSoname = "libcublas.so." FERRY_STRINGIFY_EXPANDED(CUBLAS_VER_MAJOR);

struct CublasApi {
  decltype(&cublasCreate) Create = nullptr;
  decltype(&cublasDestroy) Destroy = nullptr;
  decltype(&cublasSetMathMode) SetMathMode = nullptr;
  decltype(&cublasSetWorkspace) SetWorkspace = nullptr;
  decltype(&cublasSetStream) SetStream = nullptr;
  decltype(&cublasSgemm) Sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) SgemmStridedBatched = nullptr;
  decltype(&cublasGetStatusName) GetStatusName = nullptr;
  decltype(&cublasGetStatusString) GetStatusString = nullptr;
};

CublasApi cublas;
std::mutex g_cublas_mutex;

// Opens cuBLAS and fills `cublas`, once; the caller holds g_cublas_mutex.
absl::Status LoadCublas() {
  static bool loaded = false;
  if (loaded) return absl::OkStatus();
  // The soname through the usual search (the binaries' run path names the toolkit's library
  // directory), then the library this build was configured with.
  std::string errors;
  void* library = nullptr;
  for (const char* name : {kCublasSoname, FERRY_CUBLAS_LIBRARY}) {
    library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    const char* error = dlerror();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", error != nullptr ? error : name);
  }
  if (library == nullptr) {
    return absl::InternalError(absl::StrCat("cuBLAS could not be loaded: ", errors));
  }
  CublasApi api;
  auto find = [library](auto& entry, const char* symbol) -> absl::Status {
    void* address = dlsym(library, symbol);
    if (address == nullptr) {
      return absl::InternalError(absl::StrCat("cuBLAS (", kCublasSoname, ") lacks ", symbol));
    }
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(address);
    return absl::OkStatus();
  };
  // The names after cublas_v2.h's renames (cublasCreate is cublasCreate_v2, ...).
#define FERRY_FIND_CUBLAS(entry, function) \
  FERRY_RETURN_IF_ERROR(find(api.entry, FERRY_STRINGIFY_EXPANDED(function)))
  FERRY_FIND_CUBLAS(Create, cublasCreate);
  FERRY_FIND_CUBLAS(Destroy, cublasDestroy);
  FERRY_FIND_CUBLAS(SetMathMode, cublasSetMathMode);
  FERRY_FIND_CUBLAS(SetWorkspace, cublasSetWorkspace);
  FERRY_FIND_CUBLAS(SetStream, cublasSetStream);
  FERRY_FIND_CUBLAS(Sgemm, cublasSgemm);
  FERRY_FIND_CUBLAS(SgemmStridedBatched, cublasSgemmStridedBatched);
  FERRY_FIND_CUBLAS(GetStatusName, cublasGetStatusName);
  FERRY_FIND_CUBLAS(GetStatusString, cublasGetStatusString);
#undef FERRY_FIND_CUBLAS
  cublas = api;
  loaded = true;  // the library stays open for the process's life
  return absl::OkStatus();
}

// A failed cuBLAS call as CudaStatus reports a CUDA one: Internal (ResourceExhausted when cuBLAS
// could not allocate) with the expression, cuBLAS's status name and text, and file:line.
absl::Status CublasStatus(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusCode code = status == CUBLAS_STATUS_ALLOC_FAILED
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(expr, " failed: ", cublas.GetStatusName(status), " (",
                                         cublas.GetStatusString(status), ") at ", file, ":",
                                         line));
}

#define FERRY_CUBLAS_OP_RETURN_IF_ERROR(op, expr) \
  FERRY_RETURN_IF_ERROR(WithOp((op), CublasStatus((expr), #expr, __FILE__, __LINE__)))

// The cuBLAS state of one device. PrepareCudaKernels fills it under g_cublas_mutex and then sets
// `ready` (release); kernels read it after an acquire load of `ready`, without a lock. `stream` is
// changed by kernels only, one thread per device at a time (see the header).
struct CublasDevice {
  std::atomic<bool> ready{false};
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;  // ours, so cuBLAS never allocates one while a method executes
  size_t workspace_bytes = 0;
  // Recorded after every cuBLAS call. A stream that takes the handle over waits for it first: the
  // previous stream's last call may still be using the workspace.
  cudaEvent_t last_use = nullptr;
  cudaStream_t stream = nullptr;  // the stream the handle is bound to
};

CublasDevice g_cublas[kMaxCudaDevices];

thread_local CudaGemmCounts t_gemm_counts;

absl::Status CreateCublas(int index, absl::string_view op, CublasDevice& d) {
  FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaSetDevice(index));
  int major = 0;
  FERRY_CUDA_OP_RETURN_IF_ERROR(
      op, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  // The workspace size cuBLAS recommends: 32 MiB from Hopper on, 4 MiB before.
  const size_t workspace_bytes = size_t{major >= 9 ? 32u : 4u} << 20;
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  cudaEvent_t last_use = nullptr;
  auto create = [&]() -> absl::Status {
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(op, cublas.Create(&handle));
    // Results are compared with the host's in float32: no TF32 (CUBLAS_DEFAULT_MATH never
    // lowers the precision of float32 operands), set explicitly rather than trusted as default.
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(op, cublas.SetMathMode(handle, CUBLAS_DEFAULT_MATH));
    FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaMalloc(&workspace, workspace_bytes));
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(op, cublas.SetWorkspace(handle, workspace, workspace_bytes));
    FERRY_CUDA_OP_RETURN_IF_ERROR(op,
                                  cudaEventCreateWithFlags(&last_use, cudaEventDisableTiming));
    return absl::OkStatus();
  };
  const absl::Status status = create();
  if (!status.ok()) {
    if (last_use != nullptr) cudaEventDestroy(last_use);
    if (workspace != nullptr) cudaFree(workspace);
    if (handle != nullptr) cublas.Destroy(handle);
    return status;
  }
  d.handle = handle;
  d.workspace = workspace;
  d.workspace_bytes = workspace_bytes;
  d.last_use = last_use;
  d.stream = nullptr;  // cublasCreate binds the legacy default stream
  d.ready.store(true, std::memory_order_release);
  return absl::OkStatus();
}

// The cuBLAS state of the calling thread's current device, bound to the current stream; nullptr
// when PrepareCudaKernels has not run for that device (the caller takes the tiled kernel).
absl::StatusOr<CublasDevice*> CurrentCublas(absl::string_view op) {
  int device = -1;
  FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaGetDevice(&device));
  if (device < 0 || device >= kMaxCudaDevices) return nullptr;
  CublasDevice& d = g_cublas[device];
  if (!d.ready.load(std::memory_order_acquire)) return nullptr;
  if (d.stream != CurrentStream()) {
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(op, cublas.SetStream(d.handle, CurrentStream()));
    // cublasSetStream drops the user workspace: set it again.
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(
        op, cublas.SetWorkspace(d.handle, d.workspace, d.workspace_bytes));
    FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaStreamWaitEvent(CurrentStream(), d.last_use, 0));
    d.stream = CurrentStream();
  }
  return &d;
}

// How cuBLAS (column-major) reads a row-major operand of `rows` x `cols` with element strides
// (row_stride, col_stride). Row-major storage with leading dimension `ld` is, to cuBLAS, the
// transpose stored column-major, so in the swapped product below it takes CUBLAS_OP_N; a
// transposed view of a row-major matrix (unit row stride) takes CUBLAS_OP_T. Strides of size-1
// dimensions are ignored. ok is false for anything else (broadcast, gaps in both dimensions,
// overlapping rows, negative strides, a leading dimension beyond int).
struct BlasOperand {
  bool ok = false;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;
};

BlasOperand AsBlasOperand(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (cols == 1 || col_stride == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : row_stride;
    if (ld >= std::max<int64_t>(cols, 1) && ld <= kIntMax) return {true, CUBLAS_OP_N, ld};
  }
  if (rows == 1 || row_stride == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : col_stride;
    if (ld >= std::max<int64_t>(rows, 1) && ld <= kIntMax) return {true, CUBLAS_OP_T, ld};
  }
  return {};
}

// C = A B (plus what C holds when `accumulate`) for `batch` problems of row-major [m, k] x [k, n],
// with C row-major contiguous and the problems `m * n` elements apart. cuBLAS is column-major, so
// it computes C^T = B^T A^T: B is its first operand and A its second.
struct BlasGemm {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t batch = 1;
  const float* a = nullptr;
  BlasOperand a_op;
  int64_t a_batch_stride = 0;  // 0 for a broadcast operand, which cuBLAS allows for A and B
  const float* b = nullptr;
  BlasOperand b_op;
  int64_t b_batch_stride = 0;
  float* c = nullptr;
  bool accumulate = false;
};

// Fills `*g` and returns true when the strided GEMM `p` is one cuBLAS takes directly: every
// operand a matrix cuBLAS reads (AsBlasOperand), at most one batch dimension after collapsing
// (uniform batch strides), and a contiguous result.
bool AsBlasGemm(const GemmParams& p, BlasGemm* g) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (p.k == 0 || p.rows.rank > 1 || p.batch.rank > 1) return false;
  if (p.m > kIntMax || p.n > kIntMax || p.k > kIntMax || p.batch_count > kIntMax) return false;
  const int64_t o_row = p.rows.rank == 1 ? p.rows.strides[0][0] : p.n;
  const int64_t a_row = p.rows.rank == 1 ? p.rows.strides[1][0] : 0;
  if ((p.n > 1 && p.o_n != 1) || (p.m > 1 && o_row != p.n)) return false;
  if (p.batch.rank == 1 && p.batch.strides[0][0] != p.m * p.n) return false;
  g->a_op = AsBlasOperand(p.m, p.k, a_row, p.a_k);
  g->b_op = AsBlasOperand(p.k, p.n, p.b_k, p.b_n);
  if (!g->a_op.ok || !g->b_op.ok) return false;
  g->m = p.m;
  g->n = p.n;
  g->k = p.k;
  g->batch = p.batch_count;
  g->a = p.a;
  g->b = p.b;
  g->c = p.o;
  g->a_batch_stride = p.batch.rank == 1 ? p.batch.strides[1][0] : 0;
  g->b_batch_stride = p.batch.rank == 1 ? p.batch.strides[2][0] : 0;
  g->accumulate = p.bias != nullptr;
  return true;
}

absl::Status RunCublasGemm(absl::string_view op, CublasDevice& d, const BlasGemm& g) {
  const float alpha = 1.0f;
  const float beta = g.accumulate ? 1.0f : 0.0f;
  const int m = static_cast<int>(g.m);
  const int n = static_cast<int>(g.n);
  const int k = static_cast<int>(g.k);
  const int lda = static_cast<int>(g.a_op.ld);
  const int ldb = static_cast<int>(g.b_op.ld);
  if (g.batch == 1) {
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(
        op, cublas.Sgemm(d.handle, g.b_op.op, g.a_op.op, n, m, k, &alpha, g.b, ldb, g.a, lda,
                         &beta, g.c, n));
  } else {
    const long long c_batch_stride = static_cast<long long>(g.m) * g.n;
    FERRY_CUBLAS_OP_RETURN_IF_ERROR(
        op, cublas.SgemmStridedBatched(d.handle, g.b_op.op, g.a_op.op, n, m, k, &alpha, g.b,
                                       ldb, g.b_batch_stride, g.a, lda, g.a_batch_stride, &beta,
                                       g.c, n, c_batch_stride, static_cast<int>(g.batch)));
  }
  FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaEventRecord(d.last_use, CurrentStream()));
  ++t_gemm_counts.cublas;
  return absl::OkStatus();
}

// out[i, j] = bias[j] over linear's contiguous [m, n] result, for cuBLAS to add the product to.
absl::Status FillRowsWithBias(absl::string_view op, const GemmParams& p) {
  const int64_t sizes[2] = {p.m, p.n};
  const int64_t out_strides[2] = {p.n, 1};
  const int64_t bias_strides[2] = {0, p.bias_n};
  int64_t count = 0;
  const Offsets<2> l = Collapse<2>(2, sizes, {out_strides, bias_strides}, &count);
  CopyStrided<float><<<Blocks(count), kThreads, 0, CurrentStream()>>>(p.o, p.bias, l, count);
  return LaunchStatus(op, "CopyStrided");
}

// cuBLAS when the layouts and the device allow it, the tiled kernel otherwise.
absl::Status RunGemm(absl::string_view op, const GemmParams& p) {
  if (p.m == 0 || p.n == 0 || p.batch_count == 0) return absl::OkStatus();
  BlasGemm g;
  if (AsBlasGemm(p, &g)) {
    FERRY_ASSIGN_OR_RETURN(CublasDevice* cublas, CurrentCublas(op));
    if (cublas != nullptr) {
      if (g.accumulate) FERRY_RETURN_IF_ERROR(FillRowsWithBias(op, p));
      return RunCublasGemm(op, *cublas, g);
    }
  }
  ++t_gemm_counts.tiled;
  return LaunchGemm(op, p);
}

absl::Status MatmulKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& a = *args[0].tensor;
  const TensorRef& b = *args[1].tensor;
  const TensorRef& out = *results[0];
  if (out.dtype != DType::kFloat32) return UnsupportedDType("matmul", out.dtype);
  const int batch_rank = out.rank - 2;
  TensorRef a_lead = a;
  a_lead.rank = a.rank - 2;
  TensorRef b_lead = b;
  b_lead.rank = b.rank - 2;
  int64_t a_strides[kMaxRank];
  int64_t b_strides[kMaxRank];
  BroadcastStrides(a_lead, batch_rank, out.sizes.data(), a_strides);
  BroadcastStrides(b_lead, batch_rank, out.sizes.data(), b_strides);
  GemmParams p;
  p.o = out.data_as<float>();
  p.a = a.data_as<const float>();
  p.b = b.data_as<const float>();
  p.m = out.sizes[out.rank - 2];
  p.n = out.sizes[out.rank - 1];
  p.k = a.sizes[a.rank - 1];
  p.a_k = a.strides[a.rank - 1];
  p.b_k = b.strides[b.rank - 2];
  p.b_n = b.strides[b.rank - 1];
  p.o_n = out.strides[out.rank - 1];
  const int64_t m = p.m;
  const int64_t os0 = out.strides[out.rank - 2];
  const int64_t as0 = a.strides[a.rank - 2];
  int64_t row_count = 0;
  p.rows = Collapse<2>(1, &m, {&os0, &as0}, &row_count);
  p.batch = Collapse<3>(batch_rank, out.sizes.data(), {out.strides.data(), a_strides, b_strides},
                        &p.batch_count);
  p.b_along_k = p.b_k == 1 && p.b_n != 1;
  return RunGemm("matmul", p);
}

absl::Status LinearKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& x = *args[0].tensor;
  const TensorRef& w = *args[1].tensor;
  const TensorRef* bias = args.size() == 3 ? args[2].tensor : nullptr;
  const TensorRef& out = *results[0];
  if (out.dtype != DType::kFloat32) return UnsupportedDType("linear", out.dtype);
  const int lead = x.rank - 1;
  GemmParams p;
  p.o = out.data_as<float>();
  p.a = x.data_as<const float>();
  p.b = w.data_as<const float>();  // B[k, j] = w[j, k]
  p.bias = bias != nullptr ? bias->data_as<const float>() : nullptr;
  p.bias_n = bias != nullptr ? bias->strides[0] : 0;
  p.n = w.sizes[0];
  p.k = x.sizes[lead];
  p.a_k = x.strides[lead];
  p.b_k = w.strides[1];
  p.b_n = w.strides[0];
  p.o_n = out.strides[lead];
  p.rows = Collapse<2>(lead, out.sizes.data(), {out.strides.data(), x.strides.data()}, &p.m);
  p.b_along_k = p.b_k == 1 && p.b_n != 1;
  return RunGemm("linear", p);
}

}  // namespace

absl::Status PrepareDevice(int device_index) {
  if (device_index < 0 || device_index >= kMaxCudaDevices) {
    return absl::InvalidArgumentError(absl::StrCat("PrepareCudaKernels: device index ",
                                                   device_index, " is outside [0, ",
                                                   kMaxCudaDevices, ")"));
  }
  CublasDevice& d = g_cublas[device_index];
  if (d.ready.load(std::memory_order_acquire)) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(g_cublas_mutex);
  if (d.ready.load(std::memory_order_relaxed)) return absl::OkStatus();
  const std::string op = absl::StrCat("preparing the CUDA kernels of cuda:", device_index);
  FERRY_RETURN_IF_ERROR(WithOp(op, LoadCublas()));
  int previous = 0;
  FERRY_CUDA_OP_RETURN_IF_ERROR(op, cudaGetDevice(&previous));
  absl::Status status = CreateCublas(device_index, op, d);  // leaves the device current
  if (status.ok()) status.Update(WithOp(op, PrepareIndexStaging(device_index)));
  const absl::Status restored = WithOp(
      op, internal::CudaStatus(cudaSetDevice(previous), "cudaSetDevice(previous)", __FILE__,
                               __LINE__));
  FERRY_RETURN_IF_ERROR(status);
  return restored;
}

CudaGemmCounts GemmCounts() { return t_gemm_counts; }

void AddLinalgKernels(KernelTable& t) {
  t.emplace("softmax", &SoftmaxKernel);
  t.emplace("rms_norm", &RmsNormKernel);
  t.emplace("matmul", &MatmulKernel);
  t.emplace("linear", &LinearKernel);
}

}  // namespace ferry::cuda_kernels
