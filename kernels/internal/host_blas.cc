#include "ferry/kernels/internal/host_blas.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace ferry::internal {
namespace {

std::atomic<bool> g_enabled{true};
std::atomic<int> g_threads{1};
// Per thread, so that products running on several threads at once never share a cache line.
thread_local int64_t t_calls = 0;
thread_local int64_t t_gemv_rows = 0;

// OpenBLAS starts with as many threads as cores: single-threaded until asked otherwise.
void InitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(g_threads.load()); });
}

}  // namespace

bool HaveHostBlas() { return true; }
const char* HostBlasKernels() { return openblas_get_corename(); }
bool HostBlasEnabled() { return g_enabled.load(std::memory_order_relaxed); }
void UseHostBlas(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }

void SetHostBlasThreads(int n) {
  InitOnce();
  g_threads.store(n < 1 ? 1 : n);
  openblas_set_num_threads(g_threads.load());
}

int HostBlasThreads() { return g_threads.load(); }
int64_t HostSgemmCalls() { return t_calls; }
int64_t HostSgemvRows() { return t_gemv_rows; }

void HostSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
               int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  InitOnce();
  ++t_calls;
  if (m <= kHostBlasMaxGemvRows) {
    // Row i of c is op(b)^T times row i of op(a): op(a)[i, p] is a[i * lda + p], or a[p * lda + i]
    // with trans_a. op(b) [k, n] is b as stored ([k, n], read transposed) or, with trans_b, the
    // transpose of b [n, k] (read as stored).
    // Without accumulate the row is zeroed here and summed into: with beta 0 some BLAS versions
    // scale what c held (NaN included) instead of overwriting it.
    t_gemv_rows += m;
    for (int64_t i = 0; i < m; ++i) {
      const float* x = trans_a ? a + i : a + i * lda;
      const blasint incx = static_cast<blasint>(trans_a ? lda : 1);
      float* y = c + i * ldc;
      if (!accumulate) std::fill(y, y + n, 0.0f);
      cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans,
                  static_cast<blasint>(trans_b ? n : k), static_cast<blasint>(trans_b ? k : n),
                  1.0f, b, static_cast<blasint>(ldb), x, incx, 1.0f, y, 1);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), accumulate ? 1.0f : 0.0f,
              c, static_cast<blasint>(ldc));
}

}  // namespace ferry::internal
