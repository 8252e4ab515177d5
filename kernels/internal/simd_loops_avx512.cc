// The loops of kernels/internal/simd_loops.h for the avx512 level (compile flags in
// kernels/CMakeLists.txt).
#define FERRY_SIMD_NAMESPACE simd_avx512
#include "ferry/kernels/internal/simd_loops_body.inc"
