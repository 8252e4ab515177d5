// The 16-bit floating-point formats tensors may be stored in, converted to and from float: IEEE
// binary16 (float16: 1 sign, 5 exponent, 10 mantissa bits) and bfloat16 (the top half of a
// float32: 1 sign, 8 exponent, 7 mantissa bits). Ops compute them in float and store the result
// back, as ExecuTorch's portable kernels do.
//
// From float: round to nearest, ties to even; values past the largest finite become infinity;
// NaN stays NaN (quiet). To float: exact.
#ifndef FERRY_BASE_FLOAT16_H_
#define FERRY_BASE_FLOAT16_H_

#include <cstdint>
#include <cstring>

namespace ferry {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float Float16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return BitsFloat(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return BitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return BitsFloat(sign);  // +-0
  // Subnormal: mantissa * 2^-24, normalized for float32.
  int e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return BitsFloat(sign | (static_cast<uint32_t>(e) << 23) | ((mantissa & 0x3FFu) << 13));
}

inline uint16_t FloatToFloat16(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  }
  // 65520 and above round to infinity (65504 is the largest finite).
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (abs < 0x38800000u) {
    // Below 2^-14: a float16 subnormal, a multiple of 2^-24 (or zero).
    if (abs < 0x33000000u) return sign;  // under half of 2^-24: rounds to zero
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // so that the result counts units of 2^-24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent
  return static_cast<uint16_t>(sign | h);
}

inline float BFloat16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBFloat16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);  // ties to even
  return static_cast<uint16_t>((u + rounding) >> 16);
}

}  // namespace ferry

#endif  // FERRY_BASE_FLOAT16_H_
