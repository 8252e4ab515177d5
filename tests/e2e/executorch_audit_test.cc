// The exporter's placement audited against Ferry's (loader/plan/exporter_audit.h): programs written
// as .pte files with the exporter's copies (et_copy::_h2d_copy.out, _d2h_copy.out), device
// annotations and delegates on cuda:0 and cpu. Each test states which copies Ferry's rules
// (docs/placement.md) make for its program and checks that the audit reports exactly the
// differences with the exporter's, then runs the program with the sim guard on against the
// all-host computation.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/plan/exporter_audit.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/cli/commands.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/et_program_parts.h"
#include "tests/testing/ptd_builder.h"
#include "tests/testing/pte_writer.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::FloatTensor;
using ::ferry::testing::Int;
using ::ferry::testing::KernelCall;
using ::ferry::testing::RenamedBackend;
using ::ferry::testing::FloatBytes;
using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pointwise;
using Kind = AuditFinding::Kind;

constexpr char kBackendId[] = "FerryGraphBackend";
constexpr int64_t kRows = 2, kCols = 3;
const std::vector<float> kWeight = {1.0f, -2.0f, 0.5f, 4.0f, -0.25f, 3.0f};

EtValue OnCuda0(EtValue v) {
  v.tensor.device_type = 1;
  v.tensor.device_index = 0;
  return v;
}
EtInstruction DelegateCall(std::vector<int32_t> args) {
  EtInstruction i;
  i.kind = EtInstructionKind::kDelegateCall;
  i.delegate_index = 0;
  i.args = std::move(args);
  return i;
}

// Operators, by index.
constexpr int32_t kH2d = 0, kD2h = 1, kAdd = 2;
std::vector<EtOperator> Operators() {
  return {{"et_copy::_h2d_copy", "out"}, {"et_copy::_d2h_copy", "out"}, {"aten::add", "out"}};
}

// A graph payload: main(a [, b]) = a + b, or a + a with one input.
std::vector<uint8_t> AddPayload(int inputs) {
  ProgramBuilder pb;
  MethodBuilder& g = pb.AddMethod("main");
  const ValueId a = g.Input("a", DType::kFloat32, {kRows, kCols});
  const ValueId b = inputs == 2 ? g.Input("b", DType::kFloat32, {kRows, kCols}) : a;
  g.Output(g.Op("add", {a, b}));
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *std::move(bytes) : std::vector<uint8_t>{};
}

struct Storage {
  std::vector<uint8_t> weight = FloatBytes(kWeight);
  std::vector<uint8_t> payload;
};

EtProgram OneMethod(std::vector<EtValue> values, std::vector<int32_t> outputs,
                    std::vector<EtInstruction> instructions) {
  EtProgram p;
  EtMethod m;
  m.name = "forward";
  m.values = std::move(values);
  m.inputs = {0};
  m.outputs = std::move(outputs);
  m.operators = Operators();
  m.instructions = std::move(instructions);
  p.methods.push_back(std::move(m));
  return p;
}

void AddDelegate(EtProgram& p, const Storage& storage, std::optional<std::string> target) {
  EtDelegate d;
  d.backend_id = kBackendId;
  if (target.has_value()) d.compile_specs.emplace_back("target_device", *target);
  d.payload = storage.payload;
  p.methods[0].delegates = {d};
}

// The exporter's device program: x on the host, copied to the device (instruction 0), the delegate
// r = xd + w (instruction 1, w a constant it reads as the exporter left it: host memory), r copied
// back (instruction 2), y = rh + rh on the host (instruction 3).
//   values: 0 x, 1 xd, 2 r (annotated cuda:0), 3 rh, 4 alpha, 5 y, 6 w
EtProgram CopiedAroundADelegate(Storage& storage, std::optional<std::string> target) {
  storage.payload = AddPayload(2);
  EtValue w = FloatTensor({kRows, kCols});
  w.tensor.data.kind = EtDataKind::kConstantBuffer;
  w.tensor.data.bytes = storage.weight;
  EtProgram p = OneMethod(
      {FloatTensor({kRows, kCols}), OnCuda0(FloatTensor({kRows, kCols})), OnCuda0(FloatTensor({kRows, kCols})), FloatTensor({kRows, kCols}), Int(1),
       FloatTensor({kRows, kCols}), w},
      {5},
      {KernelCall(kH2d, {0, 1, 1}), DelegateCall({1, 6, 2}), KernelCall(kD2h, {2, 3, 3}),
       KernelCall(kAdd, {3, 3, 4, 5, 5})});
  AddDelegate(p, storage, std::move(target));
  return p;
}

// `v` planned by the exporter at `offset` of its arena `memory_id`.
EtValue Planned(EtValue v, uint32_t memory_id, uint64_t offset) {
  v.tensor.allocation = EtAllocation{memory_id, offset};
  return v;
}

// CopiedAroundADelegate with the exporter's memory plan: x, rh and y in arena 1 (no device entry:
// the CPU), xd and r in arena 2, which the exporter puts on cuda:0 unless `arena_2_on_cuda` is
// false. Every tensor is 24 bytes.
EtProgram CopiedAroundADelegateWithArenas(Storage& storage, bool arena_2_on_cuda) {
  EtProgram p = CopiedAroundADelegate(storage, "cuda:0");
  EtMethod& m = p.methods[0];
  m.values[0] = Planned(m.values[0], 1, 0);
  m.values[1] = Planned(m.values[1], 2, 0);
  m.values[2] = Planned(m.values[2], 2, 24);
  m.values[3] = Planned(m.values[3], 1, 24);
  m.values[5] = Planned(m.values[5], 1, 48);
  m.non_const_buffer_sizes = {0, 72, 48};
  if (arena_2_on_cuda) m.non_const_buffer_devices = {{2, 1, 0}};
  return p;
}

struct Loaded {
  std::unique_ptr<Program> program;
  std::unique_ptr<Method> method;
  std::vector<AuditFinding> findings;
};

// Loads `p` from its file with the backend registered, and audits it.
void Load(const EtProgram& p, Runtime& rt, Loaded& out) {
  absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(testing::WritePte(p));
  ASSERT_TRUE(program.ok()) << program.status();
  out.program = *std::move(program);
  if (rt.FindBackend(kBackendId) == nullptr) {
    ASSERT_OK(rt.RegisterBackend(std::make_unique<RenamedBackend>(kBackendId, MakeGraphBackend())));
  }
  absl::StatusOr<std::unique_ptr<Method>> method = rt.LoadMethod(*out.program, "forward");
  ASSERT_TRUE(method.ok()) << method.status();
  out.method = *std::move(method);
  out.findings = AuditExporterPlacement(out.method->def(), out.method->plan().placement,
                                        rt.default_device_map());
}

// The value a finding names, by its name in the imported method.
std::string NameOf(const Loaded& l, const AuditFinding& f) {
  return f.value >= 0 ? l.method->def().values[f.value].name : "";
}

std::vector<float> RunOnce(Method& method, std::vector<float> x) {
  const int64_t sizes[] = {kRows, kCols};
  EXPECT_OK(method.SetInput(0, TensorView::Host(DType::kFloat32, sizes, x.data())));
  EXPECT_OK(method.Execute());
  const TensorView out = method.Output(0);
  EXPECT_EQ(out.device(), Device::Host());
  return std::vector<float>(out.data_as<float>(), out.data_as<float>() + kRows * kCols);
}

// A finding of `kind` at the exporter's `instruction`, naming the value `value`.
void ExpectFinding(const Loaded& l, const AuditFinding& f, Kind kind, int32_t instruction,
                   const std::string& value) {
  EXPECT_EQ(f.kind, kind);
  EXPECT_EQ(f.instruction, instruction);
  EXPECT_EQ(NameOf(l, f), value);
}

const std::vector<float> kX = {0.5f, 1.5f, -2.0f, 3.0f, 0.0f, -1.0f};

TEST(ExporterAuditTest, ACudaDelegateNeedsTheExportersCopiesAndItsConstantOnTheDevice) {
  // Ferry's rules for the delegate on cuda:0 (sim:0): x is read there (a per-call h2d copy, the
  // exporter's instruction 0), r is read by the host add (a d2h copy, instruction 2), and the
  // constant w is read there too: Ferry copies it once at load, the exporter copied nothing.
  Storage storage;
  Runtime rt;
  Loaded l;
  Load(CopiedAroundADelegate(storage, "cuda:0"), rt, l);
  ASSERT_NE(l.method, nullptr);
  const MethodDef& m = l.method->def();
  ASSERT_EQ(m.exporter_copies.size(), 2u);
  EXPECT_EQ(m.exporter_copies[0].instruction, 0);
  EXPECT_TRUE(m.exporter_copies[0].to_device);
  EXPECT_EQ(m.exporter_copies[1].instruction, 2);
  EXPECT_FALSE(m.exporter_copies[1].to_device);
  // The copies are not nodes: the delegate and the add remain, from instructions 1 and 3.
  EXPECT_THAT(m.node_instructions, ElementsAre(1, 3));
  ASSERT_EQ(l.findings.size(), 1u);
  ExpectFinding(l, l.findings[0], Kind::kHostConstantToDevice, 1, "value 6");
  EXPECT_THAT(l.findings[0].message, HasSubstr("method \"forward\", instruction 1: "));
  std::vector<float> expected(kX.size());
  for (size_t i = 0; i < kX.size(); ++i) expected[i] = 2 * (kX[i] + kWeight[i]);
  EXPECT_THAT(RunOnce(*l.method, kX), Pointwise(FloatEq(), expected));
}

TEST(ExporterAuditTest, CopiesAroundACpuDelegateAreReported) {
  // The delegate's target is the host: Ferry copies nothing, so both of the exporter's copies
  // are copies around a cpu delegate.
  Storage storage;
  Runtime rt;
  Loaded l;
  Load(CopiedAroundADelegate(storage, "cpu"), rt, l);
  ASSERT_NE(l.method, nullptr);
  EXPECT_EQ(l.method->plan().placement.per_call_copies(), 0);
  ASSERT_EQ(l.findings.size(), 2u);
  ExpectFinding(l, l.findings[0], Kind::kCopyAroundHostDelegate, 0, "input 0");
  ExpectFinding(l, l.findings[1], Kind::kCopyAroundHostDelegate, 2, "value 2");
  for (const AuditFinding& f : l.findings) {
    EXPECT_THAT(f.message, HasSubstr(absl::StrCat("method \"forward\", instruction ",
                                                  f.instruction, ": ")));
  }
  std::vector<float> expected(kX.size());
  for (size_t i = 0; i < kX.size(); ++i) expected[i] = 2 * (kX[i] + kWeight[i]);
  EXPECT_THAT(RunOnce(*l.method, kX), Pointwise(FloatEq(), expected));
}

TEST(ExporterAuditTest, CopiesTheExporterLeftOutAreReported) {
  // No exporter copies: r = delegate(x) on cuda:0 (instruction 0), y = r + r on the host
  // (instruction 1). Ferry copies x to the device for the delegate (a missing copy, at the
  // delegate's instruction) and r, the delegate's only result, back for the add.
  Storage storage;
  storage.payload = AddPayload(1);
  EtProgram p = OneMethod({FloatTensor({kRows, kCols}), FloatTensor({kRows, kCols}), Int(1), FloatTensor({kRows, kCols})}, {3},
                          {DelegateCall({0, 1}), KernelCall(kAdd, {1, 1, 2, 3, 3})});
  AddDelegate(p, storage, "cuda:0");
  Runtime rt;
  Loaded l;
  Load(p, rt, l);
  ASSERT_NE(l.method, nullptr);
  ASSERT_EQ(l.findings.size(), 2u);
  ExpectFinding(l, l.findings[0], Kind::kMissingCopy, 0, "input 0");
  ExpectFinding(l, l.findings[1], Kind::kMissingResultCopy, 0, "value 1");
  std::vector<float> expected(kX.size());
  for (size_t i = 0; i < kX.size(); ++i) expected[i] = 4 * kX[i];
  EXPECT_THAT(RunOnce(*l.method, kX), Pointwise(FloatEq(), expected));
}

TEST(ExporterAuditTest, AnUnneededCopyAndAnAnnotationReadElsewhereAreReported) {
  // x (annotated cuda:0) copied to the device (instruction 0), then y = xd + xd on the host
  // (instruction 1): nothing runs on a device, so Ferry does not copy. The annotation is not
  // checked for a value the exporter copies: its readers may read the copy.
  EtProgram p =
      OneMethod({OnCuda0(FloatTensor({kRows, kCols})), FloatTensor({kRows, kCols}), Int(1), FloatTensor({kRows, kCols}), FloatTensor({kRows, kCols})},
                {3}, {KernelCall(kH2d, {0, 1, 1}), KernelCall(kAdd, {1, 1, 2, 3, 3})});
  Runtime rt;
  Loaded l;
  Load(p, rt, l);
  ASSERT_NE(l.method, nullptr);
  ASSERT_EQ(l.findings.size(), 1u);
  ExpectFinding(l, l.findings[0], Kind::kUnneededCopy, 0, "input 0");

  // Without the copy, the annotation itself is the finding: x is read by the add on the host.
  EtProgram q = OneMethod({OnCuda0(FloatTensor({kRows, kCols})), Int(1), FloatTensor({kRows, kCols})}, {2},
                          {KernelCall(kAdd, {0, 0, 1, 2, 2})});
  Loaded k;
  Load(q, rt, k);
  ASSERT_NE(k.method, nullptr);
  ASSERT_EQ(k.findings.size(), 1u);
  ExpectFinding(k, k.findings[0], Kind::kDeviceMismatch, 0, "input 0");
  EXPECT_THAT(k.findings[0].message, HasSubstr("annotated on cuda:0 (as sim:0)"));
  EXPECT_THAT(k.findings[0].message, HasSubstr("on host"));
}

// Checks a finding's kind, its exporter's instruction and the name of its value.
std::vector<AuditFinding> OfKind(const std::vector<AuditFinding>& findings, Kind kind) {
  std::vector<AuditFinding> out;
  for (const AuditFinding& f : findings) {
    if (f.kind == kind) out.push_back(f);
  }
  return out;
}

TEST(ExporterAuditTest, AHostValueInAnArenaOnADeviceIsReported) {
  // y = x + x (instruction 0) runs on the host, so Ferry keeps y there; the exporter planned y in
  // arena 2, which it put on cuda:0. x is in arena 1, which has no device entry: the CPU, where
  // Ferry has it too.
  EtProgram p = OneMethod({Planned(FloatTensor({kRows, kCols}), 1, 0), Int(1),
                           Planned(FloatTensor({kRows, kCols}), 2, 0)},
                          {2}, {KernelCall(kAdd, {0, 0, 1, 2, 2})});
  p.methods[0].non_const_buffer_sizes = {0, 24, 24};
  p.methods[0].non_const_buffer_devices = {{2, 1, 0}};
  Runtime rt;
  Loaded l;
  Load(p, rt, l);
  ASSERT_NE(l.method, nullptr);
  ASSERT_EQ(l.findings.size(), 1u);
  ExpectFinding(l, l.findings[0], Kind::kArenaDeviceMismatch, 0, "value 2");
  EXPECT_THAT(l.findings[0].message,
              HasSubstr("method \"forward\", instruction 0: value \"value 2\" is planned in the "
                        "exporter's arena 2 on cuda:0"));
  EXPECT_THAT(l.findings[0].message, HasSubstr("but Ferry places it on host"));
  std::vector<float> expected(kX.size());
  for (size_t i = 0; i < kX.size(); ++i) expected[i] = 2 * kX[i];
  EXPECT_THAT(RunOnce(*l.method, kX), Pointwise(FloatEq(), expected));

  // The input's arena on cuda:0 too: the caller supplies x on the host (no instruction writes
  // it), one more finding.
  p.methods[0].non_const_buffer_devices = {{1, 1, 0}, {2, 1, 0}};
  Loaded k;
  Load(p, rt, k);
  ASSERT_NE(k.method, nullptr);
  const std::vector<AuditFinding> arenas = OfKind(k.findings, Kind::kArenaDeviceMismatch);
  ASSERT_EQ(arenas.size(), 2u);
  ExpectFinding(k, arenas[0], Kind::kArenaDeviceMismatch, -1, "input 0");
  EXPECT_THAT(arenas[0].message,
              HasSubstr("method \"forward\": value \"input 0\" (method input 0) is planned in "
                        "the exporter's arena 1 on cuda:0"));
  ExpectFinding(k, arenas[1], Kind::kArenaDeviceMismatch, 0, "value 2");
}

TEST(ExporterAuditTest, ADelegateResultInAnArenaOnItsDeviceIsNotReported) {
  // r, the result of the delegate on cuda:0 (sim:0 without a GPU), is where the exporter planned
  // it: arena 2 on cuda:0, compared after the device map. x, rh and y are on the host in arena
  // 1, as Ferry has them. The one finding is the constant's, as without a memory plan.
  Storage storage;
  Runtime rt;
  Loaded l;
  Load(CopiedAroundADelegateWithArenas(storage, /*arena_2_on_cuda=*/true), rt, l);
  ASSERT_NE(l.method, nullptr);
  ASSERT_EQ(l.findings.size(), 1u);
  EXPECT_EQ(l.findings[0].kind, Kind::kHostConstantToDevice);
  std::vector<float> expected(kX.size());
  for (size_t i = 0; i < kX.size(); ++i) expected[i] = 2 * (kX[i] + kWeight[i]);
  EXPECT_THAT(RunOnce(*l.method, kX), Pointwise(FloatEq(), expected));

  // Arena 2 without its device entry is on the CPU: r, on the delegate's device, is reported
  // at the delegate's instruction. xd is the result of the exporter's copy, not a value of
  // Ferry's, so its arena is not checked.
  Loaded k;
  Load(CopiedAroundADelegateWithArenas(storage, /*arena_2_on_cuda=*/false), rt, k);
  ASSERT_NE(k.method, nullptr);
  const std::vector<AuditFinding> arenas = OfKind(k.findings, Kind::kArenaDeviceMismatch);
  ASSERT_EQ(arenas.size(), 1u);
  ExpectFinding(k, arenas[0], Kind::kArenaDeviceMismatch, 1, "value 2");
  const std::string r_device = k.method->plan().placement.nodes[0].device.ToString();
  EXPECT_THAT(arenas[0].message,
              HasSubstr(absl::StrCat("instruction 1: value \"value 2\" is planned in the "
                                     "exporter's arena 2 on host, but Ferry places it on ",
                                     r_device)));
  EXPECT_NE(r_device, "host");
}

TEST(ExporterAuditTest, AProgramWithAMalformedArenaDeviceIsRefused) {
  Storage storage;
  EtProgram p = CopiedAroundADelegateWithArenas(storage, true);
  p.methods[0].non_const_buffer_devices = {{2, 1, 0}, {2, 1, 1}};
  absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(testing::WritePte(p));
  EXPECT_THAT(program.status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("method \"forward\", non_const_buffer_device entry 1: "
                                          "buffer 2 already has a device (entry 0)")));
  p.methods[0].non_const_buffer_devices = {{3, 1, 0}};
  program = Program::FromBytes(testing::WritePte(p));
  EXPECT_THAT(program.status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("entry 0: it names buffer 3, but the method has buffers "
                                          "1..2")));
}

// A tensor's own device annotation (ExtraTensorInfo) is checked like an arena's: an unknown device
// type or a negative index is refused, naming the value, never dropped.
TEST(ExporterAuditTest, AProgramWithAMalformedTensorDeviceIsRefused) {
  Storage storage;
  for (const auto& [type, index, message] :
       std::vector<std::tuple<int8_t, int8_t, std::string>>{
           {2, 0, "the tensor has device type 2, which is not one of 0 CPU, 1 CUDA"},
           {1, -1, "the tensor has device index -1; an index is non-negative"}}) {
    EtProgram p = CopiedAroundADelegate(storage, "cuda:0");
    p.methods[0].values[0].tensor.device_type = type;
    p.methods[0].values[0].tensor.device_index = index;
    absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(testing::WritePte(p));
    EXPECT_THAT(program.status(),
                testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("method \"forward\", value 0")))
        << program.status();
    EXPECT_THAT(program.status().message(), HasSubstr(message));
    // The same tensor annotated on cuda:0 reads.
    p.methods[0].values[0].tensor.device_type = 1;
    p.methods[0].values[0].tensor.device_index = 0;
    EXPECT_OK(Program::FromBytes(testing::WritePte(p)).status());
  }
}

// `ferry plan --audit` of `p`, written to a temporary file.
testing::CliResult PlanAudit(const EtProgram& p) {
  const std::vector<uint8_t> bytes = testing::WritePte(p);
  const std::string path =
      (std::filesystem::temp_directory_path() / absl::StrCat("audit_", getpid(), ".pte")).string();
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  cli::Options o;
  o.command = "plan";
  o.program = path;
  o.audit = true;
  o.calls = 1;
  o.warmup = 0;
  testing::CliResult r = testing::RunCli(o);
  std::filesystem::remove(path);
  return r;
}

TEST(ExporterAuditTest, PlanAuditPrintsOneLinePerFinding) {
  Storage storage;
  const testing::CliResult r = PlanAudit(CopiedAroundADelegate(storage, "cuda:0"));
  EXPECT_EQ(r.code, cli::kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("audit: 1 difference between the exporter's placement and "
                              "Ferry's\n  host constant to a device delegate: method \"forward\", "
                              "instruction 1: the constant value \"value 6\""));
}

TEST(ExporterAuditTest, PlanShowsEachExporterArenasDeviceAndAuditsIt) {
  Storage storage;
  const testing::CliResult r = PlanAudit(CopiedAroundADelegateWithArenas(storage, false));
  EXPECT_EQ(r.code, cli::kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  buffer 1   on host           72 B declared"));
  EXPECT_THAT(r.out, HasSubstr("  buffer 2   on host           48 B declared"));
  EXPECT_THAT(r.out, HasSubstr("audit: 2 differences"));
  EXPECT_THAT(r.out, HasSubstr("\n  arena device mismatch: method \"forward\", instruction 1: "
                               "value \"value 2\" is planned in the exporter's arena 2 on host"));

  const testing::CliResult on_cuda = PlanAudit(CopiedAroundADelegateWithArenas(storage, true));
  EXPECT_EQ(on_cuda.code, cli::kExitOk) << on_cuda.err;
  EXPECT_THAT(on_cuda.out, HasSubstr("  buffer 1   on host           72 B declared"));
  EXPECT_THAT(on_cuda.out, HasSubstr("  buffer 2   on cuda:0         48 B declared"));
  EXPECT_THAT(on_cuda.out, HasSubstr("audit: 1 difference "));
  EXPECT_THAT(on_cuda.out, Not(HasSubstr("arena device mismatch")));
}

}  // namespace
}  // namespace ferry
