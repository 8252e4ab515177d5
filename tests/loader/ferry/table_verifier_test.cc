// Ferry's verifier for its schema (loader/ferry/internal/table_verifier.h) against the verifier
// flatc generates: the same verdict on valid programs, on every single-byte change and truncation
// of them, on random multi-byte damage, and at the table count limit.
#include "ferry/loader/ferry/internal/table_verifier.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "ferry/loader/ferry/program_builder.h"
#include "flatbuffers/flatbuffers.h"
#include "gtest/gtest.h"
#include "loader/ferry/schema/program_generated.h"
#include "tests/loader/test_ops.h"

namespace ferry::internal {
namespace {

// The generated verifier with the deepest nesting the schema allows.
bool Generated(absl::Span<const uint8_t> bytes, size_t max_tables) {
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), kSchemaDepth,
                                 static_cast<flatbuffers::uoffset_t>(max_tables));
  return fbs::VerifyProgramBuffer(verifier);
}

constexpr size_t kManyTables = 1u << 20;

// Every table of the schema, and every field set: two methods, constants, a shared state, scalars
// of each kind, host ops, and a graph delegate with compile specs and argument dim orders (the
// deepest nesting, Program/Method/Node/DelegateCall/DimOrder).
std::vector<uint8_t> EveryTableProgram() {
  OpRegistry ops = ::ferry::testing::LoaderTestOps();
  ProgramBuilder pb(&ops);
  for (const char* name : {"forward", "step"}) {
    MethodBuilder& m = pb.AddMethod(name);
    ValueId a = m.Input("a", DType::kFloat32, {2, 2});
    ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
    ValueId kv = m.SharedStateF32("kv", {4}, {0, 0, 0, 0});
    DelegateOptions options;
    options.arg_dim_orders = {{}, {1, 0}};
    options.compile_specs = {{"tile", "16"}, {"mode", "fast"}};
    ValueId t = m.GraphDelegate(
        "cuda:0", {a, w},
        [](MethodBuilder& g, absl::Span<const ValueId> in) {
          return std::vector<ValueId>{g.Op("mul_scalar", {g.Op("add", {in[0], in[1]}), g.Int(3)})};
        },
        options)[0];
    ValueId flat = m.Op("view", {t, m.IntList({4})});
    m.Op("add_", {kv, flat});
    ValueId half = m.Op("mul_scalar", {flat, m.Double(0.5)});
    m.Scalar(ferry::Scalar::Bool(true));
    m.Output(m.Op("mul_scalar", {half, m.Double(2.0)}));
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

// A chain of host ops: mostly Node, HostOp and Value tables.
std::vector<uint8_t> ChainProgram() {
  OpRegistry ops = ::ferry::testing::LoaderTestOps();
  ProgramBuilder pb(&ops);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {8});
  ValueId w = m.ConstantF32("w", {8}, std::vector<float>(8, 0.5f));
  for (int i = 0; i < 6; ++i) x = m.Op("add", {x, w});
  m.Output(x);
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

// Counts the verdicts, so that a test can check both kinds occurred.
struct Tally {
  int accepted = 0;
  int rejected = 0;
};

// The two verifiers agree on `bytes` (copied to aligned memory of exactly its size).
void ExpectSameVerdict(const std::vector<uint8_t>& bytes, size_t max_tables,
                       const std::string& what, Tally* tally) {
  const std::vector<uint8_t> copy(bytes);  // a fresh allocation: reads past the end show in ASan
  const bool generated = Generated(copy, max_tables);
  const bool ours = ProgramTablesWellFormed(copy, max_tables);
  EXPECT_EQ(ours, generated) << what;
  (generated ? tally->accepted : tally->rejected)++;
}

class TableVerifierTest : public ::testing::TestWithParam<int> {
 protected:
  std::vector<uint8_t> Program() const {
    return GetParam() == 0 ? EveryTableProgram() : ChainProgram();
  }
};

TEST_P(TableVerifierTest, AcceptsTheValidProgram) {
  const std::vector<uint8_t> bytes = Program();
  ASSERT_FALSE(bytes.empty());
  ASSERT_TRUE(Generated(bytes, kManyTables));
  EXPECT_TRUE(ProgramTablesWellFormed(bytes, kManyTables));
}

TEST_P(TableVerifierTest, SameVerdictOnEverySingleByteChange) {
  const std::vector<uint8_t> bytes = Program();
  ASSERT_FALSE(bytes.empty());
  Tally tally;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int change : {0x00, 0xff, 0x01, 0x80, 0x7f, 0x04}) {
      std::vector<uint8_t> bad = bytes;
      bad[i] = change == 0x01 || change == 0x80 || change == 0x04
                   ? static_cast<uint8_t>(bad[i] ^ change)
                   : static_cast<uint8_t>(change);
      if (bad == bytes) continue;
      ExpectSameVerdict(bad, kManyTables, absl::StrCat("byte ", i, " changed by ", change), &tally);
    }
  }
  // Both verdicts occur: the changes reach fields that matter and fields that do not.
  EXPECT_GT(tally.accepted, 0);
  EXPECT_GT(tally.rejected, 0);
}

TEST_P(TableVerifierTest, SameVerdictOnEveryTruncation) {
  const std::vector<uint8_t> bytes = Program();
  ASSERT_FALSE(bytes.empty());
  Tally tally;
  for (size_t n = 0; n < bytes.size(); ++n) {
    ExpectSameVerdict(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n), kManyTables,
                      absl::StrCat("cut to ", n, " bytes"), &tally);
  }
  EXPECT_GT(tally.rejected, 0);
}

TEST_P(TableVerifierTest, SameVerdictOnRandomDamage) {
  const std::vector<uint8_t> bytes = Program();
  ASSERT_FALSE(bytes.empty());
  std::mt19937 rng(20261206 + GetParam());
  std::uniform_int_distribution<size_t> position(0, bytes.size() - 1);
  std::uniform_int_distribution<int> value(0, 255);
  std::uniform_int_distribution<int> count(2, 8);
  Tally tally;
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<uint8_t> bad = bytes;
    const int changes = count(rng);
    for (int c = 0; c < changes; ++c) {
      // Small values and offsets move tables, vtables and lengths by a little, so that many
      // damaged programs still land inside the buffer and reach the deeper checks.
      const size_t at = position(rng);
      bad[at] = static_cast<uint8_t>(c % 2 == 0 ? value(rng) : bad[at] + (value(rng) % 9) - 4);
    }
    ExpectSameVerdict(bad, kManyTables, absl::StrCat("trial ", trial), &tally);
    if (::testing::Test::HasFailure()) break;  // one message, not thousands
  }
  EXPECT_GT(tally.accepted, 0);
  EXPECT_GT(tally.rejected, 0);
}

TEST_P(TableVerifierTest, SameVerdictAtTheTableLimit) {
  const std::vector<uint8_t> bytes = Program();
  ASSERT_FALSE(bytes.empty());
  // The least limit the generated verifier accepts is the program's table count.
  size_t tables = 0;
  while (!Generated(bytes, tables)) {
    ++tables;
    ASSERT_LT(tables, 10000u);
  }
  ASSERT_GT(tables, 10u);
  EXPECT_FALSE(ProgramTablesWellFormed(bytes, tables - 1));
  EXPECT_TRUE(ProgramTablesWellFormed(bytes, tables));
  EXPECT_FALSE(ProgramTablesWellFormed(bytes, 0));
}

INSTANTIATE_TEST_SUITE_P(Programs, TableVerifierTest, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("EveryTable")
                                                  : std::string("Chain");
                         });

// Tables the builder never writes: absent fields, a short vtable, a union type the schema does
// not know, a string without its terminator.
TEST(TableVerifierHandBuiltTest, SameVerdictOnTablesTheBuilderNeverWrites) {
  Tally tally;
  auto check = [&](flatbuffers::FlatBufferBuilder& fbb, const std::string& what) {
    const std::vector<uint8_t> bytes(fbb.GetBufferPointer(),
                                     fbb.GetBufferPointer() + fbb.GetSize());
    ExpectSameVerdict(bytes, kManyTables, what, &tally);
  };
  {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fbs::CreateProgram(fbb), fbs::ProgramIdentifier());
    check(fbb, "a program of no fields");
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    auto node = fbs::CreateNode(fbb, 0, static_cast<fbs::NodeOp>(7),
                                fbs::CreateHostOp(fbb, fbb.CreateString("add")).Union());
    auto method = fbs::CreateMethod(fbb, fbb.CreateString("m"), 0, fbb.CreateVector({node}));
    fbb.Finish(fbs::CreateProgram(fbb, 1, fbb.CreateVector({method})), fbs::ProgramIdentifier());
    check(fbb, "a node of an unknown op type");
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    auto node = fbs::CreateNode(fbb, fbb.CreateString("n"), fbs::NodeOp::HostOp, 0);
    auto method = fbs::CreateMethod(fbb, 0, 0, fbb.CreateVector({node}));
    fbb.Finish(fbs::CreateProgram(fbb, 1, fbb.CreateVector({method})), fbs::ProgramIdentifier());
    check(fbb, "a host op node without its table");
  }
  EXPECT_EQ(tally.accepted, 3);
  // The same, with the last string's terminator overwritten.
  flatbuffers::FlatBufferBuilder fbb;
  auto method = fbs::CreateMethod(fbb, fbb.CreateString("abc"));
  fbb.Finish(fbs::CreateProgram(fbb, 1, fbb.CreateVector({method})), fbs::ProgramIdentifier());
  std::vector<uint8_t> bytes(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  bool found = false;
  for (size_t i = 0; i + 3 < bytes.size(); ++i) {
    if (bytes[i] == 'a' && bytes[i + 1] == 'b' && bytes[i + 2] == 'c' && bytes[i + 3] == 0) {
      bytes[i + 3] = 'd';
      found = true;
    }
  }
  ASSERT_TRUE(found);
  ExpectSameVerdict(bytes, kManyTables, "an unterminated string", &tally);
  EXPECT_EQ(tally.rejected, 1);
}

}  // namespace
}  // namespace ferry::internal
