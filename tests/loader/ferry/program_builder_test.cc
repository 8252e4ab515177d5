#include "ferry/loader/ferry/program_builder.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ferry/loader/program.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/loader/test_ops.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::LoaderTestOps;
using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

std::vector<float> AsFloats(absl::Span<const uint8_t> bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

std::vector<int64_t> AsInts(absl::Span<const uint8_t> bytes) {
  std::vector<int64_t> v(bytes.size() / sizeof(int64_t));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(int64_t));
  return v;
}

bool Aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

class ProgramBuilderTest : public ::testing::Test {
 protected:
  // Builds, loads the bytes back and returns method `name`; the program stays in program_.
  const MethodDef* Load(const ProgramBuilder& pb, const std::string& name = "forward") {
    absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
    EXPECT_OK(bytes.status());
    if (!bytes.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(*bytes);
    EXPECT_OK(program.status());
    if (!program.ok()) return nullptr;
    program_ = *std::move(program);
    absl::StatusOr<const MethodDef*> method = program_->method(name);
    EXPECT_OK(method.status());
    return method.ok() ? *method : nullptr;
  }

  OpRegistry ops_ = LoaderTestOps();
  std::unique_ptr<Program> program_;
};

TEST_F(ProgramBuilderTest, DefaultNodeNamesNeverRepeatAValueName) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId taken = m.Input("relu_1", DType::kFloat32, {2, 2});  // a name the builder must skip
  ValueId r0 = m.Op("relu", {a});
  ValueId r1 = m.Op("relu", {r0});
  ValueId r2 = m.Op("relu", {r1});
  ValueId named = m.Op("relu", {r2}, "relu");  // an explicit name is kept, even a taken one
  ValueId s = m.Op("add", {named, taken});
  m.Output(s);
  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->values[r0].name, "relu");
  EXPECT_EQ(def->values[r1].name, "relu_2");
  EXPECT_EQ(def->values[r2].name, "relu_3");
  EXPECT_EQ(def->values[named].name, "relu");
  EXPECT_EQ(def->values[s].name, "add");
  // Nodes carry the name of their results.
  EXPECT_EQ(def->nodes[1].name, "relu_2");
  EXPECT_EQ(def->nodes[1].op, "relu");
}

TEST_F(ProgramBuilderTest, ValuesOfEveryKindRoundTrip) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
  ValueId idx = m.ConstantI64("idx", {3}, {7, -8, 9});
  ValueId cache = m.StateF32("cache", {1, 3}, {0.5f, 0.25f, 0.125f});
  ValueId i = m.Int(-5);
  ValueId d = m.Double(2.5);
  ValueId l = m.IntList({4, 1});
  ValueId b = m.Scalar(Scalar::Bool(true));
  m.Output(a);
  ASSERT_OK(pb.status());

  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->name, "forward");
  ASSERT_EQ(def->values.size(), 8u);
  EXPECT_THAT(def->inputs, ElementsAre(a));
  EXPECT_THAT(def->outputs, ElementsAre(a));
  EXPECT_THAT(def->nodes, IsEmpty());

  const ValueDef& va = def->values[a];
  EXPECT_EQ(va.name, "a");
  EXPECT_EQ(va.kind, ValueKind::kInput);
  EXPECT_EQ(va.meta, (TensorMeta{DType::kFloat32, {2, 2}, {}}));
  EXPECT_TRUE(va.data.empty());

  const ValueDef& vw = def->values[w];
  EXPECT_EQ(vw.kind, ValueKind::kConstant);
  EXPECT_EQ(vw.meta, (TensorMeta{DType::kFloat32, {2, 2}, {}}));
  ASSERT_EQ(vw.data.size(), 16u);
  EXPECT_THAT(AsFloats(vw.data), ElementsAre(1, 2, 3, 4));
  EXPECT_TRUE(Aligned64(vw.data.data()));

  const ValueDef& vidx = def->values[idx];
  EXPECT_EQ(vidx.meta.dtype, DType::kInt64);
  EXPECT_THAT(AsInts(vidx.data), ElementsAre(7, -8, 9));
  EXPECT_TRUE(Aligned64(vidx.data.data()));

  const ValueDef& vc = def->values[cache];
  EXPECT_EQ(vc.kind, ValueKind::kState);
  EXPECT_THAT(AsFloats(vc.data), ElementsAre(0.5f, 0.25f, 0.125f));
  EXPECT_TRUE(Aligned64(vc.data.data()));

  // Data lies inside the program's own bytes (no copy at load).
  const uint8_t* begin = program_->bytes().data();
  const uint8_t* end = begin + program_->bytes().size();
  EXPECT_GE(vw.data.data(), begin);
  EXPECT_LE(vw.data.data() + vw.data.size(), end);

  EXPECT_EQ(def->values[i].kind, ValueKind::kScalar);
  EXPECT_EQ(def->values[i].scalar, Scalar::Int(-5));
  EXPECT_EQ(def->values[i].name, "value 4");  // unnamed values are called after their id
  EXPECT_EQ(def->values[d].scalar, Scalar::Double(2.5));
  EXPECT_EQ(def->values[l].scalar, Scalar::IntList({4, 1}));
  EXPECT_EQ(def->values[b].scalar, Scalar::Bool(true));
}

TEST_F(ProgramBuilderTest, ConstantKeepsItsDimOrder) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  std::vector<uint8_t> data(2 * 3 * 4);
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(k);
  ValueId w = m.Constant("wt", TensorMeta{DType::kFloat32, {2, 3}, {1, 0}}, data);
  m.Output(w);
  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->values[w].meta, (TensorMeta{DType::kFloat32, {2, 3}, {1, 0}}));
  EXPECT_EQ(std::vector<uint8_t>(def->values[w].data.begin(), def->values[w].data.end()), data);
}

TEST_F(ProgramBuilderTest, HostOpResultsAreInferredIntermediates) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 3});
  ValueId w = m.ConstantF32("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  ValueId t = m.Op("add", {a, w});
  ValueId y = m.Op("relu", {t}, "act");
  std::vector<ValueId> halves = m.HostOp("split2", {y});
  ASSERT_EQ(halves.size(), 2u);
  m.Output(halves[0]);
  m.Output(halves[1]);
  EXPECT_EQ(m.meta(t), (TensorMeta{DType::kFloat32, {2, 3}, {}}));
  EXPECT_EQ(m.meta(halves[1]), (TensorMeta{DType::kFloat32, {1, 3}, {}}));

  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  ASSERT_EQ(def->nodes.size(), 3u);
  const NodeDef& add = def->nodes[0];
  EXPECT_EQ(add.kind, NodeKind::kHostOp);
  EXPECT_EQ(add.op, "add");
  EXPECT_EQ(add.name, "add");  // default: the op name
  EXPECT_THAT(add.args, ElementsAre(a, w));
  EXPECT_THAT(add.results, ElementsAre(t));
  EXPECT_EQ(def->nodes[1].name, "act");
  EXPECT_EQ(def->nodes[1].op, "relu");
  EXPECT_THAT(def->nodes[2].results, ElementsAre(halves[0], halves[1]));
  EXPECT_EQ(def->values[t].kind, ValueKind::kIntermediate);
  EXPECT_EQ(def->values[t].meta, (TensorMeta{DType::kFloat32, {2, 3}, {}}));
  EXPECT_EQ(def->values[halves[0]].meta, (TensorMeta{DType::kFloat32, {1, 3}, {}}));
  EXPECT_THAT(def->outputs, ElementsAre(halves[0], halves[1]));
}

TEST_F(ProgramBuilderTest, ScalarArgumentsReachInfer) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {4});
  ValueId v = m.Op("view", {a, m.IntList({2, 2})});
  ValueId y = m.Op("mul_scalar", {v, m.Double(0.5)});
  m.Output(y);
  ASSERT_OK(pb.status());
  EXPECT_EQ(m.meta(v), (TensorMeta{DType::kFloat32, {2, 2}, {}}));
  EXPECT_EQ(m.meta(y), (TensorMeta{DType::kFloat32, {2, 2}, {}}));
}

TEST_F(ProgramBuilderTest, InferErrorNamesTheNode) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {4});
  ValueId b = m.Input("b", DType::kFloat32, {5});
  EXPECT_EQ(m.Op("add", {a, b}, "sum"), -1);
  EXPECT_THAT(pb.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "method \"forward\", node 0 (sum): argument 1 does not match argument 0 "
                       "in dtype and sizes"));
}

TEST_F(ProgramBuilderTest, UnknownOpIsAStickyFirstError) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2});
  ValueId bad = m.Op("no_such_op", {a});
  EXPECT_EQ(bad, -1);
  // Later calls, even ones that would fail differently, keep the first error.
  EXPECT_EQ(m.Op("relu", {bad}), -1);
  EXPECT_EQ(m.Input("b", DType::kFloat32, {2}), -1);
  std::vector<ValueId> r = m.GraphDelegate(
      std::nullopt, {a},
      [](MethodBuilder& g, absl::Span<const ValueId> in) { return std::vector<ValueId>{in[0]}; });
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r[0], -1);
  m.Output(bad);
  const absl::Status expected = absl::InvalidArgumentError(
      "method \"forward\", node 0 (no_such_op): op \"no_such_op\" is not in the op registry");
  EXPECT_EQ(pb.status(), expected);
  EXPECT_EQ(pb.Build().status(), expected);
}

TEST_F(ProgramBuilderTest, BadValueIdIsReported) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  m.Input("a", DType::kFloat32, {2});
  EXPECT_EQ(m.Op("relu", {42}), -1);
  EXPECT_THAT(pb.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                    "method \"forward\", node 0 (relu): argument 0 is value 42, "
                                    "but the method has 1 values"));
}

TEST_F(ProgramBuilderTest, WrongArgumentCountIsReported) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2});
  EXPECT_EQ(m.Op("add", {a}), -1);
  EXPECT_THAT(pb.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("op \"add\" takes 2 arguments, got 1")));
}

TEST_F(ProgramBuilderTest, OpOnMultiResultOpIsAnError) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2});
  EXPECT_EQ(m.Op("split2", {a}), -1);
  EXPECT_THAT(pb.status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("HostOp")));
}

TEST_F(ProgramBuilderTest, ConstantDataOfTheWrongSizeIsRefused) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  EXPECT_EQ(m.ConstantF32("w", {2, 2}, {1, 2, 3}), -1);
  EXPECT_THAT(pb.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "method \"forward\", constant \"w\": data is 12 bytes, expected 16 for "
                       "float32[2, 2]"));
}

TEST_F(ProgramBuilderTest, OversizedInputIsRefused) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  EXPECT_EQ(m.Input("x", DType::kFloat32, {int64_t{1} << 62, int64_t{1} << 62}), -1);
  EXPECT_THAT(pb.status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overflows")));
}

// Non-tensor inputs and outputs of every kind, through the binary form and the JSON form.
TEST_F(ProgramBuilderTest, NonTensorInputsAndOutputsRoundTrip) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  const std::vector<Scalar> kinds = {Scalar::Int(-7),
                                     Scalar::Double(0.125),
                                     Scalar::Bool(true),
                                     Scalar::IntList({3, -1}),
                                     Scalar::None(),
                                     Scalar::String("tok\n\"x\""),
                                     Scalar::DoubleList({1.5, -2}),
                                     Scalar::BoolList({false, true, true})};
  ValueId x = m.Input("x", DType::kFloat32, {2});
  ValueId n = m.ScalarInput("n", Scalar::Int(4));
  std::vector<ValueId> outs;
  for (const Scalar& s : kinds) outs.push_back(m.Scalar(s));
  for (ValueId v : outs) m.Output(v);
  m.Output(x);
  ASSERT_OK(pb.status());
  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  EXPECT_THAT(def->inputs, ElementsAre(x, n));
  EXPECT_EQ(def->values[n].kind, ValueKind::kScalar);
  EXPECT_EQ(def->values[n].scalar, Scalar::Int(4));
  EXPECT_EQ(def->values[n].name, "n");
  ASSERT_EQ(def->outputs.size(), kinds.size() + 1);
  for (size_t i = 0; i < kinds.size(); ++i) {
    EXPECT_EQ(def->values[def->outputs[i]].scalar, kinds[i]) << kinds[i].ToString();
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  ASSERT_OK(bytes.status());
  absl::StatusOr<std::string> json = Program::ToJson(*bytes);
  ASSERT_OK(json.status());
  absl::StatusOr<std::unique_ptr<Program>> again = Program::FromJson(*json);
  ASSERT_OK(again.status());
  absl::StatusOr<const MethodDef*> meta = (*again)->method("forward");
  ASSERT_OK(meta.status());
  ASSERT_EQ((*meta)->outputs.size(), kinds.size() + 1);
  for (size_t i = 0; i < kinds.size(); ++i) {
    EXPECT_EQ((*meta)->values[(*meta)->outputs[i]].scalar, kinds[i]) << *json;
  }
  EXPECT_EQ((*meta)->values[(*meta)->inputs[1]].scalar, Scalar::Int(4));
}

TEST_F(ProgramBuilderTest, DuplicateMethodNameIsRefused) {
  ProgramBuilder pb(&ops_);
  pb.AddMethod("forward");
  pb.AddMethod("forward");
  EXPECT_THAT(pb.Build().status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                            "method \"forward\" is defined more than once"));
}

TEST_F(ProgramBuilderTest, ProgramWithoutMethodsIsRefused) {
  ProgramBuilder pb(&ops_);
  EXPECT_THAT(pb.Build().status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no methods")));
}

TEST_F(ProgramBuilderTest, NullRegistryMeansBuiltIns) {
  ProgramBuilder pb;
  EXPECT_EQ(pb.registry().Names(), OpRegistry::WithBuiltIns().Names());
  ProgramBuilder mine(&ops_);
  EXPECT_EQ(&mine.registry(), &ops_);
}

TEST_F(ProgramBuilderTest, SeveralMethods) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& f = pb.AddMethod("forward");
  f.Output(f.Input("a", DType::kFloat32, {1}));
  MethodBuilder& g = pb.AddMethod("prefill");
  g.Output(g.Op("relu", {g.Input("b", DType::kInt64, {3})}));
  const MethodDef* def = Load(pb, "prefill");
  ASSERT_NE(def, nullptr);
  EXPECT_THAT(program_->method_names(), ElementsAre("forward", "prefill"));
  EXPECT_EQ(def->values[0].meta, (TensorMeta{DType::kInt64, {3}, {}}));
  EXPECT_EQ(def->nodes.size(), 1u);
}

TEST_F(ProgramBuilderTest, DelegateKeepsSpecsPayloadLayoutsAndWrittenArgs) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 3});
  ValueId s = m.StateF32("kv", {3, 2}, std::vector<float>(6, 0.0f));
  ValueId k = m.Int(7);
  DelegateOptions options;
  options.name = "attn";
  options.arg_dim_orders = {{}, {1, 0}, {}};
  options.written_args = {1};
  options.compile_specs = {{"precision", "fp16"}};
  std::vector<ValueId> r = m.Delegate(
      "vendor", "cuda:1", {9, 8, 7, 6}, {a, s, k},
      {TensorMeta{DType::kFloat32, {2, 2}, {}}, TensorMeta{DType::kInt64, {5}, {}}}, options);
  ASSERT_EQ(r.size(), 2u);
  m.Output(r[0]);
  m.Output(r[1]);

  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  ASSERT_EQ(def->nodes.size(), 1u);
  const NodeDef& node = def->nodes[0];
  EXPECT_EQ(node.kind, NodeKind::kDelegate);
  EXPECT_EQ(node.name, "attn");
  EXPECT_EQ(node.delegate().backend, "vendor");
  EXPECT_THAT(node.delegate().compile_specs,
              ElementsAre(Pair("target_device", "cuda:1"), Pair("precision", "fp16")));
  EXPECT_EQ(node.CompileSpec("target_device"), "cuda:1");
  EXPECT_EQ(node.CompileSpec("absent"), std::nullopt);
  EXPECT_THAT(node.delegate().payload, ElementsAre(9, 8, 7, 6));
  EXPECT_TRUE(Aligned64(node.delegate().payload.data()));
  EXPECT_THAT(node.args, ElementsAre(a, s, k));
  EXPECT_THAT(node.results, ElementsAre(r[0], r[1]));
  ASSERT_EQ(node.delegate().arg_dim_orders.size(), 3u);
  EXPECT_THAT(node.delegate().arg_dim_orders[0], IsEmpty());
  EXPECT_THAT(node.delegate().arg_dim_orders[1], ElementsAre(1, 0));
  EXPECT_THAT(node.delegate().written_args, ElementsAre(1));
  EXPECT_EQ(def->values[r[1]].meta, (TensorMeta{DType::kInt64, {5}, {}}));
}

TEST_F(ProgramBuilderTest, DelegateWithoutTargetHasNoTargetSpec) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2});
  m.Output(m.Delegate("vendor", std::nullopt, {}, {a}, {TensorMeta{DType::kFloat32, {2}, {}}})[0]);
  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  EXPECT_THAT(def->nodes[0].delegate().compile_specs, IsEmpty());
  EXPECT_EQ(def->nodes[0].name, "vendor");
  EXPECT_TRUE(def->nodes[0].delegate().payload.empty());
}

TEST_F(ProgramBuilderTest, DelegateRejectsRepeatedSpecKey) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2});
  DelegateOptions options;
  options.compile_specs = {{"target_device", "cpu"}};
  std::vector<ValueId> r =
      m.Delegate("vendor", "cuda:0", {}, {a}, {TensorMeta{DType::kFloat32, {2}, {}}}, options);
  EXPECT_THAT(r, ElementsAre(-1));
  EXPECT_THAT(pb.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "method \"forward\", node 0 (vendor): compile spec key \"target_device\" "
                       "is given more than once"));
}

TEST_F(ProgramBuilderTest, DelegateRejectsBadWrittenArg) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2});
  DelegateOptions options;
  options.written_args = {3};
  m.Delegate("vendor", std::nullopt, {}, {a}, {}, options);
  EXPECT_THAT(pb.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("written argument 3 is out of range")));
}

TEST_F(ProgramBuilderTest, GraphDelegatePayloadIsAProgramWithMethodMain) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
  std::vector<ValueId> r =
      m.GraphDelegate("cuda:0", {a, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        ValueId sum = g.Op("add", {in[0], in[1]});
        return std::vector<ValueId>{g.Op("relu", {sum}), sum};
      });
  ASSERT_EQ(r.size(), 2u);
  m.Output(m.Op("add", {r[0], r[1]}));

  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  const NodeDef& node = def->nodes[0];
  EXPECT_EQ(node.kind, NodeKind::kDelegate);
  EXPECT_EQ(node.delegate().backend, kGraphBackendName);
  EXPECT_EQ(node.name, "graph");
  EXPECT_EQ(node.CompileSpec(kTargetDeviceSpec), "cuda:0");
  EXPECT_THAT(node.args, ElementsAre(a, w));
  EXPECT_THAT(node.delegate().written_args, IsEmpty());
  EXPECT_EQ(def->values[r[0]].meta, (TensorMeta{DType::kFloat32, {2, 2}, {}}));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> sub, Program::FromBytes(node.delegate().payload));
  EXPECT_THAT(sub->method_names(), ElementsAre("main"));
  ASSERT_OK_AND_ASSIGN(const MethodDef* main, sub->method("main"));
  ASSERT_EQ(main->inputs.size(), 2u);
  // Named after the call's argument positions, not the values passed in.
  EXPECT_EQ(main->values[main->inputs[0]].name, "argument 0");
  EXPECT_EQ(main->values[main->inputs[1]].name, "argument 1");
  EXPECT_EQ(main->values[main->inputs[1]].kind, ValueKind::kInput);
  EXPECT_EQ(main->values[main->inputs[1]].meta, (TensorMeta{DType::kFloat32, {2, 2}, {}}));
  ASSERT_EQ(main->nodes.size(), 2u);
  EXPECT_EQ(main->nodes[0].op, "add");
  EXPECT_THAT(main->nodes[0].args, ElementsAre(main->inputs[0], main->inputs[1]));
  EXPECT_EQ(main->nodes[1].op, "relu");
  EXPECT_THAT(main->outputs, ElementsAre(main->nodes[1].results[0], main->nodes[0].results[0]));
}

TEST_F(ProgramBuilderTest, GraphDelegatesOfOneBodyOnLikeArgumentsCarryOnePayload) {
  // Layers of a model: one body called on different values of the same types and shapes. The
  // payloads are byte for byte the same, so the graph backend reads one sub-program for all.
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 2});
  auto layer = [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("relu", {g.Op("add", {in[0], in[1]})})};
  };
  ValueId w0 = m.ConstantF32("w0", {2, 2}, {1, 2, 3, 4});
  ValueId w1 = m.ConstantF32("w1", {2, 2}, {5, 6, 7, 8});
  ValueId h = m.GraphDelegate("cuda:0", {x, w0}, layer)[0];
  m.Output(m.GraphDelegate("cuda:0", {h, w1}, layer)[0]);
  // A third call whose argument has another shape carries another payload.
  ValueId y = m.Input("y", DType::kFloat32, {3});
  m.Output(m.GraphDelegate("cuda:0", {y, y}, layer)[0]);

  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  ASSERT_EQ(def->nodes.size(), 3u);
  const absl::Span<const uint8_t> p0 = def->nodes[0].delegate().payload,
                                  p1 = def->nodes[1].delegate().payload,
                                  p2 = def->nodes[2].delegate().payload;
  EXPECT_TRUE(std::equal(p0.begin(), p0.end(), p1.begin(), p1.end()));
  EXPECT_FALSE(std::equal(p0.begin(), p0.end(), p2.begin(), p2.end()));
}

TEST_F(ProgramBuilderTest, GraphDelegateWithoutTargetHasNoSpec) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2});
  m.Output(m.GraphDelegate(std::nullopt, {a}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("relu", {in[0]})};
  })[0]);
  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  EXPECT_FALSE(def->nodes[0].CompileSpec(kTargetDeviceSpec).has_value());
}

// Which delegate arguments count as written, for sub-graphs that write in different ways.
TEST_F(ProgramBuilderTest, GraphDelegateDeclaresArgumentsItsSubgraphWrites) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {4});
  ValueId b = m.Input("b", DType::kFloat32, {4});
  ValueId s = m.StateF32("s", {4}, {0, 0, 0, 0});
  ValueId c = m.Input("c", DType::kFloat32, {2, 2});
  // a is read only; s is written directly; c is written through a chain of two views of it; b
  // is the source of a write into a fresh intermediate (not a write of b).
  std::vector<ValueId> r =
      m.GraphDelegate("cuda:0", {a, b, s, c}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        ValueId t = g.Op("relu", {in[0]});
        g.Op("add_", {in[2], t});
        ValueId flat = g.Op("view", {in[3], g.IntList({4})});
        ValueId square = g.Op("view", {flat, g.IntList({2, 2})});
        ValueId flat2 = g.Op("view", {square, g.IntList({4})});
        g.Op("add_", {flat2, in[0]});
        ValueId fresh = g.Op("relu", {in[1]});
        g.Op("add_", {fresh, in[1]});
        return std::vector<ValueId>{fresh};
      });
  ASSERT_EQ(r.size(), 1u);
  m.Output(r[0]);
  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  EXPECT_THAT(def->nodes[0].delegate().written_args, ElementsAre(2, 3));
}

TEST_F(ProgramBuilderTest, GraphDelegateMergesDeclaredWrittenArgs) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {4});
  ValueId b = m.Input("b", DType::kFloat32, {4});
  DelegateOptions options;
  options.written_args = {0};
  std::vector<ValueId> r = m.GraphDelegate(
      std::nullopt, {a, b},
      [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("add_", {in[1], in[0]})};
      },
      options);
  m.Output(r[0]);
  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  EXPECT_THAT(def->nodes[0].delegate().written_args, ElementsAre(0, 1));
}

TEST_F(ProgramBuilderTest, GraphDelegateInputsTakeTheCompiledDimOrders) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 3});
  ValueId w = m.ConstantF32("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  DelegateOptions options;
  options.arg_dim_orders = {{}, {1, 0}};
  std::vector<ValueId> r = m.GraphDelegate(
      "cuda:0", {a, w},
      [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("add", {in[0], in[1]})};
      },
      options);
  m.Output(r[0]);
  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  const NodeDef& node = def->nodes[0];
  ASSERT_EQ(node.delegate().arg_dim_orders.size(), 2u);
  EXPECT_THAT(node.delegate().arg_dim_orders[1], ElementsAre(1, 0));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> sub, Program::FromBytes(node.delegate().payload));
  ASSERT_OK_AND_ASSIGN(const MethodDef* main, sub->method("main"));
  EXPECT_THAT(main->values[main->inputs[0]].meta.dim_order, IsEmpty());
  EXPECT_EQ(main->values[main->inputs[1]].meta, (TensorMeta{DType::kFloat32, {2, 3}, {1, 0}}));
  // The result is row-major whatever the inputs' layouts.
  EXPECT_EQ(def->values[r[0]].meta, (TensorMeta{DType::kFloat32, {2, 3}, {}}));
}

TEST_F(ProgramBuilderTest, GraphDelegateBakesScalarArgumentsIntoTheSubgraph) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2});
  ValueId k = m.Double(3.0);
  std::vector<ValueId> r =
      m.GraphDelegate("cuda:0", {a, k}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("mul_scalar", {in[0], in[1]})};
      });
  m.Output(r[0]);
  const MethodDef* def = Load(pb);
  ASSERT_NE(def, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> sub,
                       Program::FromBytes(def->nodes[0].delegate().payload));
  ASSERT_OK_AND_ASSIGN(const MethodDef* main, sub->method("main"));
  // Only tensors are inputs of "main"; the scalar is a value of the sub-graph.
  ASSERT_EQ(main->inputs.size(), 1u);
  const ValueDef& scalar = main->values[main->nodes[0].args[1]];
  EXPECT_EQ(scalar.kind, ValueKind::kScalar);
  EXPECT_EQ(scalar.scalar, Scalar::Double(3.0));
}

TEST_F(ProgramBuilderTest, GraphDelegateSubgraphErrorIsReported) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2});
  std::vector<ValueId> r =
      m.GraphDelegate("cuda:0", {a}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("gelu", {in[0]})};
      });
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r[0], -1);
  EXPECT_THAT(pb.Build().status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "method \"forward\", node 0 (graph): in the sub-graph: method \"main\", "
                       "node 0 (gelu): op \"gelu\" is not in the op registry"));
}

TEST_F(ProgramBuilderTest, WriteFileThenLoad) {
  ProgramBuilder pb(&ops_);
  MethodBuilder& m = pb.AddMethod("forward");
  m.Output(m.Op("relu", {m.Input("a", DType::kFloat32, {3})}));
  const std::string path = ::testing::TempDir() + "/builder_write_file.ferry";
  ASSERT_OK(pb.WriteFile(path));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::Load(path));
  ASSERT_OK_AND_ASSIGN(const MethodDef* def, program->method("forward"));
  EXPECT_EQ(def->nodes[0].op, "relu");
  EXPECT_THAT(pb.WriteFile("/nonexistent-dir/x.ferry"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent-dir/x.ferry")));
}

}  // namespace
}  // namespace ferry
