// The loops of kernels/internal/simd_loops.h for the baseline level (compile flags in
// kernels/CMakeLists.txt).
#define FERRY_SIMD_NAMESPACE simd_baseline
#include "ferry/kernels/internal/simd_loops_body.inc"
