// The 16-bit float conversions (base/float16.h) against encodings worked out by hand from the
// formats' definitions, and against an exhaustive round trip: every float16 and bfloat16 bit
// pattern converts to float and back to itself (NaNs to a NaN).
#include "ferry/base/float16.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(Float16, KnownEncodings) {
  EXPECT_EQ(FloatToFloat16(1.0f), 0x3C00);
  EXPECT_EQ(FloatToFloat16(-2.0f), 0xC000);
  EXPECT_EQ(FloatToFloat16(0.5f), 0x3800);
  EXPECT_EQ(FloatToFloat16(65504.0f), 0x7BFF);               // the largest finite
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(FloatToFloat16(0.0f), 0x0000);
  EXPECT_EQ(FloatToFloat16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToFloat16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(FloatToFloat16(1e6f), 0x7C00);  // past the range: infinity
  EXPECT_EQ(FloatToFloat16(-1e6f), 0xFC00);
  EXPECT_EQ(FloatToFloat16(1e-9f), 0x0000);  // under half the smallest subnormal
  EXPECT_TRUE(std::isnan(Float16ToFloat(FloatToFloat16(std::nanf("")))));
  EXPECT_EQ(Float16ToFloat(0x3C00), 1.0f);
  EXPECT_EQ(Float16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(Float16ToFloat(0x03FF), std::ldexp(1023.0f, -24));  // the largest subnormal
  EXPECT_EQ(Float16ToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(Float16ToFloat(0xFC00), -std::numeric_limits<float>::infinity());
}

TEST(Float16, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to the even one, 1.
  EXPECT_EQ(FloatToFloat16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(FloatToFloat16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Just above halfway rounds up.
  EXPECT_EQ(FloatToFloat16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3C01);
  // 65519 rounds down to 65504; 65520 is halfway to 2^16 and rounds to infinity.
  EXPECT_EQ(FloatToFloat16(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToFloat16(65520.0f), 0x7C00);
  // Subnormals: 1.5 * 2^-24 is halfway between 1 and 2 units: to 2; 2.5 units: to 2.
  EXPECT_EQ(FloatToFloat16(1.5f * std::ldexp(1.0f, -24)), 0x0002);
  EXPECT_EQ(FloatToFloat16(2.5f * std::ldexp(1.0f, -24)), 0x0002);
  EXPECT_EQ(FloatToFloat16(0.5f * std::ldexp(1.0f, -24)), 0x0000);  // half a unit: to even 0
}

TEST(Float16, EveryEncodingRoundTrips) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = Float16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7C00u, 0x7C00u) << h;
      EXPECT_NE(h & 0x3FFu, 0u) << h;
      EXPECT_TRUE(std::isnan(Float16ToFloat(FloatToFloat16(f)))) << h;
      continue;
    }
    EXPECT_EQ(FloatToFloat16(f), h) << h;
  }
}

TEST(BFloat16, KnownEncodingsAndRounding) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(-2.0f), 0xC000);
  EXPECT_EQ(BFloat16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0x7F7F), 3.3895313892515355e38f);  // the largest finite
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even, 1; 1 + 3 * 2^-8 to 1 + 2^-6.
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  // A NaN whose payload lies in the dropped bits stays a NaN.
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(BitsFloat(0x7F800001u)))));
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBFloat16(f), b) << b;
  }
}

}  // namespace
}  // namespace ferry
