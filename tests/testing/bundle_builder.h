// Writes ExecuTorch bundled programs (.bpte, file identifier "BP08") for tests, laid out as
// ExecuTorch's writer lays them out (the program's bytes at a multiple of 32, tensor data at a
// multiple of 16), with the generated FlatBuffers API of loader/executorch/schema/.
//
//   std::vector<uint8_t> bpte = BuildBundle(pte, {{"forward", {{{FloatValue({2}, {1, 2})},
//                                                                {FloatValue({2}, {2, 4})}}}}});
#ifndef FERRY_TESTS_TESTING_BUNDLE_BUILDER_H_
#define FERRY_TESTS_TESTING_BUNDLE_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "loader/executorch/schema/bundled_program_generated.h"

namespace ferry::testing {

struct BundleValue {
  enum class Kind { kTensor, kInt, kBool, kDouble, kNone } kind = Kind::kTensor;
  int8_t scalar_type = 6;  // ExecuTorch's: 6 float32, 4 int64, 3 int32, 11 bool
  std::vector<int32_t> sizes;
  std::vector<uint8_t> data;
  std::vector<uint8_t> dim_order;  // written as given (empty: none)
  int64_t i = 0;
  bool b = false;
  double d = 0;
};

template <typename T>
std::vector<uint8_t> BytesOf(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

inline BundleValue FloatValue(std::vector<int32_t> sizes, const std::vector<float>& values) {
  BundleValue v;
  v.sizes = std::move(sizes);
  v.data = BytesOf(values);
  return v;
}
inline BundleValue Int64Value(std::vector<int32_t> sizes, const std::vector<int64_t>& values) {
  BundleValue v;
  v.scalar_type = 4;
  v.sizes = std::move(sizes);
  v.data = BytesOf(values);
  return v;
}
inline BundleValue IntScalar(int64_t i) {
  BundleValue v;
  v.kind = BundleValue::Kind::kInt;
  v.i = i;
  return v;
}
inline BundleValue DoubleScalar(double d) {
  BundleValue v;
  v.kind = BundleValue::Kind::kDouble;
  v.d = d;
  return v;
}
inline BundleValue BoolScalar(bool b) {
  BundleValue v;
  v.kind = BundleValue::Kind::kBool;
  v.b = b;
  return v;
}

struct BundleCase {
  std::vector<BundleValue> inputs;
  std::vector<BundleValue> expected;
};

struct BundleSuite {
  std::string method;
  std::vector<BundleCase> cases;
};

inline std::vector<uint8_t> BuildBundle(const std::vector<uint8_t>& program,
                                        const std::vector<BundleSuite>& suites,
                                        uint32_t version = 0) {
  namespace fb = ::ferry::et::bundled::fbs;
  flatbuffers::FlatBufferBuilder fbb;
  auto values = [&](const std::vector<BundleValue>& in) {
    std::vector<flatbuffers::Offset<fb::Value>> out;
    for (const BundleValue& v : in) {
      switch (v.kind) {
        case BundleValue::Kind::kTensor: {
          const std::vector<uint8_t>* order = v.dim_order.empty() ? nullptr : &v.dim_order;
          out.push_back(fb::CreateValue(
              fbb, fb::ValueUnion::Tensor,
              fb::CreateTensorDirect(fbb, v.scalar_type, &v.sizes, &v.data, order).Union()));
          break;
        }
        case BundleValue::Kind::kInt:
          out.push_back(fb::CreateValue(fbb, fb::ValueUnion::Int, fb::CreateInt(fbb, v.i).Union()));
          break;
        case BundleValue::Kind::kBool:
          out.push_back(
              fb::CreateValue(fbb, fb::ValueUnion::Bool, fb::CreateBool(fbb, v.b).Union()));
          break;
        case BundleValue::Kind::kDouble:
          out.push_back(
              fb::CreateValue(fbb, fb::ValueUnion::Double, fb::CreateDouble(fbb, v.d).Union()));
          break;
        case BundleValue::Kind::kNone:  // a union without a member: what no writer writes
          out.push_back(fb::CreateValue(fbb));
          break;
      }
    }
    return out;
  };
  std::vector<flatbuffers::Offset<fb::BundledMethodTestSuite>> suite_offsets;
  for (const BundleSuite& s : suites) {
    std::vector<flatbuffers::Offset<fb::BundledMethodTestCase>> cases;
    for (const BundleCase& c : s.cases) {
      const auto inputs = values(c.inputs);
      const auto expected = values(c.expected);
      cases.push_back(fb::CreateBundledMethodTestCaseDirect(fbb, &inputs, &expected));
    }
    suite_offsets.push_back(fb::CreateBundledMethodTestSuiteDirect(fbb, s.method.c_str(), &cases));
  }
  fb::FinishBundledProgramBuffer(
      fbb, fb::CreateBundledProgramDirect(fbb, version, &suite_offsets, &program));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_BUNDLE_BUILDER_H_
