// ExecuTorch delegate calls: each becomes a Ferry delegate node named by its backend id, with its
// compile specs and payload; its results are derived from the values it lists (those nothing
// wrote before the call), and what stays ambiguous is refused. Programs are written as .pte files
// (tests/testing/pte_writer.h) whose delegate payload is a Ferry graph sub-program, run through a
// backend registered under an ExecuTorch-style id, and compared with the all-host computation
// done here.
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/importer.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/plan_printer.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/et_program_parts.h"
#include "tests/testing/ptd_builder.h"
#include "tests/testing/pte_writer.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::FloatTensor;
using ::ferry::testing::Int;
using ::ferry::testing::RenamedBackend;
using ::ferry::testing::FloatBytes;
using ::ferry::testing::ImportMethodStatus;
using ::ferry::testing::MethodStatus;
using ::ferry::testing::StatusIs;
using ::testing::_;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pointwise;
using ::testing::FloatEq;

constexpr char kBackendId[] = "FerryGraphBackend";

constexpr int64_t kRows = 2, kCols = 3;
const std::vector<float> kWeight = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -3.0f};

// The delegate's payload: a Ferry program whose method "main" takes (a, b) and returns
// (a + b, a * b).
std::vector<uint8_t> SumAndProductPayload() {
  ProgramBuilder pb;
  MethodBuilder& g = pb.AddMethod("main");
  const ValueId a = g.Input("a", DType::kFloat32, {kRows, kCols});
  const ValueId b = g.Input("b", DType::kFloat32, {kRows, kCols});
  g.Output(g.Op("add", {a, b}));
  g.Output(g.Op("mul", {a, b}));
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *std::move(bytes) : std::vector<uint8_t>{};
}

// The program's storage: the constant's bytes and the payload, which the EtProgram's spans view.
struct Storage {
  std::vector<uint8_t> weight = FloatBytes(kWeight);
  std::vector<uint8_t> payload = SumAndProductPayload();
};

// forward(x) = s + p where (s, p) = delegate(x, w), w a constant [2, 3]: the delegate call lists
// `delegate_args` (by default {x, w, s, p} = {0, 1, 2, 3}); value 4 is alpha, 5 the result,
// 6 an Int that a test may list.
EtProgram DelegateProgram(const Storage& storage, std::optional<std::string> target_device,
                          std::vector<int32_t> delegate_args = {0, 1, 2, 3}) {
  EtProgram p;
  EtMethod m;
  m.name = "forward";
  EtValue w = FloatTensor({kRows, kCols});
  w.tensor.data.kind = EtDataKind::kConstantBuffer;
  w.tensor.data.bytes = storage.weight;
  m.values = {FloatTensor({kRows, kCols}), w, FloatTensor({kRows, kCols}),
              FloatTensor({kRows, kCols}), Int(1), FloatTensor({kRows, kCols}), Int(7)};
  m.inputs = {0};
  m.outputs = {5};
  m.operators = {{"aten::add", "out"}};
  EtDelegate d;
  d.backend_id = kBackendId;
  if (target_device.has_value()) d.compile_specs.emplace_back("target_device", *target_device);
  d.compile_specs.emplace_back("note", "kept as given");
  d.payload = storage.payload;
  m.delegates = {d};
  EtInstruction call;
  call.kind = EtInstructionKind::kDelegateCall;
  call.delegate_index = 0;
  call.args = std::move(delegate_args);
  EtInstruction add;
  add.kind = EtInstructionKind::kKernelCall;
  add.op_index = 0;
  add.args = {2, 3, 4, 5, 5};
  m.instructions = {call, add};
  p.methods.push_back(std::move(m));
  return p;
}

std::vector<float> Reference(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] + kWeight[i]) + (x[i] * kWeight[i]);
  return y;
}

TEST(ExecuTorchDelegateTest, ADelegateCallBecomesADelegateNodeWithDerivedResults) {
  Storage storage;
  const EtProgram et = DelegateProgram(storage, "cuda:0");
  const std::vector<uint8_t> file = testing::WritePte(et);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(file));
  ASSERT_OK_AND_ASSIGN(const MethodDef* m, program->method("forward"));
  ASSERT_EQ(m->nodes.size(), 2u);
  const NodeDef& node = m->nodes[0];
  EXPECT_EQ(node.kind, NodeKind::kDelegate);
  EXPECT_EQ(node.delegate().backend, kBackendId);
  EXPECT_THAT(node.name, HasSubstr("instruction 0"));
  EXPECT_EQ(node.CompileSpec("target_device"), "cuda:0");
  EXPECT_EQ(node.CompileSpec("note"), "kept as given");
  // Arguments: the input and the constant; results: the two values nothing wrote before.
  ASSERT_EQ(node.args.size(), 2u);
  EXPECT_EQ(m->values[node.args[0]].kind, ValueKind::kInput);
  EXPECT_EQ(m->values[node.args[1]].kind, ValueKind::kConstant);
  ASSERT_EQ(node.results.size(), 2u);
  for (ValueId r : node.results) {
    EXPECT_EQ(m->values[r].kind, ValueKind::kIntermediate);
    EXPECT_EQ(m->values[r].meta.dtype, DType::kFloat32);
    EXPECT_THAT(m->values[r].meta.sizes, ElementsAre(kRows, kCols));
  }
  // The add reads both results.
  EXPECT_THAT(m->nodes[1].args, AllOf(::testing::Contains(node.results[0]),
                                      ::testing::Contains(node.results[1])));
  // The payload is the sub-program's bytes, held by the program (not the file's buffer).
  EXPECT_EQ(std::vector<uint8_t>(node.delegate().payload.begin(), node.delegate().payload.end()),
            storage.payload);
  EXPECT_TRUE(node.delegate().payload.data() < file.data() ||
              node.delegate().payload.data() >= file.data() + file.size());
}

TEST(ExecuTorchDelegateTest, IntArgumentsArePassedAsScalars) {
  Storage storage;
  ASSERT_OK_AND_ASSIGN(EtImport imported,
                       ImportExecuTorchProgram(DelegateProgram(storage, "cpu", {0, 6, 1, 2, 3})));
  const MethodDef& m = imported.methods[0];
  ASSERT_EQ(m.nodes[0].args.size(), 3u);
  const ValueDef& scalar = m.values[m.nodes[0].args[1]];
  EXPECT_EQ(scalar.kind, ValueKind::kScalar);
  EXPECT_EQ(scalar.scalar, Scalar::Int(7));
  EXPECT_EQ(m.nodes[0].results.size(), 2u);
}

TEST(ExecuTorchDelegateTest, AmbiguousResultsAreRefusedNamingTheValue) {
  Storage storage;
  // Only values written before the call: no result.
  EXPECT_THAT(ImportMethodStatus(DelegateProgram(storage, std::nullopt, {0, 1})),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("method \"forward\", instruction 0 (delegate call to "
                                       "backend \"FerryGraphBackend\")"),
                             HasSubstr("no result"))));
  // The constant w (value 1) after the first result s (value 2): an argument or a result?
  EXPECT_THAT(ImportMethodStatus(DelegateProgram(storage, std::nullopt, {0, 2, 1, 3})),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("instruction 0"), HasSubstr("value 1 (position 2 of 4)"),
                             HasSubstr("after value 2"), HasSubstr("ambiguous"))));
  // An Int after the first result would be a non-tensor result.
  EXPECT_THAT(ImportMethodStatus(DelegateProgram(storage, std::nullopt, {0, 1, 2, 6})),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("instruction 0"), HasSubstr("value 6 (position 3 of 4)"),
                             HasSubstr("only tensor results"))));
  // A result listed twice.
  EXPECT_THAT(ImportMethodStatus(DelegateProgram(storage, std::nullopt, {0, 1, 2, 2})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("instruction 0"), HasSubstr("value 2 is listed twice"))));
}

TEST(ExecuTorchDelegateTest, AnUnregisteredBackendIsNotFoundNamingMethodAndInstruction) {
  Storage storage;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::FromBytes(testing::WritePte(DelegateProgram(storage, "cuda:0"))));
  Runtime rt;
  EXPECT_THAT(rt.LoadMethod(*program, "forward"),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("method \"forward\""), HasSubstr("instruction 0"),
                             HasSubstr("no backend named \"FerryGraphBackend\""),
                             HasSubstr("Runtime::RegisterBackend"))));
}

// DelegateProgram with a second method, `name`, whose delegate is backend `backend`.
EtProgram WithMethodOn(EtProgram p, const std::string& name, const std::string& backend) {
  EtMethod m = p.methods[0];
  m.name = name;
  m.delegates[0].backend_id = backend;
  p.methods.push_back(std::move(m));
  return p;
}

absl::Status ExecuteOnce(Method& method, std::vector<float>& x) {
  const int64_t sizes[] = {kRows, kCols};
  FERRY_RETURN_IF_ERROR(method.SetInput(0, TensorView::Host(DType::kFloat32, sizes, x.data())));
  return method.Execute();
}

TEST(ExecuTorchDelegateTest, PlanOnlyBackendsLetAMethodWithoutItsBackendBePlanned) {
  // Both methods name the same unregistered backend, on cuda:0.
  Storage storage;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::FromBytes(testing::WritePte(
                           WithMethodOn(DelegateProgram(storage, "cuda:0"), "again", kBackendId))));
  Runtime rt;
  EXPECT_THAT(rt.LoadMethod(*program, "forward"), StatusIs(absl::StatusCode::kNotFound, _));

  EXPECT_THAT(rt.RegisterPlanOnlyBackends(*program), ElementsAre(kBackendId));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  // Planned by the rules from what the program declares: the delegate on cuda:0 (as mapped), x
  // copied to it per call and the constant w once at load, both results back per call for the
  // host add.
  ASSERT_OK_AND_ASSIGN(const Device cuda0, ParseDevice("cuda:0"));
  const auto mapped = rt.default_device_map().find(cuda0);
  const Device expected = mapped == rt.default_device_map().end() ? cuda0 : mapped->second;
  const PlacementPlan& plan = method->plan().placement;
  EXPECT_EQ(plan.nodes[0].device, expected);
  EXPECT_EQ(plan.per_call_copies(), 3);
  EXPECT_EQ(plan.load_copies.size(), 1u);
  EXPECT_THAT(FormatPlanText(*method), HasSubstr(absl::StrCat("delegate:", kBackendId)));

  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  EXPECT_THAT(ExecuteOnce(*method, x),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("method \"forward\""), HasSubstr("instruction 0"),
                             HasSubstr(absl::StrCat("backend \"", kBackendId,
                                                    "\" is not registered")))));
  // The other method loads too; a second call finds nothing missing.
  EXPECT_OK(rt.LoadMethod(*program, "again").status());
  EXPECT_THAT(rt.RegisterPlanOnlyBackends(*program), IsEmpty());
}

TEST(ExecuTorchDelegateTest, PlanOnlyBackendsNeverReplaceARegisteredOne) {
  // "forward" uses the registered backend, "other" one nobody registered.
  Storage storage;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::FromBytes(testing::WritePte(WithMethodOn(
                           DelegateProgram(storage, "cuda:0"), "other", "OtherBackend"))));
  Runtime rt;
  ASSERT_OK(rt.RegisterBackend(std::make_unique<RenamedBackend>(kBackendId, MakeGraphBackend())));
  const Backend* registered = rt.FindBackend(kBackendId);

  EXPECT_THAT(rt.RegisterPlanOnlyBackends(*program), ElementsAre("OtherBackend"));
  EXPECT_EQ(rt.FindBackend(kBackendId), registered);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> forward, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  ASSERT_OK(ExecuteOnce(*forward, x));
  const TensorView out = forward->Output(0);
  ASSERT_EQ(out.device(), Device::Host());
  EXPECT_THAT(std::vector<float>(out.data_as<float>(), out.data_as<float>() + kRows * kCols),
              Pointwise(FloatEq(), Reference(x)));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> other, rt.LoadMethod(*program, "other"));
  EXPECT_THAT(ExecuteOnce(*other, x),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("method \"other\""),
                             HasSubstr("backend \"OtherBackend\" is not registered"))));
}

struct TargetCase {
  std::optional<std::string> target_device;
  Device expected;  // where the delegate runs: cuda:0 on sim:0 (the default device map)
};

class ExecuTorchDelegateRunTest : public ::testing::TestWithParam<TargetCase> {};

TEST_P(ExecuTorchDelegateRunTest, RunsThroughABackendRegisteredUnderItsId) {
  Storage storage;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::FromBytes(
                           testing::WritePte(DelegateProgram(storage, GetParam().target_device))));
  RuntimeOptions options;
  options.sim.guard = true;
  Runtime rt(options);
  ASSERT_OK(rt.RegisterBackend(std::make_unique<RenamedBackend>(kBackendId, MakeGraphBackend())));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  EXPECT_EQ(method->plan().placement.nodes[0].device, GetParam().expected);
  for (std::vector<float> x :
       {std::vector<float>{1, 2, 3, 4, 5, 6}, std::vector<float>{-0.5f, 0, 8, -2, 0.75f, 10}}) {
    const int64_t sizes[] = {kRows, kCols};
    ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, sizes, x.data())));
    ASSERT_OK(method->Execute());
    const TensorView out = method->Output(0);
    ASSERT_EQ(out.device(), Device::Host());
    ASSERT_EQ(out.dtype(), DType::kFloat32);
    const std::vector<float> y(out.data_as<float>(), out.data_as<float>() + kRows * kCols);
    EXPECT_THAT(y, Pointwise(FloatEq(), Reference(x)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Targets, ExecuTorchDelegateRunTest,
    ::testing::Values(TargetCase{"cuda:0", Device::Sim(0)},
                      TargetCase{"cpu", Device::Host()}, TargetCase{std::nullopt, Device::Host()}),
    [](const ::testing::TestParamInfo<TargetCase>& info) {
      if (!info.param.target_device.has_value()) return std::string("Absent");
      return *info.param.target_device == "cpu" ? std::string("Cpu") : std::string("Cuda0");
    });

// ---------------------------------------------------------------------------------------------
// What the import copies: bytes the file shares are copied once; a file that would make it copy
// its bytes or its lists many times over is refused.

EtInstruction DelegateCall(std::vector<int32_t> args) {
  EtInstruction call;
  call.kind = EtInstructionKind::kDelegateCall;
  call.delegate_index = 0;
  call.args = std::move(args);
  return call;
}

// A program of method `m`, whose delegate 0 is kBackendId with `payload`.
EtProgram WithDelegate(EtMethod m, const std::vector<uint8_t>& payload) {
  EtDelegate d;
  d.backend_id = kBackendId;
  d.payload = payload;
  m.delegates = {d};
  EtProgram p;
  p.methods.push_back(std::move(m));
  return p;
}

// forward(x) = delegate(x, c) for each constant c in `constants` (one call each, results 1 + k
// after the constants), every constant viewing `bytes` at its offset: float32 [n] each.
EtProgram ConstantsProgram(const std::vector<uint8_t>& bytes, const std::vector<uint8_t>& payload,
                           int64_t n, const std::vector<size_t>& offsets) {
  EtMethod m;
  m.name = "forward";
  m.values = {FloatTensor({n})};
  for (size_t offset : offsets) {
    EtValue c = FloatTensor({n});
    c.tensor.data.kind = EtDataKind::kConstantBuffer;
    c.tensor.data.bytes = absl::MakeConstSpan(bytes).subspan(offset, n * sizeof(float));
    m.values.push_back(c);
  }
  for (size_t k = 0; k < offsets.size(); ++k) {
    m.values.push_back(FloatTensor({n}));
    m.instructions.push_back(DelegateCall(
        {0, static_cast<int32_t>(1 + k), static_cast<int32_t>(1 + offsets.size() + k)}));
    m.outputs.push_back(static_cast<int32_t>(1 + offsets.size() + k));
  }
  m.inputs = {0};
  return WithDelegate(std::move(m), payload);
}

TEST(ExecuTorchImportCopiesTest, ConstantsAndPayloadsTheFileSharesAreCopiedOnce) {
  const std::vector<uint8_t> bytes = FloatBytes({1, 2, 3, 4, 5, 6, 7, 8});
  const std::vector<uint8_t> payload(1000, 7);
  // Two constants viewing the same bytes, two calls of one delegate.
  ASSERT_OK_AND_ASSIGN(EtImport imported,
                       ImportExecuTorchProgram(ConstantsProgram(bytes, payload, 8, {0, 0})));
  const MethodDef& m = imported.methods[0];
  ASSERT_EQ(m.nodes.size(), 2u);
  const ValueDef& c0 = m.values[m.nodes[0].args[1]];
  const ValueDef& c1 = m.values[m.nodes[1].args[1]];
  EXPECT_EQ(c0.data.data(), c1.data.data());
  EXPECT_EQ(std::vector<uint8_t>(c1.data.begin(), c1.data.end()), bytes);
  EXPECT_EQ(m.nodes[0].delegate().payload.data(), m.nodes[1].delegate().payload.data());
  EXPECT_EQ(std::vector<uint8_t>(m.nodes[1].delegate().payload.begin(),
                                 m.nodes[1].delegate().payload.end()),
            payload);
  // One 64-byte slot for the constant, 1,024 bytes for the payload.
  EXPECT_EQ(imported.constant_bytes, 64u + 1024u);
  // Constants that overlap only in part are separate copies, each with its own bytes.
  ASSERT_OK_AND_ASSIGN(EtImport shifted,
                       ImportExecuTorchProgram(ConstantsProgram(bytes, payload, 4, {0, 8})));
  const MethodDef& s = shifted.methods[0];
  const ValueDef& d1 = s.values[s.nodes[1].args[1]];
  EXPECT_EQ(std::vector<uint8_t>(d1.data.begin(), d1.data.end()),
            std::vector<uint8_t>(bytes.begin() + 8, bytes.begin() + 24));
}

TEST(ExecuTorchImportCopiesTest, ConstantsOverlappingInPartAreRefusedBeforeTheyAreCopied) {
  // Four 1 MiB constants 64 bytes apart: 4 MiB of copies (and 64 bytes of payload) from 1 MiB of
  // bytes.
  const int64_t n = 1 << 18;
  const std::vector<uint8_t> bytes(n * sizeof(float) + 256, 1);
  const std::vector<uint8_t> payload = {1, 2, 3, 4};
  EXPECT_THAT(ImportMethodStatus(ConstantsProgram(bytes, payload, n, {0, 64, 128, 192})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("would take 4194368 bytes once copied"),
                             HasSubstr("they overlap in the file"))));
  // Two of them fit in twice what they span.
  EXPECT_OK(ImportExecuTorchProgram(ConstantsProgram(bytes, payload, n, {0, 64})).status());
}

TEST(ExecuTorchImportCopiesTest, AConstantCastTwiceIsFoldedOnce) {
  // forward() = (float(c), float(c)) for an int64 constant c [2], by two _to_dim_order_copy calls.
  const std::vector<int64_t> c = {3, -5};
  const std::vector<uint8_t> c_bytes(reinterpret_cast<const uint8_t*>(c.data()),
                                     reinterpret_cast<const uint8_t*>(c.data() + 2));
  EtMethod m;
  m.name = "forward";
  EtValue constant = FloatTensor({2});
  constant.tensor.scalar_type = 4;  // Long
  constant.tensor.dtype = DType::kInt64;
  constant.tensor.element_size = 8;
  constant.tensor.byte_size = 16;
  constant.tensor.data.kind = EtDataKind::kConstantBuffer;
  constant.tensor.data.bytes = c_bytes;
  EtValue non_blocking;
  non_blocking.kind = EtValueKind::kBool;
  EtValue none;
  none.kind = EtValueKind::kNull;
  m.values = {constant, non_blocking, none, FloatTensor({2}), FloatTensor({2})};
  m.operators = {{"dim_order_ops::_to_dim_order_copy", "out"}};
  m.instructions = {testing::KernelCall(0, {0, 1, 2, 3, 3}),
                    testing::KernelCall(0, {0, 1, 2, 4, 4})};
  m.outputs = {3, 4};
  EtProgram p;
  p.methods.push_back(std::move(m));
  ASSERT_OK_AND_ASSIGN(EtImport imported, ImportExecuTorchProgram(p));
  const MethodDef& def = imported.methods[0];
  ASSERT_EQ(def.outputs.size(), 2u);
  const ValueDef& first = def.values[def.outputs[0]];
  const ValueDef& second = def.values[def.outputs[1]];
  EXPECT_EQ(first.kind, ValueKind::kConstant);
  EXPECT_EQ(second.kind, ValueKind::kConstant);
  EXPECT_EQ(first.data.data(), second.data.data());
  const std::vector<float> expected = {3.0f, -5.0f};
  ASSERT_EQ(second.data.size(), sizeof(float) * 2);
  std::vector<float> got(2);
  std::memcpy(got.data(), second.data.data(), second.data.size());
  EXPECT_EQ(got, expected);
  EXPECT_EQ(imported.constant_bytes, 64u);
}

// forward(x): `calls` delegate calls, each passing x and one int list of `items` items.
EtProgram ListProgram(const std::vector<uint8_t>& payload, int calls, int items) {
  EtMethod m;
  m.name = "forward";
  EtValue list;
  list.kind = EtValueKind::kIntList;
  list.items.assign(items, 1);
  m.values = {FloatTensor({2}), Int(3), list};
  for (int k = 0; k < calls; ++k) {
    m.values.push_back(FloatTensor({2}));
    m.instructions.push_back(DelegateCall({0, 2, 3 + k}));
  }
  m.inputs = {0};
  m.outputs = {3};
  return WithDelegate(std::move(m), payload);
}

TEST(ExecuTorchImportCopiesTest, AListEveryInstructionCopiesIsRefusedBeforeItIsCopiedEachTime) {
  const std::vector<uint8_t> payload = {1, 2, 3, 4};
  // Twice is what a program may need; each call's copy is a scalar argument of its node.
  ASSERT_OK_AND_ASSIGN(EtImport twice, ImportExecuTorchProgram(ListProgram(payload, 2, 10000)));
  const MethodDef& m = twice.methods[0];
  ASSERT_EQ(m.nodes.size(), 2u);
  EXPECT_EQ(m.values[m.nodes[1].args[1]].scalar.list.size(), 10000u);
  // 1,000 calls of a 10,000-item list would copy 10 million items; the fifth copy goes over
  // twice the method's list items plus 16 per instruction and 4,096.
  EXPECT_THAT(ImportMethodStatus(ListProgram(payload, 1000, 10000)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("instruction 4"), HasSubstr("value 2 has 10000 items"),
                             HasSubstr("use its lists more often than a program needs"))));
}

TEST(ExecuTorchImportCopiesTest, ADelegateWithLargeSpecsCalledByEveryInstructionIsRefused) {
  const std::vector<uint8_t> payload = {1, 2, 3, 4};
  auto with_specs = [&](int calls) {
    EtProgram p = ListProgram(payload, calls, 2);
    p.methods[0].delegates[0].compile_specs.emplace_back("blob", std::string(100000, 'x'));
    return p;
  };
  // A few calls copy the specs into each node.
  ASSERT_OK_AND_ASSIGN(EtImport few, ImportExecuTorchProgram(with_specs(3)));
  ASSERT_EQ(few.methods[0].nodes.size(), 3u);
  EXPECT_EQ(few.methods[0].nodes[2].CompileSpec("blob")->size(), 100000u);
  // 1,000 calls would copy 100 MB of specs.
  EXPECT_THAT(ImportMethodStatus(with_specs(1000)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("delegate call to backend"),
                             HasSubstr("delegate 0 (100038 bytes of backend id and compile specs"),
                             HasSubstr("call its delegates more often than a program needs"))));
}

}  // namespace
}  // namespace ferry
