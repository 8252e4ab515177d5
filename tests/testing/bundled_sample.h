// A small ExecuTorch program with three methods for the tests of bundled programs, and its
// expected outputs computed here in double precision (independently of Ferry's kernels):
//   forward(x: float32[2, 3], y: float32[2, 3]) = x + (y + y)   (aten::add.out twice)
//   count(a: int64[4]) = a + a                                   (aten::add.out, alpha 1)
//   size() = 7                                                    (an int, no instructions)
#ifndef FERRY_TESTS_TESTING_BUNDLED_SAMPLE_H_
#define FERRY_TESTS_TESTING_BUNDLED_SAMPLE_H_

#include <cstdint>
#include <vector>

#include "ferry/loader/executorch/pte_reader.h"
#include "tests/testing/bundle_builder.h"
#include "tests/testing/et_program_parts.h"
#include "tests/testing/pte_writer.h"

namespace ferry::testing {

inline std::vector<uint8_t> SampleBundlePte() {
  EtProgram p;
  EtMethod forward;
  forward.name = "forward";
  forward.values = {FloatTensor({2, 3}), FloatTensor({2, 3}), Int(1), FloatTensor({2, 3}),
                    FloatTensor({2, 3})};
  forward.inputs = {0, 1};
  forward.outputs = {4};
  forward.operators = {{"aten::add", "out"}};
  forward.instructions = {KernelCall(0, {1, 1, 2, 3, 3}), KernelCall(0, {0, 3, 2, 4, 4})};
  EtMethod count;
  count.name = "count";
  count.values = {Int64Tensor({4}), Int(1), Int64Tensor({4})};
  count.inputs = {0};
  count.outputs = {2};
  count.operators = {{"aten::add", "out"}};
  count.instructions = {KernelCall(0, {0, 0, 1, 2, 2})};
  EtMethod size;
  size.name = "size";
  size.values = {Int(7)};
  size.outputs = {0};
  p.methods = {forward, count, size};
  return WritePte(p);
}

// forward's expected output for `x` and `y`, in double precision, stored as float32.
inline std::vector<float> SampleForward(const std::vector<float>& x, const std::vector<float>& y) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = static_cast<float>(static_cast<double>(x[i]) + 2.0 * static_cast<double>(y[i]));
  }
  return out;
}

inline const std::vector<float>& SampleX() {
  static const std::vector<float> x = {1.5f, -2.0f, 0.25f, 3.0f, 10.0f, -0.5f};
  return x;
}
inline const std::vector<float>& SampleY() {
  static const std::vector<float> y = {0.5f, 1.0f, -4.0f, 0.125f, 2.0f, 6.0f};
  return y;
}

// A right case of each method.
inline BundleCase RightForward() {
  return {{FloatValue({2, 3}, SampleX()), FloatValue({2, 3}, SampleY())},
          {FloatValue({2, 3}, SampleForward(SampleX(), SampleY()))}};
}
inline BundleCase RightCount() {
  return {{Int64Value({4}, {1, -2, 3, 4000000000})}, {Int64Value({4}, {2, -4, 6, 8000000000})}};
}
inline BundleCase RightSize() { return {{}, {IntScalar(7)}}; }

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_BUNDLED_SAMPLE_H_
