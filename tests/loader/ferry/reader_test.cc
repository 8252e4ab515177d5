// Corrupted, truncated and handcrafted bad programs: each gives a clean error, never a crash.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "flatbuffers/flatbuffers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/ferry/schema/program_generated.h"
#include "tests/loader/test_ops.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// A valid program with constants, state, scalars, host ops and a graph delegate.

std::vector<uint8_t> ValidProgram() {
  OpRegistry ops = ::ferry::testing::LoaderTestOps();
  ProgramBuilder pb(&ops);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
  ValueId kv = m.StateF32("kv", {4}, {0, 0, 0, 0});
  DelegateOptions options;
  options.arg_dim_orders = {{}, {1, 0}};
  ValueId t = m.GraphDelegate(
      "cuda:0", {a, w},
      [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("mul_scalar", {g.Op("add", {in[0], in[1]}), g.Int(3)})};
      },
      options)[0];
  ValueId flat = m.Op("view", {t, m.IntList({4})});
  m.Op("add_", {kv, flat});
  m.Output(m.Op("mul_scalar", {flat, m.Double(0.5)}));
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_OK(bytes.status());
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

// Reads every part of a loaded program, so that a bad span or index would show up (under ASan).
size_t Touch(const Program& program) {
  size_t sum = 0;
  for (const std::string& name : program.method_names()) {
    absl::StatusOr<const MethodDef*> m = program.method(name);
    if (!m.ok()) continue;
    for (const ValueDef& v : (*m)->values) {
      for (uint8_t b : v.data) sum += b;
      sum += v.name.size() + v.meta.sizes.size();
    }
    for (const NodeDef& n : (*m)->nodes) {
      for (uint8_t b : n.delegate().payload) sum += b;
      for (ValueId id : n.args) sum += (*m)->values.at(id).name.size();
      for (ValueId id : n.results) sum += (*m)->values.at(id).name.size();
    }
  }
  return sum;
}

TEST(CorruptProgramTest, TheValidProgramLoads) {
  std::vector<uint8_t> bytes = ValidProgram();
  ASSERT_FALSE(bytes.empty());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  ASSERT_OK_AND_ASSIGN(const MethodDef* m, program->method("forward"));
  EXPECT_EQ(m->nodes.size(), 4u);
}

TEST(CorruptProgramTest, EveryTruncationIsRefused) {
  const std::vector<uint8_t> bytes = ValidProgram();
  ASSERT_FALSE(bytes.empty());
  for (size_t len = 0; len < bytes.size(); ++len) {
    absl::StatusOr<std::unique_ptr<Program>> program =
        Program::FromBytes(absl::MakeConstSpan(bytes.data(), len));
    ASSERT_FALSE(program.ok()) << "a truncation to " << len << " of " << bytes.size()
                               << " bytes loaded";
    ASSERT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument) << program.status();
  }
}

TEST(CorruptProgramTest, RandomByteFlipsGiveOkOrACleanError) {
  const std::vector<uint8_t> bytes = ValidProgram();
  ASSERT_FALSE(bytes.empty());
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<size_t> position(0, bytes.size() - 1);
  std::uniform_int_distribution<int> flips(1, 4);
  std::uniform_int_distribution<int> mask(1, 255);
  int errors = 0;
  constexpr int kRuns = 4000;
  for (int run = 0; run < kRuns; ++run) {
    std::vector<uint8_t> corrupt = bytes;
    const int n = flips(rng);
    for (int f = 0; f < n; ++f) corrupt[position(rng)] ^= static_cast<uint8_t>(mask(rng));
    absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(corrupt);
    if (program.ok()) {
      Touch(**program);
      // What loads must convert to JSON and back as well.
      absl::StatusOr<std::string> json = Program::ToJson(corrupt);
      if (json.ok()) {
        absl::StatusOr<std::unique_ptr<Program>> back = Program::FromJson(*json);
        EXPECT_TRUE(back.ok() || back.status().code() == absl::StatusCode::kInvalidArgument)
            << back.status();
      }
      continue;
    }
    ++errors;
    ASSERT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument)
        << "run " << run << ": " << program.status();
    ASSERT_FALSE(program.status().message().empty());
  }
  // Most flips hit metadata (offsets, ids, enums) and must be caught; data flips load fine.
  EXPECT_GT(errors, kRuns / 4);
  EXPECT_LT(errors, kRuns);
}

TEST(CorruptProgramTest, JsonTruncationsGiveOkOrACleanError) {
  absl::StatusOr<std::string> json = Program::ToJson(ValidProgram());
  ASSERT_OK(json.status());
  int errors = 0;
  for (size_t len = 0; len < json->size(); len += 7) {
    absl::StatusOr<std::unique_ptr<Program>> program =
        Program::FromJson(absl::string_view(*json).substr(0, len));
    if (!program.ok()) {
      ++errors;
      ASSERT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument) << program.status();
    }
  }
  EXPECT_GT(errors, 0);
}

// ---------------------------------------------------------------------------------------------
// Handcrafted programs, written with the generated FlatBuffers API directly (not Ferry's writer),
// each breaking one rule.

struct HandValue {
  std::string name;
  fbs::ValueKind kind = fbs::ValueKind::Intermediate;
  fbs::DType dtype = fbs::DType::Float32;
  std::vector<int64_t> sizes;
  std::vector<int32_t> dim_order;
  int32_t segment = -1;
  bool has_scalar = true;  // for kind Scalar
  fbs::ScalarKind scalar_kind = fbs::ScalarKind::Int;
};

struct HandNode {
  std::string name;
  fbs::NodeOp type = fbs::NodeOp::HostOp;
  std::string op;  // host op name, or the backend
  std::vector<std::pair<std::string, std::string>> specs;
  std::vector<std::vector<int32_t>> arg_dim_orders;
  std::vector<int32_t> written_args;
  std::vector<int32_t> args;
  std::vector<int32_t> results;
};

struct HandMethod {
  std::string name = "forward";
  std::vector<HandValue> values;
  std::vector<HandNode> nodes;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
};

struct HandSegment {
  std::vector<uint8_t> data;
  bool misaligned = false;  // placed 8 bytes past a multiple of 64
};

struct HandProgram {
  uint32_t version = 1;
  const char* identifier = "FRRY";
  std::vector<HandMethod> methods;
  std::vector<HandSegment> segments;
};

HandValue Tensor(std::string name, fbs::ValueKind kind, std::vector<int64_t> sizes,
                 int32_t segment = -1) {
  HandValue v;
  v.name = std::move(name);
  v.kind = kind;
  v.sizes = std::move(sizes);
  v.segment = segment;
  return v;
}

HandValue ScalarOf(std::string name) {
  HandValue v;
  v.name = std::move(name);
  v.kind = fbs::ValueKind::Scalar;
  return v;
}

HandNode Host(std::string op, std::vector<int32_t> args, std::vector<int32_t> results) {
  HandNode n;
  n.op = std::move(op);
  n.args = std::move(args);
  n.results = std::move(results);
  return n;
}

HandNode Call(std::string backend, std::vector<int32_t> args, std::vector<int32_t> results) {
  HandNode n = Host(std::move(backend), std::move(args), std::move(results));
  n.type = fbs::NodeOp::DelegateCall;
  return n;
}

std::vector<uint8_t> Write(const HandProgram& p) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.TrackMinAlign(64);  // the size becomes a multiple of 64
  std::vector<flatbuffers::Offset<fbs::DataSegment>> segments;
  for (const HandSegment& s : p.segments) {
    // A vector's data starts where (size + len) is a multiple of the alignment (from the end).
    if (!s.data.empty()) fbb.PreAlign(s.data.size() + (s.misaligned ? 8 : 0), 64);
    segments.push_back(fbs::CreateDataSegment(fbb, fbb.CreateVector(s.data)));
  }
  std::vector<flatbuffers::Offset<fbs::Method>> methods;
  for (const HandMethod& m : p.methods) {
    std::vector<flatbuffers::Offset<fbs::Value>> values;
    for (const HandValue& v : m.values) {
      flatbuffers::Offset<fbs::ScalarValue> scalar;
      if (v.kind == fbs::ValueKind::Scalar && v.has_scalar) {
        scalar = fbs::CreateScalarValue(fbb, v.scalar_kind, 1);
      }
      values.push_back(fbs::CreateValue(fbb, v.name.empty() ? 0 : fbb.CreateString(v.name), v.kind,
                                        v.dtype, fbb.CreateVector(v.sizes),
                                        v.dim_order.empty() ? 0 : fbb.CreateVector(v.dim_order),
                                        scalar, v.segment));
    }
    std::vector<flatbuffers::Offset<fbs::Node>> nodes;
    for (const HandNode& n : m.nodes) {
      flatbuffers::Offset<void> op;
      if (n.type == fbs::NodeOp::HostOp) {
        op = fbs::CreateHostOp(fbb, fbb.CreateString(n.op)).Union();
      } else if (n.type == fbs::NodeOp::DelegateCall) {
        std::vector<flatbuffers::Offset<fbs::CompileSpec>> specs;
        for (const auto& [k, v] : n.specs) {
          specs.push_back(fbs::CreateCompileSpec(fbb, fbb.CreateString(k), fbb.CreateString(v)));
        }
        std::vector<flatbuffers::Offset<fbs::DimOrder>> orders;
        for (const auto& d : n.arg_dim_orders) {
          orders.push_back(fbs::CreateDimOrder(fbb, fbb.CreateVector(d)));
        }
        op = fbs::CreateDelegateCall(fbb, fbb.CreateString(n.op), fbb.CreateVector(specs), 0,
                                     fbb.CreateVector(orders), fbb.CreateVector(n.written_args))
                 .Union();
      }
      nodes.push_back(fbs::CreateNode(fbb, n.name.empty() ? 0 : fbb.CreateString(n.name), n.type,
                                      op, fbb.CreateVector(n.args), fbb.CreateVector(n.results)));
    }
    methods.push_back(fbs::CreateMethod(fbb, fbb.CreateString(m.name), fbb.CreateVector(values),
                                        fbb.CreateVector(nodes), fbb.CreateVector(m.inputs),
                                        fbb.CreateVector(m.outputs)));
  }
  auto root =
      fbs::CreateProgram(fbb, p.version, fbb.CreateVector(methods), fbb.CreateVector(segments));
  fbb.Finish(root, p.identifier);
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

std::vector<uint8_t> FloatBytes(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// forward(x): t = add(x, w); y = relu(t); return y.  x: input, w: constant, all float32[2, 2].
HandProgram GoodProgram() {
  HandProgram p;
  p.segments.emplace_back();
  p.segments.back().data = FloatBytes({1, 2, 3, 4});
  HandMethod m;
  m.values = {
      Tensor("x", fbs::ValueKind::Input, {2, 2}),
      Tensor("w", fbs::ValueKind::Constant, {2, 2}, /*segment=*/0),
      Tensor("t", fbs::ValueKind::Intermediate, {2, 2}),
      Tensor("y", fbs::ValueKind::Intermediate, {2, 2}),
  };
  m.nodes = {
      Host("add", {0, 1}, {2}),
      Host("relu", {2}, {3}),
  };
  m.inputs = {0};
  m.outputs = {3};
  p.methods.push_back(m);
  return p;
}

absl::Status LoadStatus(const HandProgram& p) { return Program::FromBytes(Write(p)).status(); }

// The message for `p`, which must be refused with InvalidArgument.
std::string Refusal(const HandProgram& p) {
  absl::Status status = LoadStatus(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

TEST(HandcraftedProgramTest, TheGoodProgramLoads) {
  HandProgram p = GoodProgram();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(Write(p)));
  ASSERT_OK_AND_ASSIGN(const MethodDef* m, program->method("forward"));
  EXPECT_EQ(m->nodes[0].name, "add");
  EXPECT_EQ(m->values[1].data.size(), 16u);
  // A delegate variant of the good program loads too, so the delegate cases below fail for
  // their own reason only.
  HandNode call = Call("graph", {2}, {3});
  call.specs = {{"target_device", "cuda:0"}};
  call.arg_dim_orders = {{1, 0}};
  p.methods[0].nodes[1] = call;
  EXPECT_OK(LoadStatus(p));
}

TEST(HandcraftedProgramTest, ArgumentOutOfRange) {
  HandProgram p = GoodProgram();
  p.methods[0].nodes[0].args = {0, 40};
  EXPECT_EQ(
      Refusal(p),
      "method \"forward\", node 0 (add): argument 1 is value 40, but the method has 4 values");
  p.methods[0].nodes[0].args = {-1, 1};
  EXPECT_EQ(
      Refusal(p),
      "method \"forward\", node 0 (add): argument 0 is value -1, but the method has 4 values");
}

TEST(HandcraftedProgramTest, UseBeforeDefinition) {
  HandProgram p = GoodProgram();
  std::swap(p.methods[0].nodes[0], p.methods[0].nodes[1]);
  EXPECT_EQ(Refusal(p),
            "method \"forward\", node 0 (relu): argument 0 is value 2 (\"t\"), an intermediate "
            "that no earlier node produces");
}

TEST(HandcraftedProgramTest, NodeReadingItsOwnResult) {
  HandProgram p = GoodProgram();
  p.methods[0].nodes[1].args = {3};
  EXPECT_THAT(Refusal(p), HasSubstr("node 1 (relu): argument 0 is value 3 (\"y\"), an "
                                    "intermediate that no earlier node produces"));
}

TEST(HandcraftedProgramTest, ConstantDataTooShort) {
  HandProgram p = GoodProgram();
  p.segments[0].data.resize(12);
  EXPECT_EQ(Refusal(p),
            "method \"forward\", value 1 (\"w\"): constant data is 12 bytes, expected 16 for "
            "float32[2, 2]");
}

TEST(HandcraftedProgramTest, StateDataTooLong) {
  HandProgram p = GoodProgram();
  p.methods[0].values[1].kind = fbs::ValueKind::State;
  p.segments[0].data.resize(20);
  EXPECT_EQ(Refusal(p),
            "method \"forward\", value 1 (\"w\"): state data is 20 bytes, expected 16 for "
            "float32[2, 2]");
}

TEST(HandcraftedProgramTest, ConstantWithoutData) {
  HandProgram p = GoodProgram();
  p.methods[0].values[1].segment = -1;
  EXPECT_THAT(Refusal(p), HasSubstr("value 1 (\"w\"): a constant needs data, but it has none"));
  p.methods[0].values[1].segment = 3;
  EXPECT_THAT(Refusal(p), HasSubstr("value 1 (\"w\"): constant data is segment 3, but the "
                                    "program has 1 segments"));
}

TEST(HandcraftedProgramTest, SizeOverflow) {
  HandProgram p = GoodProgram();
  p.methods[0].values[0].sizes = {int64_t{1} << 62, int64_t{1} << 62};
  EXPECT_EQ(Refusal(p),
            "method \"forward\", value 0 (\"x\"): float32[4611686018427387904, "
            "4611686018427387904] is too large: its byte size overflows");
  // Even with a zero size (no elements), the other sizes must multiply without overflow.
  p.methods[0].values[0].sizes = {0, int64_t{1} << 62, int64_t{1} << 62};
  EXPECT_THAT(Refusal(p), HasSubstr("its byte size overflows"));
  // 2^61 float32 elements: 2^63 bytes, one past int64.
  p.methods[0].values[0].sizes = {int64_t{1} << 61};
  EXPECT_THAT(Refusal(p), HasSubstr("its byte size overflows"));
}

TEST(HandcraftedProgramTest, NegativeSize) {
  HandProgram p = GoodProgram();
  p.methods[0].values[2].sizes = {2, -2};
  EXPECT_EQ(Refusal(p),
            "method \"forward\", value 2 (\"t\"): size 1 is -2; sizes must be non-negative");
}

TEST(HandcraftedProgramTest, RankAboveTheMaximum) {
  HandProgram p = GoodProgram();
  p.methods[0].values[0].sizes = std::vector<int64_t>(9, 1);
  EXPECT_EQ(Refusal(p), "method \"forward\", value 0 (\"x\"): rank 9 exceeds the maximum rank 8");
}

TEST(HandcraftedProgramTest, BadDimOrder) {
  HandProgram p = GoodProgram();
  p.methods[0].values[0].dim_order = {0, 0};
  EXPECT_EQ(Refusal(p),
            "method \"forward\", value 0 (\"x\"): dim_order (0, 0) is not a permutation of 0..1 "
            "(rank 2)");
  p.methods[0].values[0].dim_order = {0, 1, 2};
  EXPECT_THAT(Refusal(p), HasSubstr("dim_order (0, 1, 2) is not a permutation"));
  p.methods[0].values[0].dim_order = {1, 0};
  EXPECT_OK(LoadStatus(p));
}

TEST(HandcraftedProgramTest, BadKindAndDType) {
  HandProgram p = GoodProgram();
  p.methods[0].values[3].kind = static_cast<fbs::ValueKind>(9);
  EXPECT_THAT(Refusal(p), HasSubstr("value 3 (\"y\"): kind 9 is not a valid value kind"));
  p = GoodProgram();
  p.methods[0].values[3].dtype = static_cast<fbs::DType>(-3);
  EXPECT_THAT(Refusal(p), HasSubstr("value 3 (\"y\"): dtype -3 is not valid"));
}

TEST(HandcraftedProgramTest, ScalarWithoutValue) {
  HandProgram p = GoodProgram();
  p.methods[0].values.push_back(ScalarOf("k"));
  p.methods[0].values.back().has_scalar = false;
  EXPECT_EQ(Refusal(p), "method \"forward\", value 4 (\"k\"): a scalar value has no scalar");
  p.methods[0].values.back().has_scalar = true;
  p.methods[0].values.back().scalar_kind = static_cast<fbs::ScalarKind>(8);
  EXPECT_THAT(Refusal(p), HasSubstr("value 4 (\"k\"): scalar kind 8 is not valid"));
}

TEST(HandcraftedProgramTest, DuplicateInput) {
  HandProgram p = GoodProgram();
  p.methods[0].inputs = {0, 0};
  EXPECT_EQ(Refusal(p), "method \"forward\", input 1 is value 0 (\"x\"), which is already input 0");
}

TEST(HandcraftedProgramTest, InputsMustBeExactlyTheInputValues) {
  HandProgram p = GoodProgram();
  p.methods[0].inputs = {};
  EXPECT_EQ(Refusal(p),
            "method \"forward\", value 0 (\"x\"): an input value that is not listed in the "
            "method's inputs");
  p.methods[0].inputs = {0, 1};
  EXPECT_EQ(Refusal(p),
            "method \"forward\", input 1 is value 1 (\"w\"), a constant; method inputs must be "
            "input or scalar values");
  p.methods[0].inputs = {7};
  EXPECT_EQ(Refusal(p), "method \"forward\", input 0 is value 7, but the method has 4 values");
  // A second input value, after the listed one: the count of input values tells it is missing.
  p = GoodProgram();
  p.methods[0].values.push_back(Tensor("x2", fbs::ValueKind::Input, {2, 2}));
  EXPECT_EQ(Refusal(p),
            "method \"forward\", value 4 (\"x2\"): an input value that is not listed in the "
            "method's inputs");
  p.methods[0].inputs = {4, 0};
  EXPECT_OK(LoadStatus(p));
  // A scalar may be listed too (a non-tensor input, fixed at its value), once.
  p.methods[0].values.push_back(ScalarOf("k"));
  p.methods[0].inputs = {4, 5, 0};
  EXPECT_OK(LoadStatus(p));
  p.methods[0].inputs = {4, 5, 0, 5};
  EXPECT_THAT(Refusal(p), HasSubstr("input 3 is value 5 (\"k\"), which is already input 1"));
}

TEST(HandcraftedProgramTest, IntermediateProducedTwice) {
  HandProgram p = GoodProgram();
  p.methods[0].nodes[1].results = {2};
  EXPECT_EQ(Refusal(p),
            "method \"forward\", node 1 (relu): result 0 is value 2 (\"t\"), which node 0 (add) "
            "already produces");
  p = GoodProgram();
  p.methods[0].nodes[1].results = {3, 3};
  EXPECT_THAT(Refusal(p), HasSubstr("node 1 (relu): result 1 is value 3 (\"y\"), which node 1 "
                                    "(relu) already produces"));
}

TEST(HandcraftedProgramTest, ResultsMustBeIntermediates) {
  HandProgram p = GoodProgram();
  p.methods[0].nodes[1].results = {1};
  EXPECT_EQ(Refusal(p),
            "method \"forward\", node 1 (relu): result 0 is value 1 (\"w\"), a constant; results "
            "must be intermediates");
}

TEST(HandcraftedProgramTest, OutputsMustBeDefined) {
  HandProgram p = GoodProgram();
  p.methods[0].nodes.pop_back();
  EXPECT_EQ(Refusal(p),
            "method \"forward\", output 0 is value 3 (\"y\"), an intermediate that no node "
            "produces");
  p = GoodProgram();
  p.methods[0].values.push_back(ScalarOf(""));
  p.methods[0].outputs = {4, 3};  // a scalar is returned as it is
  EXPECT_OK(LoadStatus(p));
  p.methods[0].outputs = {99};
  EXPECT_THAT(Refusal(p), HasSubstr("output 0 is value 99, but the method has 5 values"));
}

TEST(HandcraftedProgramTest, NodesNeedAnOperation) {
  HandProgram p = GoodProgram();
  p.methods[0].nodes[0].op = "";
  EXPECT_EQ(Refusal(p), "method \"forward\", node 0: the host op has no op name");
  p = GoodProgram();
  p.methods[0].nodes[0].type = fbs::NodeOp::NONE;
  EXPECT_THAT(Refusal(p), HasSubstr("node 0: operation type 0 is neither a host op"));
  p = GoodProgram();
  p.methods[0].nodes[0].type = fbs::NodeOp::DelegateCall;
  p.methods[0].nodes[0].op = "";
  EXPECT_THAT(Refusal(p), HasSubstr("node 0: the delegate call has no backend name"));
}

TEST(HandcraftedProgramTest, DelegateChecks) {
  // The good program with node 1 replaced by a delegate call that `edit` modifies.
  auto with_delegate = [](const std::function<void(HandNode&)>& edit) {
    HandProgram p = GoodProgram();
    HandNode node = Call("graph", {2}, {3});
    node.name = "dev";
    edit(node);
    p.methods[0].nodes[1] = node;
    return p;
  };
  EXPECT_EQ(Refusal(with_delegate([](HandNode& n) {
              n.specs = {{"target_device", "cuda:0"}, {"target_device", "cpu"}};
            })),
            "method \"forward\", node 1 (dev): compile spec key \"target_device\" appears more "
            "than once");
  EXPECT_THAT(Refusal(with_delegate([](HandNode& n) {
                n.specs = {{"", "x"}};
              })),
              HasSubstr("node 1 (dev): compile spec 0 has an empty key"));
  EXPECT_EQ(Refusal(with_delegate([](HandNode& n) {
              n.arg_dim_orders = {{}, {}};
            })),
            "method \"forward\", node 1 (dev): arg_dim_orders has 2 entries, but the call has 1 "
            "arguments");
  EXPECT_EQ(Refusal(with_delegate([](HandNode& n) {
              n.arg_dim_orders = {{2, 0}};
            })),
            "method \"forward\", node 1 (dev): the dim order (2, 0) of argument 0 is not a "
            "permutation of 0..1 (value 2 (\"t\") has rank 2)");
  EXPECT_EQ(Refusal(with_delegate([](HandNode& n) { n.written_args = {1}; })),
            "method \"forward\", node 1 (dev): written argument 0 is argument 1, but the call has "
            "1 arguments");
  EXPECT_EQ(Refusal(with_delegate([](HandNode& n) {
              n.written_args = {0, 0};
            })),
            "method \"forward\", node 1 (dev): argument 0 is listed as written more than once");
  EXPECT_OK(LoadStatus(with_delegate([](HandNode& n) {
    n.arg_dim_orders = {{}};
    n.written_args = {0};
  })));
}

TEST(HandcraftedProgramTest, WrongFileIdentifier) {
  HandProgram p = GoodProgram();
  p.identifier = "ABCD";
  // Named against both formats a program may be in.
  EXPECT_EQ(Refusal(p),
            "not a program Ferry reads: the file identifier (bytes 4..7) is \"ABCD\", expected "
            "\"FRRY\" (a Ferry program), \"ET12\" (an ExecuTorch program, .pte) or \"BP08\" (an "
            "ExecuTorch bundled program, .bpte)");
  p.identifier = "FT01";
  EXPECT_THAT(Refusal(p), HasSubstr("an ExecuTorch data file (.ptd, file identifier \"FT01\"), "
                                    "not a program: give it as the program's data file"));
}

TEST(HandcraftedProgramTest, MisalignedData) {
  HandProgram p = GoodProgram();
  p.segments[0].misaligned = true;
  const std::vector<uint8_t> bytes = Write(p);
  // Where the data really is, read back with the generated accessors.
  const fbs::Program* root = fbs::GetProgram(bytes.data());
  const size_t offset =
      static_cast<size_t>(root->segments()->Get(0)->data()->data() - bytes.data());
  ASSERT_NE(offset % 64, 0u);
  ASSERT_EQ(bytes.size() % 64, 0u);
  EXPECT_THAT(
      Program::FromBytes(bytes),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "method \"forward\", value 1 (\"w\"): constant data is at byte " +
                   std::to_string(offset) +
                   " of the program, which is not a multiple of 64. Ferry's writer aligns "
                   "constant and state data so that it can be used in place. A binary made by "
                   "stock `flatc -b` is refused: flatc does not place data at multiples of 64 "
                   "bytes (its force_align stops at 32). Load the JSON form instead (`ferry plan "
                   "program.json`, or Program::Load on the .json file); Ferry re-packs it "
                   "aligned"));
}

TEST(HandcraftedProgramTest, SizeNotAMultipleOf64) {
  std::vector<uint8_t> bytes = Write(GoodProgram());
  bytes.resize(bytes.size() + 8, 0);  // trailing bytes the verifier would not notice
  EXPECT_THAT(Program::FromBytes(bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("not a multiple of 64"),
                             HasSubstr("not a program as Ferry's writer leaves it"))));
  bytes.resize(bytes.size() / 2 + 4);  // cut short, into its data
  EXPECT_THAT(Program::FromBytes(bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("not a multiple of 64"),
                             HasSubstr("truncated or damaged"))));
}

TEST(HandcraftedProgramTest, ProgramLevelChecks) {
  HandProgram p = GoodProgram();
  p.version = 2;
  EXPECT_EQ(Refusal(p), "program format version 2 is not supported (this runtime reads version 1)");
  p = GoodProgram();
  p.methods.clear();
  EXPECT_EQ(Refusal(p), "the program has no methods");
  p = GoodProgram();
  p.methods.push_back(p.methods[0]);
  EXPECT_EQ(Refusal(p), "method \"forward\" is defined more than once");
  p = GoodProgram();
  p.methods[0].name = "";
  EXPECT_EQ(Refusal(p), "method 0 has no name");
  EXPECT_THAT(Program::FromBytes(std::vector<uint8_t>{1, 2, 3}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("too short")));
}

TEST(HandcraftedProgramTest, BrokenOffsetIsCaughtByTheVerifier) {
  std::vector<uint8_t> bytes = Write(GoodProgram());
  // The root offset (bytes 0..3) pointing past the end.
  const uint32_t past_end = static_cast<uint32_t>(bytes.size()) + 64;
  std::memcpy(bytes.data(), &past_end, sizeof(past_end));
  EXPECT_THAT(Program::FromBytes(bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the FlatBuffers verifier rejected it at the root offset")));
}

// A damaged length deep inside a program is refused naming the path to it: method, value or
// node (with its op's kind), field. Each case breaks a length the test found through the
// generated accessors.
TEST(HandcraftedProgramTest, TheVerifiersRefusalNamesTheDamagedField) {
  const std::vector<uint8_t> good = ValidProgram();
  auto broken = [&](auto find) {
    std::vector<uint8_t> bytes = good;
    const fbs::Method* method = fbs::GetProgram(bytes.data())->methods()->Get(0);
    const auto* target = reinterpret_cast<const uint8_t*>(find(method));
    const uint32_t huge = 0x0fffffff;  // a length far past the end
    std::memcpy(bytes.data() + (target - bytes.data()), &huge, sizeof(huge));
    return Program::FromBytes(bytes).status();
  };
  EXPECT_THAT(broken([](const fbs::Method* m) { return m->values()->Get(1)->sizes(); }),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rejected it at methods[0] (method \"forward\").values[1].sizes "
                                 "(an offset or length there points outside the buffer")));
  EXPECT_THAT(
      broken([](const fbs::Method* m) { return m->nodes()->Get(0)->args(); }),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("at methods[0] (method \"forward\").nodes[0] (DelegateCall).args")));
  EXPECT_THAT(broken([](const fbs::Method* m) {
                return m->nodes()->Get(0)->op_as_DelegateCall()->compile_specs()->Get(0)->value();
              }),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("at methods[0] (method \"forward\").nodes[0] (DelegateCall)."
                                 "op.compile_specs[0]")));
  EXPECT_THAT(broken([](const fbs::Method* m) { return m->nodes()->Get(1)->op_as_HostOp()->op(); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nodes[1] (HostOp).op.op")));
  EXPECT_THAT(broken([](const fbs::Method* m) { return m->name(); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at methods[0].name (")));
}

// A program whose `nodes` nodes all use one argument list of `shared_args` entries (value 0),
// and whose values all carry one name of `name_bytes` bytes: FlatBuffers allows a vector or string
// to be referenced from any number of tables, so the file stays small while what parsing would
// copy grows with the product.
std::vector<uint8_t> SharingProgram(int nodes, int shared_args, size_t name_bytes) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.TrackMinAlign(64);  // the size becomes a multiple of 64, as Ferry's writer leaves it
  auto args = fbb.CreateVector(std::vector<int32_t>(shared_args, 0));
  auto name = name_bytes == 0 ? flatbuffers::Offset<flatbuffers::String>()
                              : fbb.CreateString(std::string(name_bytes, 'v'));
  std::vector<flatbuffers::Offset<fbs::Value>> values;
  for (int v = 0; v <= nodes; ++v) {
    values.push_back(
        fbs::CreateValue(fbb, name, v == 0 ? fbs::ValueKind::Input : fbs::ValueKind::Intermediate,
                         fbs::DType::Float32, fbb.CreateVector(std::vector<int64_t>{2})));
  }
  std::vector<flatbuffers::Offset<fbs::Node>> node_tables;
  for (int n = 0; n < nodes; ++n) {
    node_tables.push_back(fbs::CreateNode(fbb, 0, fbs::NodeOp::HostOp,
                                          fbs::CreateHostOp(fbb, fbb.CreateString("add")).Union(),
                                          args, fbb.CreateVector(std::vector<int32_t>{n + 1})));
  }
  std::vector<flatbuffers::Offset<fbs::Method>> methods = {fbs::CreateMethod(
      fbb, fbb.CreateString("forward"), fbb.CreateVector(values), fbb.CreateVector(node_tables),
      fbb.CreateVector(std::vector<int32_t>{0}), fbb.CreateVector(std::vector<int32_t>{nodes}))};
  fbb.Finish(fbs::CreateProgram(fbb, 1, fbb.CreateVector(methods)), "FRRY");
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

TEST(SharedListsTest, UnsharedSmallListsAndNamesParse) {
  // The same shape without amplification parses (the op checks come later, at load).
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::FromBytes(SharingProgram(/*nodes=*/100, /*shared_args=*/2,
                                                         /*name_bytes=*/8)));
  ASSERT_OK_AND_ASSIGN(const MethodDef* m, program->method("forward"));
  EXPECT_EQ(m->nodes.size(), 100u);
  EXPECT_EQ(m->nodes[99].args.size(), 2u);
}

TEST(SharedListsTest, ASharedArgumentListIsRefusedBeforeItIsCopiedPerNode) {
  // 2,000 nodes x 20,000 shared entries: 40 million entries (160 MB) from a file of about 200 KB.
  const std::vector<uint8_t> bytes = SharingProgram(2000, 20000, 0);
  ASSERT_LT(bytes.size(), 1u << 20);
  EXPECT_THAT(Program::FromBytes(bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("lists hold more entries in all than its")));
}

TEST(SharedListsTest, ASharedNameIsRefusedBeforeItIsCopiedPerValue) {
  // 2,001 values sharing a 100 KB name: 200 MB of names from a file of about 200 KB.
  const std::vector<uint8_t> bytes = SharingProgram(2000, 1, 100000);
  ASSERT_LT(bytes.size(), 1u << 20);
  EXPECT_THAT(Program::FromBytes(bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("names hold more bytes in all than its")));
}

// A program of one input and `nodes` entries in its node list that all refer to one node table
// (an op without arguments or results): a file of about 4 bytes per node.
std::vector<uint8_t> SharedNodeProgram(int nodes) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.TrackMinAlign(64);
  std::vector<flatbuffers::Offset<fbs::Value>> values = {
      fbs::CreateValue(fbb, fbb.CreateString("x"), fbs::ValueKind::Input, fbs::DType::Float32,
                       fbb.CreateVector(std::vector<int64_t>{2}))};
  const auto node = fbs::CreateNode(fbb, 0, fbs::NodeOp::HostOp,
                                    fbs::CreateHostOp(fbb, fbb.CreateString("add")).Union());
  std::vector<flatbuffers::Offset<fbs::Node>> node_tables(nodes, node);
  std::vector<flatbuffers::Offset<fbs::Method>> methods = {fbs::CreateMethod(
      fbb, fbb.CreateString("forward"), fbb.CreateVector(values), fbb.CreateVector(node_tables),
      fbb.CreateVector(std::vector<int32_t>{0}), fbb.CreateVector(std::vector<int32_t>{0}))};
  fbb.Finish(fbs::CreateProgram(fbb, 1, fbb.CreateVector(methods)), "FRRY");
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

// `bytes` written to a file of its own under the test's temporary directory; its path.
std::string WriteTemp(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(out.good()) << path;
  return path;
}

TEST(ReadMemoryTest, NodesThatShareATableAreCountedOncePerReference) {
  // 30,000 nodes in about 120 KB (the FlatBuffers verifier counts the shared table, and the op
  // table in it, once per reference, up to 65,536 for a small file): each node becomes a
  // structure of a few hundred bytes, so reading takes megabytes, over a limit of 2 MiB.
  const std::vector<uint8_t> bytes = SharedNodeProgram(30000);
  ASSERT_LT(bytes.size(), 128u << 10);
  const std::string path = WriteTemp("shared_nodes.ferry", bytes);
  ProgramLoadOptions options;
  options.memory_limit_bytes = size_t{2} << 20;
  EXPECT_THAT(Program::Load(path, options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("1 values and 30000 nodes"),
                             HasSubstr("more than the 2.0 MiB that "
                                       "ProgramLoadOptions::memory_limit_bytes allows"),
                             HasSubstr("nothing was built"))));
  // The same program within a limit of 1 KiB per node reads, with every reference a node.
  options.memory_limit_bytes = size_t{30000} << 10;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::Load(path, options));
  ASSERT_OK_AND_ASSIGN(const MethodDef* m, program->method("forward"));
  EXPECT_EQ(m->nodes.size(), 30000u);
}

TEST(ReadMemoryTest, AProgramOverTheLimitIsRefusedAndOneUnderItReads) {
  // 1,000 nodes: a limit of 16 bytes per node is far below what any structure for them takes,
  // one of 4 KiB per node far above.
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId v = m.Input("x", DType::kFloat32, {4});
  for (int i = 0; i < 1000; ++i) v = m.Op("relu", {v});
  m.Output(v);
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, pb.Build());
  const std::string path = WriteTemp("relu_chain.ferry", bytes);
  ProgramLoadOptions options;
  options.memory_limit_bytes = 16 * 1000;
  EXPECT_THAT(Program::Load(path, options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("program \"" + path +
                                       "\": reading the program's 1001 "
                                       "values and 1000 nodes takes"),
                             HasSubstr("ProgramLoadOptions::memory_limit_bytes"))));
  options.memory_limit_bytes = size_t{4096} * 1000;
  EXPECT_OK(Program::Load(path, options).status());
  // Without a limit of the caller's, the host's available memory is the bound.
  EXPECT_OK(Program::Load(path).status());
}

}  // namespace
}  // namespace ferry
