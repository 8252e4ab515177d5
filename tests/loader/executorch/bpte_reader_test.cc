// The bundled-program reader (.bpte): bundles written by tests/testing/bundle_builder.h as
// ExecuTorch lays them out, read back value by value; every truncation and single-byte flip of
// one (never a crash; meaningful under ASan); and hand-broken bundles, each refused with a
// message that names the element. Program::Load of a bundle is tested beside Program's other
// formats (tests/loader/program_test.cc).
#include "ferry/loader/executorch/bpte_reader.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/bundle_builder.h"
#include "tests/testing/hand_made_pte.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::BoolScalar;
using ::ferry::testing::BuildBundle;
using ::ferry::testing::BuildPte;
using ::ferry::testing::BundleCase;
using ::ferry::testing::BundleSuite;
using ::ferry::testing::BundleValue;
using ::ferry::testing::DoubleScalar;
using ::ferry::testing::FloatValue;
using ::ferry::testing::Int64Value;
using ::ferry::testing::IntScalar;
using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Reads `bytes` from 64-byte aligned memory, as Program does.
absl::StatusOr<EtBundle> Read(const std::vector<uint8_t>& bytes, std::vector<uint64_t>& storage) {
  storage.assign(bytes.size() / 8 + 8, 0);
  auto* base = reinterpret_cast<uint8_t*>(storage.data());
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  if (!bytes.empty()) std::memcpy(base, bytes.data(), bytes.size());
  return ReadExecuTorchBundle(absl::MakeConstSpan(base, bytes.size()));
}

std::vector<BundleSuite> TwoSuites() {
  BundleCase first{{FloatValue({2, 3}, {1, 2, 3, 4, 5, 6}), IntScalar(7)},
                   {FloatValue({2, 3}, {0.5f, 1, 1.5f, 2, 2.5f, 3})}};
  BundleCase second{{FloatValue({1}, {-1}), DoubleScalar(0.25)}, {BoolScalar(true)}};
  BundleCase ints{{Int64Value({3}, {1, -2, 3})}, {Int64Value({3}, {2, -4, 6})}};
  return {{"forward", {first, second}}, {"count", {ints}}};
}

TEST(BundleReader, ReadsTheProgramAndEveryValue) {
  const std::vector<uint8_t> pte = BuildPte();
  const std::vector<uint8_t> bpte = BuildBundle(pte, TwoSuites(), /*version=*/3);
  std::vector<uint64_t> storage;
  ASSERT_OK_AND_ASSIGN(EtBundle bundle, Read(bpte, storage));
  EXPECT_EQ(bundle.version, 3u);
  ASSERT_EQ(bundle.program.size(), pte.size());
  EXPECT_EQ(std::memcmp(bundle.program.data(), pte.data(), pte.size()), 0);
  EXPECT_EQ(bundle.program_offset % 32, 0u);  // as ExecuTorch's writer aligns it
  ASSERT_EQ(bundle.suites.size(), 2u);
  EXPECT_EQ(bundle.suites[0].method_name, "forward");
  EXPECT_EQ(bundle.suites[1].method_name, "count");
  ASSERT_EQ(bundle.suites[0].cases.size(), 2u);
  const TestCase& c0 = bundle.suites[0].cases[0];
  ASSERT_EQ(c0.inputs.size(), 2u);
  EXPECT_TRUE(c0.inputs[0].is_tensor);
  EXPECT_EQ(c0.inputs[0].dtype, DType::kFloat32);
  EXPECT_THAT(c0.inputs[0].sizes, ElementsAre(2, 3));
  ASSERT_EQ(c0.inputs[0].data.size(), 24u);
  float third;
  std::memcpy(&third, c0.inputs[0].data.data() + 8, 4);
  EXPECT_EQ(third, 3.0f);
  EXPECT_FALSE(c0.inputs[1].is_tensor);
  EXPECT_EQ(c0.inputs[1].scalar.kind, Scalar::Kind::kInt);
  EXPECT_EQ(c0.inputs[1].scalar.i, 7);
  ASSERT_EQ(c0.expected_outputs.size(), 1u);
  EXPECT_THAT(c0.expected_outputs[0].sizes, ElementsAre(2, 3));
  const TestCase& c1 = bundle.suites[0].cases[1];
  EXPECT_EQ(c1.inputs[1].scalar.kind, Scalar::Kind::kDouble);
  EXPECT_EQ(c1.inputs[1].scalar.d, 0.25);
  EXPECT_EQ(c1.expected_outputs[0].scalar.kind, Scalar::Kind::kBool);
  EXPECT_TRUE(c1.expected_outputs[0].scalar.b);
  const TestCase& ints = bundle.suites[1].cases[0];
  EXPECT_EQ(ints.inputs[0].dtype, DType::kInt64);
  int64_t second;
  std::memcpy(&second, ints.inputs[0].data.data() + 8, 8);
  EXPECT_EQ(second, -2);
}

TEST(BundleReader, ABundleWithoutSuitesHasNone) {
  std::vector<uint64_t> storage;
  ASSERT_OK_AND_ASSIGN(EtBundle bundle, Read(BuildBundle(BuildPte(), {}), storage));
  EXPECT_TRUE(bundle.suites.empty());
  EXPECT_FALSE(bundle.program.empty());
}

TEST(BundleReader, RefusesWhatIsNotABundle) {
  std::vector<uint64_t> storage;
  EXPECT_THAT(Read(BuildPte(), storage),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not \"BP08\"")));
  EXPECT_THAT(Read({}, storage), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Read(BuildBundle({}, TwoSuites()), storage),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("it holds no program")));
}

// One broken value in the first case of suite "forward".
absl::Status WithValue(BundleValue v, bool expected = false) {
  BundleCase c{{FloatValue({1}, {1})}, {FloatValue({1}, {1})}};
  (expected ? c.expected : c.inputs)[0] = std::move(v);
  std::vector<uint64_t> storage;
  return Read(BuildBundle(BuildPte(), {{"forward", {c}}}), storage).status();
}

TEST(BundleReader, RefusesBrokenValuesNamingThem) {
  BundleValue short_data = FloatValue({2, 3}, {1, 2, 3, 4, 5});
  EXPECT_THAT(WithValue(short_data, /*expected=*/true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("suite 0 (method \"forward\"), case 0, expected output 0: a "
                                 "float32 tensor of sizes [2, 3] takes 24 bytes, but its data has "
                                 "20")));
  BundleValue quantized = FloatValue({1}, {1});
  quantized.scalar_type = 12;  // qint8
  EXPECT_THAT(WithValue(quantized), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("input 0: a tensor of qint8")));
  BundleValue negative = FloatValue({-1}, {});
  EXPECT_THAT(WithValue(negative),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sizes [-1] are negative")));
  BundleValue order = FloatValue({1, 1}, {1});
  order.dim_order = {1, 1};
  EXPECT_THAT(WithValue(order), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("dim order (1, 1) is not a permutation")));
  BundleValue deep = FloatValue(std::vector<int32_t>(17, 1), {1});
  EXPECT_THAT(WithValue(deep),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 17, above 16")));
  BundleValue none;
  none.kind = BundleValue::Kind::kNone;
  EXPECT_THAT(WithValue(none), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("value type 0 is none of tensor")));
}

TEST(BundleReader, EveryTruncationAndByteFlipIsReadOrRefusedCleanly) {
  const std::vector<uint8_t> bpte = BuildBundle(BuildPte(), TwoSuites());
  std::vector<uint64_t> storage;
  for (size_t n = 0; n < bpte.size(); ++n) {
    const std::vector<uint8_t> cut(bpte.begin(), bpte.begin() + n);
    EXPECT_THAT(Read(cut, storage), StatusIs(absl::StatusCode::kInvalidArgument)) << n;
  }
  size_t refused = 0;
  for (size_t at = 0; at < bpte.size(); ++at) {
    std::vector<uint8_t> flipped = bpte;
    flipped[at] ^= 0xff;
    absl::StatusOr<EtBundle> read = Read(flipped, storage);
    if (read.ok()) continue;  // a flip inside data, or of a value no check covers
    ++refused;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << at;
    EXPECT_THAT(read.status().message(), HasSubstr("bundled program: ")) << at;
  }
  EXPECT_GT(refused, 0u);
}

}  // namespace
}  // namespace ferry
