// The ExecuTorch importer (loader/executorch/importer.cc): each write of a value ExecuTorch reuses
// as an `out` becomes a value of its own, and instructions that read a value no one wrote or pass
// the wrong number of arguments are refused naming the instruction; a refused method leaves the
// program's others whole; values that are not tensors are inputs and outputs like tensors; mutable
// state with initial data persists across calls, written back when a call's last write went to a
// value of its own. The ops' own mappings are tested per family in ops/.
#include "ferry/loader/executorch/importer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/loader/ferry/internal/writer.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/et_program_parts.h"
#include "tests/testing/pte_writer.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::Bool;
using ::ferry::testing::BoolList;
using ::ferry::testing::Constant;
using ::ferry::testing::Double;
using ::ferry::testing::DoubleList;
using ::ferry::testing::FloatTensor;
using ::ferry::testing::ImportMethodStatus;
using ::ferry::testing::Int;
using ::ferry::testing::IntList;
using ::ferry::testing::IsOkAndHolds;
using ::ferry::testing::KernelCall;
using ::ferry::testing::None;
using ::ferry::testing::OneMethod;
using ::ferry::testing::ReusedOut;
using ::ferry::testing::StatusIs;
using ::ferry::testing::String;
using ::ferry::testing::TensorList;
using ::ferry::testing::ThroughFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(EtImporter, EachWriteOfAReusedValueIsItsOwnValue) {
  ASSERT_OK_AND_ASSIGN(EtImport imported, ImportExecuTorchProgram(ReusedOut(1)));
  ASSERT_EQ(imported.methods.size(), 1u);
  const MethodDef& m = imported.methods[0];
  ASSERT_EQ(m.nodes.size(), 2u);
  const ValueId first = m.nodes[0].results[0];
  const ValueId second = m.nodes[1].results[0];
  EXPECT_NE(first, second);
  EXPECT_THAT(m.nodes[1].args, ElementsAre(first, first));
  EXPECT_THAT(m.outputs, ElementsAre(second));

  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(m));
  std::vector<float> x = {1.5f, -3.0f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2}, x.data())));
  ASSERT_OK(method->Execute());
  const float* out = method->Output(0).data_as<float>();
  EXPECT_EQ(out[0], 4 * x[0]);
  EXPECT_EQ(out[1], 4 * x[1]);
}

TEST(EtImporter, AReadBeforeAnyWriteIsRefused) {
  EtProgram p = ReusedOut(1);
  p.methods[0].inputs = {};
  EXPECT_THAT(ImportMethodStatus(p),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instruction 0 (aten::add.out): value 0 is read before any "
                                 "instruction writes it")));
}

TEST(EtImporter, AWrongArgumentCountIsRefused) {
  EtProgram p = ReusedOut(1);
  p.methods[0].instructions[0].args = {0, 0, 1, 1};
  EXPECT_THAT(ImportMethodStatus(p),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instruction 0 (aten::add.out): the call passes 4 arguments")));
}

// "bad" calls an op Ferry does not map and reads a constant of its own; "good" adds its input to a
// constant; both come from one file.
EtProgram GoodAndBad(const std::vector<float>& w, const std::vector<float>& v) {
  EtProgram p = OneMethod({FloatTensor({4}), Constant({4}, v), FloatTensor({4})}, {0}, {2},
                          {{"aten::convolution_backward", "out"}},
                          {KernelCall(0, {0, 1, 2, 2})});
  p.methods[0].name = "bad";
  EtMethod good = OneMethod({FloatTensor({4}), Constant({4}, w), Int(1), FloatTensor({4})}, {0},
                            {3}, {{"aten::add", "out"}}, {KernelCall(0, {0, 1, 2, 3, 3})})
                      .methods[0];
  good.name = "good";
  p.methods.push_back(std::move(good));
  return p;
}

TEST(EtImporter, ARefusedMethodLeavesTheOthersWhole) {
  const std::vector<float> w = {1, 2, 3, 4};
  const std::vector<float> v = {9, 9, 9, 9};
  ASSERT_OK_AND_ASSIGN(EtImport imported, ImportExecuTorchProgram(GoodAndBad(w, v)));
  EXPECT_THAT(imported.method_order, ElementsAre("bad", "good"));
  ASSERT_EQ(imported.methods.size(), 1u);
  EXPECT_EQ(imported.methods[0].name, "good");
  ASSERT_EQ(imported.refused.size(), 1u);
  EXPECT_EQ(imported.refused[0].name, "bad");
  EXPECT_THAT(imported.refused[0].status,
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("method \"bad\", instruction 0 "
                                 "(aten::convolution_backward.out)")));
  // Only the imported method's constant is copied.
  EXPECT_EQ(imported.constant_bytes, 64u);
  const ValueDef& copied = imported.methods[0].values[1];
  EXPECT_EQ(std::vector<float>(reinterpret_cast<const float*>(copied.data.data()),
                               reinterpret_cast<const float*>(copied.data.data()) + 4),
            w);
}

TEST(EtImporter, AProgramLoadsWithARefusedMethodAndRunsTheOthers) {
  const std::vector<float> w = {1, 2, 3, 4};
  const std::vector<float> v = {9, 9, 9, 9};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(GoodAndBad(w, v)));
  EXPECT_THAT(program->method_names(), ElementsAre("bad", "good"));
  EXPECT_THAT(program->method("bad").status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("method \"bad\"")));
  EXPECT_THAT(program->method("other").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"bad\", \"good\"")));
  Runtime rt;
  EXPECT_THAT(rt.LoadMethod(*program, "bad"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("(aten::convolution_backward.out)")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> good, rt.LoadMethod(*program, "good"));
  std::vector<float> x = {10, 20, 30, 40};
  ASSERT_OK(good->SetInput(0, TensorView::Host(DType::kFloat32, {4}, x.data())));
  ASSERT_OK(good->Execute());
  const float* out = good->Output(0).data_as<float>();
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{11, 22, 33, 44}));
}

// One attempt names every unsupported op of the method: the first in full, the others with
// their first instruction and how often they are called.
TEST(EtImporter, EveryUnsupportedOpIsNamedAtOnce) {
  EtProgram p =
      OneMethod({FloatTensor({4}), FloatTensor({4}), Int(1), FloatTensor({4})}, {0}, {3},
                {{"my::first", "out"}, {"aten::add", "out"}, {"my::second", "out"}},
                {KernelCall(0, {0, 1, 1}), KernelCall(1, {0, 1, 2, 3, 3}), KernelCall(2, {3, 1, 1}),
                 KernelCall(0, {3, 1, 1}), KernelCall(2, {1, 3, 3})});
  EXPECT_THAT(ImportMethodStatus(p),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("instruction 0 (my::first.out): op \"my::first.out\" is not "
                                 "supported; 1 more unsupported op: my::second.out (instruction "
                                 "2, 2 calls)")));
  // Alone, the op is named without a list.
  p.methods[0].instructions.resize(2);
  EXPECT_THAT(ImportMethodStatus(p),
              StatusIs(absl::StatusCode::kUnimplemented,
                       ::testing::EndsWith("op \"my::first.out\" is not supported")));
}

// Names from the file reach messages and the model escaped: a NUL cuts nothing short, and no
// control byte or escape sequence gets through.
TEST(EtImporter, NamesFromTheFileAreEscaped) {
  EtProgram p =
      OneMethod({FloatTensor({4}), FloatTensor({4})}, {0}, {1},
                {{std::string("my::o\0p\x1b[2J", 11), "out"}}, {KernelCall(0, {0, 1, 1})});
  p.methods[0].name = "fwd\n\x07";
  ASSERT_OK_AND_ASSIGN(EtImport imported, ImportExecuTorchProgram(p));
  EXPECT_THAT(imported.method_order, ElementsAre("fwd\\x0a\\x07"));
  ASSERT_EQ(imported.refused.size(), 1u);
  EXPECT_EQ(imported.refused[0].name, "fwd\\x0a\\x07");
  const std::string message(imported.refused[0].status.message());
  EXPECT_EQ(message.find('\0'), std::string::npos);
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
  EXPECT_THAT(message, HasSubstr("method \"fwd\\x0a\\x07\", instruction 0 "
                                 "(my::o\\x00p\\x1b[2J.out): op \"my::o\\x00p\\x1b[2J.out\" is "
                                 "not supported"));
}

// A metadata method as exporters write them (no instructions, outputs of every non-tensor kind)
// and one that takes an int: values fixed at export, returned as they are.
EtProgram NonTensorProgram() {
  // Values: 0 int, 1 double, 2 bool, 3 string, 4 None, 5 int list (items: values 0 and 7),
  // 6 double list, 7 int, 8 bool list, 9 tensor.
  EtProgram p = OneMethod(
      {Int(512), Double(0.25), Bool(true), String("net.seq.Layer0.weight"), None(), IntList({0, 7}),
       DoubleList({1.5, -3}), Int(-2), BoolList({true, false}), FloatTensor({2})},
      {7, 9}, {0, 1, 2, 3, 4, 5, 6, 8, 9, 0}, {}, {});
  p.methods[0].name = "get_meta";
  return p;
}

TEST(EtImporter, NonTensorInputsAndOutputsAreValues) {
  ASSERT_OK_AND_ASSIGN(EtImport imported, ImportExecuTorchProgram(NonTensorProgram()));
  ASSERT_EQ(imported.methods.size(), 1u) << imported.refused[0].status;
  const MethodDef& m = imported.methods[0];
  ASSERT_EQ(m.inputs.size(), 2u);
  EXPECT_EQ(m.values[m.inputs[0]].kind, ValueKind::kScalar);
  EXPECT_EQ(m.values[m.inputs[0]].scalar, Scalar::Int(-2));
  EXPECT_EQ(m.values[m.inputs[1]].kind, ValueKind::kInput);
  std::vector<Scalar> outputs;
  for (size_t o = 0; o + 2 < m.outputs.size(); ++o) {
    outputs.push_back(m.values[m.outputs[o]].scalar);
  }
  EXPECT_THAT(outputs, ElementsAre(Scalar::Int(512), Scalar::Double(0.25), Scalar::Bool(true),
                                   Scalar::String("net.seq.Layer0.weight"), Scalar::None(),
                                   Scalar::IntList({512, -2}), Scalar::DoubleList({1.5, -3}),
                                   Scalar::BoolList({true, false})));
  EXPECT_TRUE(m.values[m.outputs[8]].is_tensor());
  // A value listed twice is one value.
  EXPECT_EQ(m.outputs[9], m.outputs[0]);
}

TEST(EtImporter, TensorListInputsAndOutputsAreRefusedNamingThem) {
  EtProgram p = OneMethod({FloatTensor({2}), TensorList({0})}, {0}, {1}, {}, {});
  EXPECT_THAT(ImportMethodStatus(p),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("method \"forward\": output 0 is value 1, a tensor list, which "
                                 "is not supported")));
  p.methods[0].inputs = {1};
  p.methods[0].outputs = {0};
  EXPECT_THAT(ImportMethodStatus(p), StatusIs(absl::StatusCode::kUnimplemented,
                                              HasSubstr("input 0 is value 1, a tensor list")));
}

TEST(EtImporter, NonTensorValuesRunThroughTheMethodApi) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(NonTensorProgram()));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> m, rt.LoadMethod(*program, "get_meta"));
  // Before a call, outputs are not there to read.
  EXPECT_THAT(m->OutputInt(0), StatusIs(absl::StatusCode::kFailedPrecondition));
  // The int input holds its traced value: only the tensor must be set.
  std::vector<float> x = {1, 2};
  ASSERT_OK(m->SetInput(1, TensorView::Host(DType::kFloat32, {2}, x.data())));
  ASSERT_OK(m->Execute());
  EXPECT_THAT(m->OutputInt(0), IsOkAndHolds(512));
  EXPECT_THAT(m->OutputDouble(1), IsOkAndHolds(0.25));
  EXPECT_THAT(m->OutputBool(2), IsOkAndHolds(true));
  EXPECT_THAT(m->OutputString(3), IsOkAndHolds(absl::string_view("net.seq.Layer0.weight")));
  ASSERT_OK_AND_ASSIGN(const Scalar* none, m->OutputValue(4));
  EXPECT_EQ(none->kind, Scalar::Kind::kNone);
  ASSERT_OK_AND_ASSIGN(const Scalar* list, m->OutputValue(6));
  EXPECT_THAT(list->doubles(), ElementsAre(1.5, -3.0));
  const float* y = m->Output(8).data_as<float>();
  EXPECT_EQ(std::vector<float>(y, y + 2), x);
  EXPECT_EQ(m->Output(0).data(), nullptr);  // not a tensor
}

// A mutable buffer (ExecuTorch's planned tensor with initial data): forward(x) writes s + x into
// s, functionally (add.out with out = s) or in place (copy_), and returns s.
EtProgram Accumulator(const std::vector<float>& initial, bool in_place) {
  EtValue state = FloatTensor({2});
  state.tensor.data.kind = EtDataKind::kMutableSegment;
  state.tensor.data.bytes = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(initial.data()),
                                                initial.size() * sizeof(float));
  state.tensor.fully_qualified_name = "acc";
  if (!in_place) {
    return OneMethod({state, FloatTensor({2}), Int(1)}, {1}, {0}, {{"aten::add", "out"}},
                     {KernelCall(0, {0, 1, 2, 0, 0})});
  }
  // sum = s + x; copy_(s, sum).
  return OneMethod({state, FloatTensor({2}), Int(1), FloatTensor({2}), Bool(false)}, {1}, {0},
                   {{"aten::add", "out"}, {"aten::copy_", ""}},
                   {KernelCall(0, {0, 1, 2, 3, 3}), KernelCall(1, {0, 3, 4, 0})});
}

// The imported method, written as a Ferry program, loaded and called twice with x = {10, 20}.
std::vector<std::vector<float>> RunTwice(const MethodDef& method) {
  absl::StatusOr<std::vector<uint8_t>> bytes = internal::SerializeProgram({&method});
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return {};
  absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(*bytes);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  Runtime rt;
  absl::StatusOr<std::unique_ptr<Method>> m = rt.LoadMethod(**program, "forward");
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  std::vector<float> x = {10, 20};
  EXPECT_OK((*m)->SetInput(0, TensorView::Host(DType::kFloat32, {2}, x.data())));
  std::vector<std::vector<float>> outs;
  for (int call = 0; call < 2; ++call) {
    EXPECT_OK((*m)->Execute());
    const float* y = (*m)->Output(0).data_as<float>();
    outs.emplace_back(y, y + 2);
  }
  return outs;
}

TEST(EtImporter, MutableStateWithInitialDataPersistsAcrossCalls) {
  const std::vector<float> initial = {1, 2};
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "copy_ into the state" : "add.out into the state");
    ASSERT_OK_AND_ASSIGN(EtImport imported,
                         ImportExecuTorchProgram(Accumulator(initial, in_place)));
    ASSERT_EQ(imported.methods.size(), 1u) << imported.refused[0].status;
    const MethodDef& m = imported.methods[0];
    ValueId state_id = -1;
    for (size_t v = 0; v < m.values.size(); ++v) {
      if (m.values[v].kind == ValueKind::kState) state_id = static_cast<ValueId>(v);
    }
    ASSERT_GE(state_id, 0);
    const ValueDef& state = m.values[state_id];
    EXPECT_EQ(state.name, "acc");
    ASSERT_EQ(state.data.size(), 8u);
    EXPECT_EQ(std::vector<float>(reinterpret_cast<const float*>(state.data.data()),
                                 reinterpret_cast<const float*>(state.data.data()) + 2),
              initial);
    // A functional write into the state is copied back at the end; an in-place one is not.
    ASSERT_FALSE(m.nodes.empty());
    const NodeDef& last = m.nodes.back();
    if (in_place) {
      EXPECT_EQ(m.nodes.size(), 2u);
      EXPECT_EQ(last.op, "copy_");
      EXPECT_THAT(last.name, HasSubstr("(instruction 1)"));
    } else {
      ASSERT_EQ(m.nodes.size(), 2u);
      EXPECT_EQ(last.op, "copy_");
      EXPECT_EQ(last.name, "write back acc");
      EXPECT_EQ(last.args[0], state_id);
      EXPECT_EQ(m.node_instructions.back(), -1);  // added by the import
    }
    EXPECT_THAT(RunTwice(m), ElementsAre(ElementsAre(11, 22), ElementsAre(21, 42)));
  }
}

}  // namespace
}  // namespace ferry
