// Builds without a host BLAS: matmul and linear always take Ferry's own loops.
#include "ferry/kernels/internal/host_blas.h"

namespace ferry::internal {

bool HaveHostBlas() { return false; }
const char* HostBlasKernels() { return "none"; }
bool HostBlasEnabled() { return false; }
void UseHostBlas(bool) {}
void SetHostBlasThreads(int) {}
int HostBlasThreads() { return 1; }
int64_t HostSgemmCalls() { return 0; }
int64_t HostSgemvRows() { return 0; }
void HostSgemm(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t,
               bool, float*, int64_t) {}

}  // namespace ferry::internal
