// Host matrix products through OpenBLAS, when Ferry is built with it (FERRY_HAVE_BLAS; Debian's
// libopenblas-dev). matmul and linear call HostSgemm for float32 operands whose layouts a BLAS
// takes directly and that are large enough to gain; everything else runs Ferry's own loops.
// OpenBLAS sums in its own order, so results differ from Ferry's loops by float32 rounding (tests
// hold them to 1e-4 relative).
//
// Threads: OpenBLAS runs single-threaded unless SetHostBlasThreads asks for more; the setting is
// the process's (OpenBLAS has one), RuntimeOptions::host_blas_threads sets it when a Runtime is
// made.
//
// Thread safety: HostSgemm may run on several threads at once; SetHostBlasThreads while no
// product runs.
#ifndef FERRY_KERNELS_INTERNAL_HOST_BLAS_H_
#define FERRY_KERNELS_INTERNAL_HOST_BLAS_H_

#include <cstdint>

namespace ferry::internal {

// Whether this build has a host BLAS, and whether products use it now (UseHostBlas(false) makes
// matmul and linear take Ferry's loops, for tests and benchmarks).
bool HaveHostBlas();
bool HostBlasEnabled();
void UseHostBlas(bool enabled);

// The kernels the host BLAS picked for this CPU at start-up (OpenBLAS's core name, e.g.
// "Haswell" for its AVX2 kernels, "SkylakeX" or "Cooperlake" for AVX-512); "none" without one.
const char* HostBlasKernels();

// The most threads one product uses; n < 1 counts as 1. A no-op without a host BLAS.
void SetHostBlasThreads(int n);
int HostBlasThreads();

// Products the calling thread has handed to the BLAS (for tests and benchmarks), and the rows of
// them it handed over as matrix-vector products. Counted per thread so that concurrent products
// touch no shared memory on the hot path.
int64_t HostSgemmCalls();
int64_t HostSgemvRows();

// Products at least this large (m * n * k) go to the BLAS.
inline constexpr int64_t kHostBlasMinWork = 32 * 32 * 32;

// Products of at most this many rows (m) are handed over a row at a time, as matrix-vector
// products (sgemv): OpenBLAS's sgemm packs the whole of b on every call, which for a few rows
// costs more than the product (one row by a [1024, 1024] weight: 756 us through sgemm, 63 us
// through sgemv). At 8 rows sgemv per row is still as fast or faster (by a [4096, 1024] weight
// 3.25 against 3.47 ms, by a [1024, 1024] one 0.43 against 0.80 ms), at 16 it can be slower
// (6.25 against 4.25 ms by the larger weight). bench/blas and bench/README.md.
inline constexpr int64_t kHostBlasMaxGemvRows = 8;

// c[m, n] = op(a)[m, k] x op(b)[k, n] + (accumulate ? c : 0), row-major c with row stride ldc;
// op(a) is a (row stride lda) or, with trans_a, the transpose of a [k, m] (row stride lda);
// likewise b. Up to kHostBlasMaxGemvRows rows go through sgemv, one call per row. Requires
// HaveHostBlas().
void HostSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
               int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc);

}  // namespace ferry::internal

#endif  // FERRY_KERNELS_INTERNAL_HOST_BLAS_H_
