// Test cases a program carries for its methods: inputs, and the outputs the method is expected
// to return for them. ExecuTorch's bundled programs (.bpte, loader/executorch/bpte_reader.h)
// carry them; Program::test_suites() lists them and runtime/verify.h runs them.
//
// Ownership: a tensor's `data` points into the program file's bytes, so TestSuites live as long
// as the Program that holds them. The bytes are unaligned as far as a reader of them knows: use
// memcpy, or copy them, before reading elements.
#ifndef FERRY_LOADER_MODEL_TEST_CASES_H_
#define FERRY_LOADER_MODEL_TEST_CASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "ferry/base/tensor.h"

namespace ferry {

// A test input or expected output: a tensor, or an int, a bool or a double.
struct TestValue {
  bool is_tensor = false;
  // A tensor: dense, its elements in the memory order `dim_order` gives (empty: contiguous),
  // numel(sizes) * DTypeSize(dtype) bytes of them.
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> dim_order;
  absl::Span<const uint8_t> data;
  // Not a tensor: Scalar::Kind::kInt, kBool or kDouble.
  Scalar scalar;
};

struct TestCase {
  std::vector<TestValue> inputs;            // one per method input, in order
  std::vector<TestValue> expected_outputs;  // one per method output, in order
};

// The cases of one method.
struct TestSuite {
  std::string method_name;
  std::vector<TestCase> cases;
};

}  // namespace ferry

#endif  // FERRY_LOADER_MODEL_TEST_CASES_H_
