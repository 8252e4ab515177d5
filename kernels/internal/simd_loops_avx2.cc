// The loops of kernels/internal/simd_loops.h for the avx2 level (compile flags in
// kernels/CMakeLists.txt).
#define FERRY_SIMD_NAMESPACE simd_avx2
#include "ferry/kernels/internal/simd_loops_body.inc"
