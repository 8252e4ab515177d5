// ExecuTorch programs through Program::Load, Runtime::LoadMethod and Execute: the real programs in
// ../shared/pte that have portable ops only run, with outputs computed here from the inputs and
// from constants read off the file by the reader; the others are refused with messages naming the
// op, the backend or the external weights. The CLI plans and runs them, and a hand-made program
// with bool and int32 inputs and outputs (tests/testing/pte_writer.h).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/cli/commands.h"
#include "ferry/runtime/runtime.h"
#include "ferry/runtime/verify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/bundle_builder.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/et_program_parts.h"
#include "tests/testing/json_check.h"
#include "tests/testing/ptd_builder.h"
#include "tests/testing/pte_writer.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::Bool;
using ::ferry::testing::BoolTensor;
using ::ferry::testing::BuildPtd;
using ::ferry::testing::CliResult;
using ::ferry::testing::FloatBytes;
using ::ferry::testing::FloatTensor;
using ::ferry::testing::Int;
using ::ferry::testing::Int32Tensor;
using ::ferry::testing::IsOkAndHolds;
using ::ferry::testing::KernelCall;
using ::ferry::testing::MethodStatus;
using ::ferry::testing::OneMethod;
using ::ferry::testing::RunCli;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::filesystem::path kPteDir = std::filesystem::path(FERRY_SHARED_DIR) / "pte";

#define SKIP_WITHOUT_REAL_PROGRAMS()                                                      \
  if (!std::filesystem::is_directory(kPteDir)) {                                          \
    GTEST_SKIP() << "no real ExecuTorch programs: " << kPteDir.string()                   \
                 << " is absent (it is shared between checkouts, beside the repository)"; \
  }

std::string PtePath(const std::string& name) { return (kPteDir / name).string(); }

constexpr char kLinearPte[] = "executorch__extension_module_test_resources_linear.pte";
constexpr char kLinearPtd[] = "executorch__extension_module_test_resources_linear.ptd";

std::vector<uint8_t> ReadPte(const std::string& name) {
  std::ifstream in(PtePath(name), std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<float> Floats(absl::Span<const uint8_t> bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// Runs `method` of `program` once on float32 inputs and returns its output 0.
absl::StatusOr<std::vector<float>> RunFloat(const Program& program, const std::string& method,
                                            std::vector<std::vector<float>>& inputs) {
  Runtime rt;
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Method> m, rt.LoadMethod(program, method));
  FERRY_ASSIGN_OR_RETURN(const MethodDef* def, program.method(method));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& meta = def->values[def->inputs[i]].meta;
    FERRY_RETURN_IF_ERROR(m->SetInput(
        i, TensorView::Host(DType::kFloat32, absl::MakeConstSpan(meta.sizes), inputs[i].data())));
  }
  FERRY_RETURN_IF_ERROR(m->Execute());
  const TensorView out = m->Output(0);
  EXPECT_EQ(out.dtype(), DType::kFloat32);
  const float* data = out.data_as<float>();
  return std::vector<float>(data, data + TensorRef::Contiguous(out.dtype(), out.sizes()).numel());
}

TEST(ExecuTorchProgramTest, AddRuns) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Program> program,
      Program::Load(PtePath("executorch__extension_module_test_resources_add.pte")));
  EXPECT_THAT(program->method_names(), ElementsAre("forward"));
  const float a = 2.5f, b = -0.75f;
  std::vector<std::vector<float>> inputs = {{a}, {b}};
  ASSERT_OK_AND_ASSIGN(std::vector<float> out, RunFloat(*program, "forward", inputs));
  EXPECT_THAT(out, ElementsAre(a + b));
}

TEST(ExecuTorchProgramTest, LegacyConstantsRunAndAreAligned) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::string name = "test_models_deprecated_ModuleLinear-no-constant-segment.pte";
  // The constants, read by the reader: forward(x) = a * x + b (mul, then add with alpha 1).
  const std::vector<uint8_t> bytes = ReadPte(name);
  ASSERT_OK_AND_ASSIGN(EtProgram et, ReadExecuTorchProgram(bytes));
  const std::vector<float> a = Floats(et.methods[0].values[0].tensor.data.bytes);
  const std::vector<float> b = Floats(et.methods[0].values[1].tensor.data.bytes);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::Load(PtePath(name)));
  ASSERT_OK_AND_ASSIGN(const MethodDef* def, program->method("forward"));
  int constants = 0;
  for (const ValueDef& v : def->values) {
    if (v.kind != ValueKind::kConstant) continue;
    ++constants;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data.data()) % 64, 0u) << v.name;
    EXPECT_EQ(v.data.size(), 16u) << v.name;
  }
  EXPECT_EQ(constants, 2);

  std::vector<std::vector<float>> inputs = {{1.5f, -2.0f, 0.25f, 10.0f}};
  ASSERT_OK_AND_ASSIGN(std::vector<float> out, RunFloat(*program, "forward", inputs));
  ASSERT_EQ(out.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out[i], a[i] * inputs[0][i] + b[i]) << i;
}

TEST(ExecuTorchProgramTest, TwoMethodsWithACastConstantRun) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::string name = "corey-cole__tests_models_multi.pte";
  // Both methods add an int64 constant, cast to float32 by _to_dim_order_copy, to the input.
  const std::vector<uint8_t> bytes = ReadPte(name);
  ASSERT_OK_AND_ASSIGN(EtProgram et, ReadExecuTorchProgram(bytes));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::Load(PtePath(name)));
  EXPECT_THAT(program->method_names(), ElementsAre("double", "forward"));
  for (const std::string method : {"double", "forward"}) {
    SCOPED_TRACE(method);
    int64_t constant = 0;
    const EtTensor& c = et.method(method)->values[0].tensor;
    ASSERT_EQ(c.data.bytes.size(), sizeof(constant));
    std::memcpy(&constant, c.data.bytes.data(), sizeof(constant));
    std::vector<std::vector<float>> inputs = {{3.0f, -4.5f}};
    ASSERT_OK_AND_ASSIGN(std::vector<float> out, RunFloat(*program, method, inputs));
    EXPECT_THAT(out, ElementsAre(3.0f + static_cast<float>(constant),
                                 -4.5f + static_cast<float>(constant)));
  }
}

TEST(ExecuTorchProgramTest, UnsupportedProgramsAreRefusedNamingWhy) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  EXPECT_THAT(MethodStatus(Program::Load(PtePath("corey-cole__tests_models_lstm_lstm.pte"))),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("method \"forward\", instruction 0 (etnp::lstm.out): op "
                                 "\"etnp::lstm.out\" is not supported")));
  EXPECT_THAT(
      MethodStatus(Program::Load(PtePath("examples_arduino_examples_KeywordSpotting_model.pte"))),
      StatusIs(absl::StatusCode::kUnimplemented,
               AllOf(HasSubstr("instruction 0 (cortex_m::quantize_per_tensor.out): op "
                               "\"cortex_m::quantize_per_tensor.out\" is not supported"),
                     // Every other unsupported op at once, with its first instruction.
                     HasSubstr("; 6 more unsupported ops: "
                               "cortex_m::quantized_depthwise_conv2d.out (instruction 1, "
                               "5 calls), cortex_m::quantized_conv2d.out (instruction 4, "
                               "4 calls), cortex_m::pad.out (instruction 12)"))));
  // External weights without their data file.
  EXPECT_THAT(MethodStatus(Program::Load(PtePath("executorch__extension_module_test_resources_linear.pte"))),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("instruction 0 (aten::permute_copy.out): value 0 "
                                       "(\"linear.weight\")"),
                             HasSubstr("external data file (.ptd), and none was given"))));
}

// linear.pte's weights, read by the test itself from linear.ptd at the file offsets an `xxd`
// dump shows (segment data from 0x110: the weight [3, 3] at 0, the bias [3] at 48).
struct LinearWeights {
  std::vector<float> weight;  // [out, in], row-major
  std::vector<float> bias;
};
LinearWeights ReadLinearWeights() {
  const std::vector<uint8_t> ptd = ReadPte(kLinearPtd);
  LinearWeights w;
  w.weight = Floats(absl::MakeConstSpan(ptd).subspan(0x110, 9 * sizeof(float)));
  w.bias = Floats(absl::MakeConstSpan(ptd).subspan(0x140, 3 * sizeof(float)));
  return w;
}

// y = x W^T + b for x [3, 3], computed naively in double.
std::vector<float> Linear(const std::vector<float>& x, const LinearWeights& w) {
  std::vector<float> y(9);
  for (int i = 0; i < 3; ++i) {
    for (int o = 0; o < 3; ++o) {
      double sum = w.bias[o];
      for (int k = 0; k < 3; ++k) sum += double{x[i * 3 + k]} * w.weight[o * 3 + k];
      y[i * 3 + o] = static_cast<float>(sum);
    }
  }
  return y;
}

TEST(ExecuTorchProgramTest, LinearRunsWithItsDataFile) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const LinearWeights w = ReadLinearWeights();
  ASSERT_EQ(w.weight.size(), 9u);
  ProgramLoadOptions options;
  options.data_path = PtePath(kLinearPtd);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::Load(PtePath(kLinearPte), options));
  ASSERT_OK_AND_ASSIGN(const MethodDef* def, program->method("forward"));
  int constants = 0;
  for (const ValueDef& v : def->values) {
    if (v.kind != ValueKind::kConstant) continue;
    ++constants;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data.data()) % 64, 0u) << v.name;
  }
  EXPECT_EQ(constants, 2);
  std::vector<std::vector<float>> inputs = {{0.5f, -1.0f, 2.0f, 3.0f, 0.25f, -0.5f, 1.0f, 1.0f,
                                             -2.0f}};
  const std::vector<float> expected = Linear(inputs[0], w);
  ASSERT_OK_AND_ASSIGN(std::vector<float> out, RunFloat(*program, "forward", inputs));
  ASSERT_EQ(out.size(), 9u);
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(out[i], expected[i], 1e-5f) << i;

  // The same through FromBytes, with the data file's bytes.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> from_bytes,
                       Program::FromBytes(ReadPte(kLinearPte), ReadPte(kLinearPtd)));
  ASSERT_OK_AND_ASSIGN(std::vector<float> again, RunFloat(*from_bytes, "forward", inputs));
  EXPECT_EQ(again, out);
}

// A bundle of the real linear.pte, whose weights are in a data file: weights of the test's own in
// a .ptd it writes, and expected outputs from the naive reference above.
TEST(ExecuTorchProgramTest, ABundleOfAProgramWithADataFileVerifies) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  using ::ferry::testing::BuildBundle;
  using ::ferry::testing::FloatValue;
  LinearWeights w;
  w.weight = {0.5f, -1.0f, 0.25f, 2.0f, 0.0f, -0.5f, 1.5f, 1.0f, -2.0f};
  w.bias = {0.125f, -3.0f, 1.0f};
  const std::vector<uint8_t> ptd = BuildPtd({{"linear.weight", 6, {3, 3}, FloatBytes(w.weight)},
                                             {"linear.bias", 6, {3}, FloatBytes(w.bias)}});
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, -1.0f, 0.5f, 4.0f, 0.0f, -2.5f, 1.0f};
  std::vector<float> wrong = Linear(x, w);
  wrong[7] += 0.25f;
  const std::vector<uint8_t> bpte = BuildBundle(
      ReadPte(kLinearPte), {{"forward",
                             {{{FloatValue({3, 3}, x)}, {FloatValue({3, 3}, Linear(x, w))}},
                              {{FloatValue({3, 3}, x)}, {FloatValue({3, 3}, wrong)}}}}});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bpte, ptd));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> results, VerifyTestSuites(rt, *program, {}));
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].passed) << FormatCaseResult(results[0]);
  EXPECT_FALSE(results[1].passed);
  ASSERT_TRUE(results[1].first_mismatch.has_value());
  EXPECT_EQ(results[1].first_mismatch->element, 7);

  // The same through files and the command line, with --data, and without it.
  const std::string bpte_path = ::testing::TempDir() + "/linear_bundle.bpte";
  const std::string ptd_path = ::testing::TempDir() + "/linear_bundle.ptd";
  for (const auto& [path, bytes] : {std::pair{bpte_path, &bpte}, std::pair{ptd_path, &ptd}}) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes->data()),
            static_cast<std::streamsize>(bytes->size()));
  }
  cli::Options o;
  o.command = "verify";
  o.program = bpte_path;
  o.data = ptd_path;
  testing::CliResult r = RunCli(o);
  EXPECT_EQ(r.code, cli::kExitError);  // case 1 fails
  EXPECT_THAT(r.out, HasSubstr("forward case 0: PASS"));
  EXPECT_THAT(r.out, HasSubstr("forward case 1: FAIL"));
  o.data.clear();
  r = RunCli(o);
  EXPECT_EQ(r.code, cli::kExitError);
  EXPECT_THAT(r.out, HasSubstr("forward case 0: ERROR: "));
  EXPECT_THAT(r.out, HasSubstr("data file"));
  std::remove(bpte_path.c_str());
  std::remove(ptd_path.c_str());
}

TEST(ExecuTorchProgramTest, DataFilesThatDoNotFitAreRefusedNamingTheTensor) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::vector<uint8_t> pte = ReadPte(kLinearPte);
  const std::vector<float> nine(9, 1.0f), three(3, 1.0f);
  // A data file without linear.bias.
  EXPECT_THAT(MethodStatus(Program::FromBytes(pte, BuildPtd({{"linear.weight", 6, {3, 3}, FloatBytes(nine)}}))),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("value 1 (\"linear.bias\") has its data in an external data "
                                 "file, but the data file has no entry named \"linear.bias\"")));
  // A weight of another dtype, and one of another shape.
  EXPECT_THAT(
      MethodStatus(Program::FromBytes(
          pte, BuildPtd({{"linear.weight", 7, {3, 3}, std::vector<uint8_t>(72)},
                         {"linear.bias", 6, {3}, FloatBytes(three)}}))),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("value 0 (\"linear.weight\") is float32 [3, 3], but the data file's "
                         "entry is float64 [3, 3]")));
  EXPECT_THAT(MethodStatus(Program::FromBytes(pte, BuildPtd({{"linear.weight", 6, {9}, FloatBytes(nine)},
                                                {"linear.bias", 6, {3}, FloatBytes(three)}}))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is float32 [3, 3], but the data file's entry is float32 [9]")));
  // Without a layout, only the byte count can be checked.
  EXPECT_THAT(
      MethodStatus(Program::FromBytes(
          pte, BuildPtd({{"linear.weight", 6, {}, FloatBytes(three), false},
                         {"linear.bias", 6, {3}, FloatBytes(three)}}))),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("value 0 (\"linear.weight\") is 36 bytes, but the data file's entry is "
                         "12")));
  // A data file in the current layout that fits runs like the real one.
  const LinearWeights w = ReadLinearWeights();
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Program> program,
      Program::FromBytes(pte, BuildPtd({{"linear.bias", 6, {3}, FloatBytes(w.bias)},
                                        {"linear.weight", 6, {3, 3}, FloatBytes(w.weight)}})));
  std::vector<std::vector<float>> inputs = {{1, 2, 3, 4, 5, 6, 7, 8, 9}};
  const std::vector<float> expected = Linear(inputs[0], w);
  ASSERT_OK_AND_ASSIGN(std::vector<float> out, RunFloat(*program, "forward", inputs));
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(out[i], expected[i], 1e-4f) << i;
}

TEST(ExecuTorchProgramTest, DataFileErrorsNameTheFiles) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  ProgramLoadOptions options;
  options.data_path = PtePath("no_such.ptd");
  EXPECT_THAT(MethodStatus(Program::Load(PtePath(kLinearPte), options)),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("cannot open data file \"" + PtePath("no_such.ptd"))));
  // A program given as the data file.
  options.data_path = PtePath(kLinearPte);
  EXPECT_THAT(MethodStatus(Program::Load(PtePath(kLinearPte), options)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("with data file"),
                             HasSubstr("this is an ExecuTorch program (.pte"))));
  // A data file for a program that is not an ExecuTorch one.
  options.data_path = PtePath(kLinearPtd);
  EXPECT_THAT(MethodStatus(Program::FromBytes(ReadPte(kLinearPtd), ReadPte(kLinearPtd))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("only ExecuTorch programs (.pte) use one")));
  // Every truncation of the data file is refused, naming it as the data file.
  const std::vector<uint8_t> pte = ReadPte(kLinearPte);
  const std::vector<uint8_t> ptd = ReadPte(kLinearPtd);
  for (size_t n = 1; n < ptd.size(); n += 7) {
    EXPECT_THAT(MethodStatus(Program::FromBytes(pte, absl::MakeConstSpan(ptd).first(n))),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("data file")))
        << n;
  }
}

// Every single-byte change of linear.ptd (a few values per byte) either is refused or gives a
// method that loads and runs (meaningful under ASan): nothing the data file reader accepts makes
// the import or the run crash.
TEST(ExecuTorchProgramTest, MutatedDataFilesAreRefusedOrRunNeverCrash) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::vector<uint8_t> pte = ReadPte(kLinearPte);
  const std::vector<uint8_t> ptd = ReadPte(kLinearPtd);
  int loaded = 0;
  for (size_t at = 0; at < ptd.size(); ++at) {
    for (uint8_t value : {uint8_t(ptd[at] ^ 1), uint8_t(ptd[at] ^ 0x80), uint8_t{0}, uint8_t{0xff}}) {
      if (value == ptd[at]) continue;
      std::vector<uint8_t> bad = ptd;
      bad[at] = value;
      absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(pte, bad);
      // Refused: the data file by its reader, or the method by the import (a tensor the data
      // file no longer matches).
      if (!program.ok() || !(*program)->method("forward").ok()) continue;
      ++loaded;
      std::vector<std::vector<float>> inputs = {std::vector<float>(9, 1.0f)};
      absl::StatusOr<std::vector<float>> out = RunFloat(**program, "forward", inputs);
      EXPECT_TRUE(out.ok()) << "byte " << at << " = " << int{value} << ": " << out.status();
    }
  }
  // Changes to the weights' bytes themselves are data, and load.
  EXPECT_GT(loaded, 0);
}

TEST(ExecuTorchProgramTest, ExporterMemoryPlanIsKept) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  // linear.pte plans its input, the permuted weight and the output in arena 1; the reader test
  // reads the sizes and offsets off the file, here they are summed per arena.
  const std::vector<uint8_t> bytes = ReadPte(kLinearPte);
  ASSERT_OK_AND_ASSIGN(EtProgram et, ReadExecuTorchProgram(bytes));
  const EtMethod& m = *et.method("forward");
  ASSERT_GE(m.non_const_buffer_sizes.size(), 2u);
  int64_t end = 0;
  int planned = 0;
  for (const EtValue& v : m.values) {
    if (v.kind != EtValueKind::kTensor || !v.tensor.allocation.has_value()) continue;
    EXPECT_EQ(v.tensor.allocation->memory_id, 1u);
    end = std::max<int64_t>(end, v.tensor.allocation->offset + v.tensor.byte_size);
    ++planned;
  }
  ProgramLoadOptions options;
  options.data_path = PtePath(kLinearPtd);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::Load(PtePath(kLinearPte), options));
  ASSERT_OK_AND_ASSIGN(const MethodDef* def, program->method("forward"));
  ASSERT_EQ(def->exporter_arenas.size(), m.non_const_buffer_sizes.size() - 1);
  EXPECT_EQ(def->exporter_arenas[0].memory_id, 1u);
  EXPECT_EQ(def->exporter_arenas[0].declared_bytes, m.non_const_buffer_sizes[1]);
  EXPECT_EQ(def->exporter_arenas[0].used_bytes, end);
  EXPECT_EQ(def->exporter_arenas[0].tensors, planned);
  EXPECT_EQ(planned, 3);
}

TEST(ExecuTorchProgramTest, FromBytesTellsTheFormatsApart) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::vector<uint8_t> bytes = ReadPte("executorch__extension_module_test_resources_add.pte");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  ASSERT_OK_AND_ASSIGN(const MethodDef* def, program->method("forward"));
  ASSERT_EQ(def->nodes.size(), 1u);
  EXPECT_EQ(def->nodes[0].op, "add");
  EXPECT_EQ(def->inputs.size(), 2u);
  EXPECT_EQ(def->outputs.size(), 1u);
  // A .ptd data file is not a program; the reader says what it is.
  EXPECT_THAT(MethodStatus(Program::FromBytes(ReadPte("executorch__extension_module_test_resources_linear.ptd"))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("FT01")));
}

TEST(ExecuTorchProgramTest, CliPlansAndRunsAPte) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  for (const std::string command : {"plan", "run"}) {
    SCOPED_TRACE(command);
    cli::Options o;
    o.command = command;
    o.program = PtePath("test_models_deprecated_ModuleLinear-no-constant-segment.pte");
    o.method = "forward";
    o.method_given = true;
    o.calls = 1;
    o.warmup = 0;
    const CliResult r = RunCli(o);
    EXPECT_EQ(r.code, cli::kExitOk) << r.err;
    EXPECT_THAT(r.out, HasSubstr(command == "plan" ? "arenas:" : "output 0"));
  }
}

// A .pte with a method Ferry refuses ("bad": an op it does not map) beside one it runs ("good").
TEST(ExecuTorchProgramTest, CliPlansEveryMethodAndNamesTheOneThatDoesNotLoad) {
  const std::vector<float> w = {1, 2, 3, 4};
  EtProgram p = OneMethod({FloatTensor({4}), FloatTensor({4})}, {0}, {1},
                          {{"aten::convolution_backward", "out"}}, {KernelCall(0, {0, 1, 1})});
  p.methods[0].name = "bad";
  EtMethod good = OneMethod({FloatTensor({4}), FloatTensor({4}), Int(1), FloatTensor({4})}, {0, 1},
                            {3}, {{"aten::add", "out"}}, {KernelCall(0, {0, 1, 2, 3, 3})})
                      .methods[0];
  good.name = "good";
  p.methods.push_back(std::move(good));
  const std::string path = (std::filesystem::temp_directory_path() /
                            absl::StrCat("ferry_good_and_bad_", getpid(), ".pte"))
                               .string();
  {
    const std::vector<uint8_t> bytes = testing::WritePte(p);
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  cli::Options o;
  o.command = "plan";
  o.program = path;
  CliResult all = RunCli(o);
  EXPECT_EQ(all.code, cli::kExitError);
  EXPECT_THAT(all.out, AllOf(HasSubstr("== method \"bad\" ==\nnot loaded: method \"bad\", "
                                       "instruction 0 (aten::convolution_backward.out)"),
                             HasSubstr("== method \"good\" ==\n"),
                             HasSubstr("== program: 1 of 2 methods loaded together ==")));
  EXPECT_THAT(all.err, HasSubstr("ferry: 1 of 2 methods did not load: \"bad\""));
  o.method = "good";
  o.method_given = true;
  CliResult one = RunCli(o);
  EXPECT_EQ(one.code, cli::kExitOk) << one.err;
  o.command = "run";
  o.calls = 1;
  o.warmup = 0;
  o.inputs["0"] = {1, 2, 3, 4};
  o.inputs["1"] = {10, 20, 30, 40};
  CliResult run = RunCli(o);
  EXPECT_EQ(run.code, cli::kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("[11, 22, 33, 44]"));
  o.method = "bad";
  CliResult bad = RunCli(o);
  EXPECT_EQ(bad.code, cli::kExitError);
  EXPECT_THAT(bad.err, HasSubstr("aten::convolution_backward.out"));
  std::filesystem::remove(path);
}

cli::Options LinearCli(const std::string& command) {
  cli::Options o;
  o.command = command;
  o.program = PtePath(kLinearPte);
  o.data = PtePath(kLinearPtd);
  o.calls = 1;
  o.warmup = 0;
  return o;
}

// add.pte's only instruction is a call to an XNNPACK delegate listing values 0, 1, 2: the two
// method inputs, then the value nothing wrote before (the method's output), its result. Ferry
// plans it on the host (no target_device) and runs it with its built-in XNNPACK backend.
TEST(ExecuTorchProgramTest, XnnpackDelegateIsPlannedOnTheHostAndRuns) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::string path = PtePath("corey-cole__tests_models_add.pte");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::Load(path));
  ASSERT_OK_AND_ASSIGN(const MethodDef* m, program->method("forward"));
  ASSERT_EQ(m->nodes.size(), 1u);
  const NodeDef& node = m->nodes[0];
  EXPECT_EQ(node.kind, NodeKind::kDelegate);
  EXPECT_EQ(node.delegate().backend, "XnnpackBackend");
  EXPECT_FALSE(node.CompileSpec(kTargetDeviceSpec).has_value());
  EXPECT_THAT(node.args, ElementsAre(m->inputs[0], m->inputs[1]));
  EXPECT_THAT(node.results, ElementsAre(m->outputs[0]));
  EXPECT_FALSE(node.delegate().payload.empty());

  std::vector<std::vector<float>> inputs = {{1.5f, -2.0f, 0.25f}, {-0.5f, 4.0f, 8.0f}};
  ASSERT_OK_AND_ASSIGN(std::vector<float> out, RunFloat(*program, "forward", inputs));
  EXPECT_THAT(out, ElementsAre(1.0f, 2.0f, 8.25f));

  cli::Options o;
  o.program = path;
  o.calls = 1;
  o.warmup = 0;
  o.command = "plan";
  CliResult plan = RunCli(o);
  EXPECT_EQ(plan.code, cli::kExitOk) << plan.err;
  EXPECT_THAT(plan.out, Not(HasSubstr("not registered")));
  // The delegate's line says where it runs (the host) and that the backend is built in.
  const size_t line = plan.out.find("delegate:XnnpackBackend");
  ASSERT_NE(line, std::string::npos);
  EXPECT_THAT(plan.out.substr(line, plan.out.find('\n', line) - line),
              AllOf(HasSubstr("on host"), HasSubstr("built-in")));
  o.command = "run";
  CliResult run = RunCli(o);
  EXPECT_EQ(run.code, cli::kExitOk) << run.err;
}

// openvino_tiny.pte calls an OpenvinoBackend delegate, which Ferry does not have: `ferry plan`
// plans it from what the program declares and says so; running it is refused naming the backend.
TEST(ExecuTorchProgramTest, ADelegateWithoutItsBackendIsPlannedAndRefused) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  cli::Options o;
  o.program = PtePath("corey-cole__src_test_resources_models_openvino_openvino_tiny.pte");
  o.calls = 1;
  o.warmup = 0;
  o.command = "plan";
  CliResult plan = RunCli(o);
  EXPECT_EQ(plan.code, cli::kExitOk) << plan.err;
  EXPECT_THAT(plan.out, HasSubstr("note: backend \"OpenvinoBackend\" is not registered"));
  const size_t line = plan.out.find("delegate:OpenvinoBackend");
  ASSERT_NE(line, std::string::npos);
  EXPECT_THAT(plan.out.substr(line, plan.out.find('\n', line) - line),
              AllOf(HasSubstr("on host"), Not(HasSubstr("built-in"))));
  o.command = "run";
  CliResult run = RunCli(o);
  EXPECT_EQ(run.code, cli::kExitError);
  EXPECT_THAT(run.err, HasSubstr("node 0 (OpenvinoBackend (instruction 0)): no backend named "
                                 "\"OpenvinoBackend\" is registered"));
}

TEST(ExecuTorchProgramTest, XnnpackAddAndClampRun) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> add,
                       Program::Load(PtePath("corey-cole__native_spike_add.pte")));
  std::vector<std::vector<float>> two = {{0.75f}, {-3.0f}};
  ASSERT_OK_AND_ASSIGN(std::vector<float> sum, RunFloat(*add, "forward", two));
  EXPECT_THAT(sum, ElementsAre(-2.25f));

  // clamp5's graph is one Clamp node whose output range is [-1, 1].
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> clamp,
                       Program::Load(PtePath("corey-cole__native_spike_clamp5.pte")));
  std::vector<std::vector<float>> five = {{-3.5f, -1.0f, 0.25f, 1.0f, 7.0f}};
  ASSERT_OK_AND_ASSIGN(std::vector<float> clamped, RunFloat(*clamp, "forward", five));
  EXPECT_THAT(clamped, ElementsAre(-1.0f, -1.0f, 0.25f, 1.0f, 1.0f));
}

// conv.pte: NCHW [1, 3, 16, 16] -> transpose to NHWC -> Conv2d 3x3, padding 1, 8 filters, bias,
// output range [0, inf) (a fused ReLU) -> transpose back to [1, 8, 16, 16]. The filter
// ([8, 3, 3, 3] in XNNPACK's [out, kh, kw, in] order) and the bias are the program's named data.
TEST(ExecuTorchProgramTest, XnnpackConvolutionWithNamedDataRuns) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::string name = "corey-cole__native_spike_conv.pte";
  const std::vector<uint8_t> bytes = ReadPte(name);
  ASSERT_OK_AND_ASSIGN(EtProgram et, ReadExecuTorchProgram(bytes));
  ASSERT_EQ(et.named_data.size(), 2u);
  // The two entries, told apart by size: 8*3*3*3 floats of filter, 8 of bias.
  std::vector<float> filter, bias;
  for (const EtNamedData& d : et.named_data) {
    (d.bytes.size() == 864 ? filter : bias) = Floats(d.bytes);
  }
  ASSERT_EQ(filter.size(), 216u);
  ASSERT_EQ(bias.size(), 8u);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::Load(PtePath(name)));
  EXPECT_EQ(program->named_data().size(), 2u);
  std::vector<std::vector<float>> inputs(1, std::vector<float>(3 * 16 * 16));
  for (size_t i = 0; i < inputs[0].size(); ++i) {
    inputs[0][i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 0.1));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<float> out, RunFloat(*program, "forward", inputs));
  ASSERT_EQ(out.size(), 8u * 16 * 16);
  int negative_before_relu = 0;
  for (int o = 0; o < 8; ++o) {
    for (int y = 0; y < 16; ++y) {
      for (int x = 0; x < 16; ++x) {
        double acc = bias[o];
        for (int ky = 0; ky < 3; ++ky) {
          for (int kx = 0; kx < 3; ++kx) {
            const int iy = y + ky - 1, ix = x + kx - 1;
            if (iy < 0 || iy >= 16 || ix < 0 || ix >= 16) continue;
            for (int c = 0; c < 3; ++c) {
              acc += static_cast<double>(filter[((o * 3 + ky) * 3 + kx) * 3 + c]) *
                     inputs[0][(c * 16 + iy) * 16 + ix];
            }
          }
        }
        if (acc < 0) ++negative_before_relu;
        const double want = std::max(acc, 0.0);
        ASSERT_NEAR(out[(o * 16 + y) * 16 + x], want, 1e-5 * (1 + std::abs(want)))
            << "o " << o << " y " << y << " x " << x;
      }
    }
  }
  // The inputs reach both sides of the ReLU.
  EXPECT_GT(negative_before_relu, 0);
  EXPECT_LT(negative_before_relu, 8 * 16 * 16);
}

// The numbers of the JSON array that follows `"key": [` at or after `from`; `from` moves past it.
std::vector<double> JsonArrayAfter(const std::string& json, const std::string& key, size_t& from) {
  const std::string start = "\"" + key + "\": [";
  const size_t at = json.find(start, from);
  EXPECT_NE(at, std::string::npos) << key;
  if (at == std::string::npos) return {};
  const size_t end = json.find(']', at);
  from = end;
  std::vector<double> numbers;
  for (absl::string_view item :
       absl::StrSplit(absl::string_view(json).substr(at + start.size(), end - at - start.size()),
                      ',', absl::SkipWhitespace())) {
    double d = 0;
    EXPECT_TRUE(absl::SimpleAtod(item, &d)) << item;
    numbers.push_back(d);
  }
  return numbers;
}

TEST(ExecuTorchProgramTest, CliRunsLinearWithItsDataFileAndPrintsJson) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const LinearWeights w = ReadLinearWeights();
  cli::Options o = LinearCli("run");
  o.json = true;
  o.inputs["0"] = {1, -2, 0.5, 4, 0, -1, 2.5, 3, -0.25};
  CliResult r = RunCli(o);
  ASSERT_EQ(r.code, cli::kExitOk) << r.err;
  std::string where;
  EXPECT_TRUE(::ferry::testing::IsValidJson(r.out, &where)) << where << "\n" << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"method\": \"forward\""));
  EXPECT_THAT(r.out, HasSubstr("\"index\": 0"));
  EXPECT_THAT(r.out, HasSubstr("\"dtype\": \"float32\""));
  EXPECT_THAT(r.out, HasSubstr("\"device\": \"host\""));
  size_t from = r.out.find("\"outputs\"");
  ASSERT_NE(from, std::string::npos);
  EXPECT_THAT(JsonArrayAfter(r.out, "sizes", from), ElementsAre(3, 3));
  const std::vector<double> values = JsonArrayAfter(r.out, "values", from);
  const std::vector<float> x(o.inputs["0"].begin(), o.inputs["0"].end());
  const std::vector<float> expected = Linear(x, w);
  ASSERT_EQ(values.size(), expected.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(values[i], expected[i], 1e-5) << i;

  // Without --data: the error names the tensor and asks for the data file.
  o.data.clear();
  r = RunCli(o);
  EXPECT_EQ(r.code, cli::kExitError);
  EXPECT_THAT(r.err, AllOf(HasSubstr("\"linear.weight\""), HasSubstr("--data FILE")));
}

TEST(ExecuTorchProgramTest, CliPlanShowsTheExportersBuffersBesideFerrysArenas) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::vector<uint8_t> bytes = ReadPte(kLinearPte);
  ASSERT_OK_AND_ASSIGN(EtProgram et, ReadExecuTorchProgram(bytes));
  const int64_t declared = et.method("forward")->non_const_buffer_sizes.at(1);
  CliResult r = RunCli(LinearCli("plan"));
  ASSERT_EQ(r.code, cli::kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("arenas:"));
  EXPECT_THAT(r.out, HasSubstr("exporter's memory plan (ExecuTorch buffers, not used)"));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("buffer 1 ")));
  EXPECT_THAT(r.out, HasSubstr("used by 3 tensors"));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(declared, " B")));
  // bench takes the data file too.
  r = RunCli(LinearCli("bench"));
  EXPECT_EQ(r.code, cli::kExitOk) << r.err;
}

// Every single-byte change of the programs that run either is refused or gives a program that
// loads and runs (meaningful under ASan): nothing the reader accepts makes the import, the load
// or the run crash.
TEST(ExecuTorchProgramTest, MutatedProgramsAreRefusedOrRunNeverCrash) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  Runtime rt;
  int ran = 0;
  for (const char* name : {"executorch__extension_module_test_resources_add.pte",
                           "test_models_deprecated_ModuleLinear-no-constant-segment.pte",
                           "corey-cole__tests_models_multi.pte"}) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> original = ReadPte(name);
    for (size_t at = 0; at < original.size(); ++at) {
      for (uint8_t flip : {uint8_t{0x01}, uint8_t{0xff}}) {
        std::vector<uint8_t> bytes = original;
        bytes[at] ^= flip;
        absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(bytes);
        if (!program.ok()) {
          EXPECT_FALSE(program.status().message().empty());
          continue;
        }
        for (const std::string& method_name : (*program)->method_names()) {
          absl::StatusOr<std::unique_ptr<Method>> method = rt.LoadMethod(**program, method_name);
          if (!method.ok()) continue;
          const MethodDef* def = *(*program)->method(method_name);
          std::vector<std::vector<int64_t>> storage;  // zeros, 8-byte aligned
          bool set = true;
          for (size_t i = 0; i < def->inputs.size(); ++i) {
            const TensorMeta& meta = def->values[def->inputs[i]].meta;
            storage.emplace_back(meta.ByteSize().value_or(0) / sizeof(int64_t) + 1, 0);
            set = set &&
                  (*method)
                      ->SetInput(i, TensorView::Host(meta.dtype, absl::MakeConstSpan(meta.sizes),
                                                     storage.back().data()))
                      .ok();
          }
          if (set && (*method)->Execute().ok()) ++ran;
        }
      }
    }
  }
  EXPECT_GT(ran, 0);  // most changes touch names and padding, and those programs still run
}

// ---------------------------------------------------------------------------------------------
// A hand-made program run by the CLI. The ops' own mappings are tested per family in
// tests/loader/executorch/ops/, the importer in tests/loader/executorch/importer_test.cc.

// ferry run on a .pte with bool and int32 inputs and outputs:
//   e = eq.Scalar(x, 2); e32 = e as int32; w = where(cond, x, e32)
TEST(ExecuTorchImportTest, CliRunsBoolAndInt32InputsAndOutputs) {
  EtProgram p = OneMethod(
      {BoolTensor({4}), Int32Tensor({4}), Int(2), BoolTensor({4}), Bool(false), EtValue{},
       Int32Tensor({4}), Int32Tensor({4})},
      {0, 1}, {3, 7},
      {{"aten::eq", "Scalar_out"},
       {"dim_order_ops::_to_dim_order_copy", "out"},
       {"aten::where", "self_out"}},
      {KernelCall(0, {1, 2, 3, 3}), KernelCall(1, {3, 4, 5, 6, 6}), KernelCall(2, {0, 1, 6, 7, 7})});
  const std::string path =
      (std::filesystem::temp_directory_path() /
       absl::StrCat("ferry_executorch_bool_int32_", getpid(), ".pte"))
          .string();
  {
    const std::vector<uint8_t> bytes = testing::WritePte(p);
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  auto run = [&](std::vector<double> cond, std::string* text, std::string* errors) {
    cli::Options o;
    o.command = "run";
    o.program = path;
    o.calls = 1;
    o.warmup = 0;
    o.inputs["0"] = std::move(cond);
    o.inputs["1"] = {2, 3, 2, -1};
    CliResult r = RunCli(o);
    *text = std::move(r.out);
    *errors = std::move(r.err);
    return r.code;
  };
  std::string text, errors;
  ASSERT_EQ(run({1, 0, 1, 1}, &text, &errors), cli::kExitOk) << errors;
  // e = (x == 2) = [1, 0, 1, 0]; w = cond ? x : e = [2, 0, 2, -1].
  EXPECT_THAT(text, AllOf(HasSubstr("bool[4] on host: sum 2 min 0 max 1  [1, 0, 1, 0]"),
                          HasSubstr("int32[4] on host: sum 3 min -1 max 2  [2, 0, 2, -1]")));
  EXPECT_NE(run({1, 2, 0, 0}, &text, &errors), cli::kExitOk);
  EXPECT_THAT(errors, HasSubstr("2 is not 0 or 1, and input \"input 0\" is bool"));
  std::filesystem::remove(path);
}

// The QNN llama's 27 metadata methods (no instructions; each returns the value the exporter
// recorded) load and run beside the two QNN methods (uint16 and uint8 tensors into a QnnBackend
// delegate), which are refused naming the backend. Expected values: the
// stories260K model's published configuration (dim 64, 5 layers, 8 heads of which 4 key/value,
// vocabulary 512) and the Llama tokenizer's BOS 1 and EOS 2.
TEST(ExecuTorchProgramTest, QnnLlamaMetadataMethodsRun) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::Load(PtePath("pytorch__examples_qualcomm_oss_scripts_llama_"
                                             "artifacts_stories260k_hybrid_llama_qnn.pte")));
  const std::vector<std::string> names = program->method_names();
  ASSERT_EQ(names.size(), 29u);
  Runtime rt;
  int ran = 0;
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<Method>> m = rt.LoadMethod(*program, name);
    if (name == "kv_forward" || name == "prefill_forward") {
      EXPECT_THAT(m.status(),
                  StatusIs(absl::StatusCode::kNotFound,
                           AllOf(HasSubstr(absl::StrCat("method \"", name, "\"")),
                                 HasSubstr("no backend named \"QnnBackend\" is registered"))));
      continue;
    }
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    ASSERT_OK((*m)->Execute());
    ASSERT_GE((*m)->num_outputs(), 1u) << name;
    ASSERT_OK_AND_ASSIGN(const Scalar* value, (*m)->OutputValue(0));
    EXPECT_TRUE(value->is_number()) << name;
    ++ran;
  }
  EXPECT_EQ(ran, 27);
  auto int_of = [&](const std::string& name) -> int64_t {
    absl::StatusOr<std::unique_ptr<Method>> m = rt.LoadMethod(*program, name);
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok() || !(*m)->Execute().ok()) return -1;
    absl::StatusOr<int64_t> v = (*m)->OutputInt(0);
    EXPECT_TRUE(v.ok()) << name << ": " << v.status();
    return v.value_or(-1);
  };
  EXPECT_EQ(int_of("get_dim"), 64);
  EXPECT_EQ(int_of("get_n_layers"), 5);
  EXPECT_EQ(int_of("get_n_kv_heads"), 4);
  EXPECT_EQ(int_of("get_head_dim"), 64 / 8);
  EXPECT_EQ(int_of("get_vocab_size"), 512);
  EXPECT_EQ(int_of("get_bos_id"), 1);
  EXPECT_EQ(int_of("get_eos_id"), 2);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> kv, rt.LoadMethod(*program, "get_use_kv_cache"));
  ASSERT_OK(kv->Execute());
  EXPECT_THAT(kv->OutputBool(0), IsOkAndHolds(true));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> scale, rt.LoadMethod(*program, "get_logits_scale"));
  ASSERT_OK(scale->Execute());
  ASSERT_OK_AND_ASSIGN(double s, scale->OutputDouble(0));
  EXPECT_GT(s, 0.0);  // a quantization scale
  EXPECT_LT(s, 1.0);
}

// The dnf training programs' index methods: ExecuTorch's training convention returns, from
// forward, the user's outputs, then one gradient per parameter, then the parameters; the index
// methods say where each run starts and the FQN method names the parameters (a weight and a bias
// per layer: one layer in the ECG demo, five in the test program).
TEST(ExecuTorchProgramTest, DnfTrainingIndexMethodsRun) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  for (const auto& [file, layers] : {std::pair{"berndporr__ecg_filt_demo_dnf_executorch.pte", 1},
                                     std::pair{"berndporr__test_dnf_executorch5.pte", 5}}) {
    SCOPED_TRACE(file);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::Load(PtePath(file)));
    Runtime rt;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> fqn,
                         rt.LoadMethod(*program, "__et_training_fqn_forward"));
    ASSERT_OK(fqn->Execute());
    ASSERT_EQ(fqn->num_outputs(), 2u * layers);
    for (int l = 0; l < layers; ++l) {
      EXPECT_THAT(fqn->OutputString(2 * l),
                  IsOkAndHolds(absl::string_view(absl::StrCat("net.seq.Layer", l, ".weight"))));
      EXPECT_THAT(fqn->OutputString(2 * l + 1),
                  IsOkAndHolds(absl::string_view(absl::StrCat("net.seq.Layer", l, ".bias"))));
    }
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> gradients,
                         rt.LoadMethod(*program, "__et_training_gradients_index_forward"));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> parameters,
                         rt.LoadMethod(*program, "__et_training_parameters_index_forward"));
    ASSERT_OK(gradients->Execute());
    ASSERT_OK(parameters->Execute());
    ASSERT_OK_AND_ASSIGN(int64_t g, gradients->OutputInt(0));
    ASSERT_OK_AND_ASSIGN(int64_t p, parameters->OutputInt(0));
    EXPECT_EQ(p - g, 2 * layers);  // one gradient per parameter
  }
}

// The dnf ECG demo's forward: one tanh layer trained on a squared error, its weight and bias as
// mutable state with initial data. Expected values from those initial weights (read off the file
// by the reader) in double: y = tanh(b + x . W), e = t - y, loss = e^2, and the gradients of
// the loss, dW = -2 e (1 - y^2) x and db = -2 e (1 - y^2). Outputs: loss, y, e, dW, db, W, b.
TEST(ExecuTorchProgramTest, DnfTrainingForwardRunsFromItsMutableState) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::string file = "berndporr__ecg_filt_demo_dnf_executorch.pte";
  const std::vector<uint8_t> bytes = ReadPte(file);
  ASSERT_OK_AND_ASSIGN(EtProgram et, ReadExecuTorchProgram(bytes));
  const EtMethod* forward = nullptr;
  for (const EtMethod& m : et.methods) {
    if (m.name == "forward") forward = &m;
  }
  ASSERT_NE(forward, nullptr);
  const std::vector<float> w = Floats(forward->values[0].tensor.data.bytes);
  const std::vector<float> b = Floats(forward->values[1].tensor.data.bytes);
  ASSERT_EQ(w.size(), 50u);
  ASSERT_EQ(b.size(), 1u);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::Load(PtePath(file)));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> m, rt.LoadMethod(*program, "forward"));
  std::vector<float> x(50);
  for (int i = 0; i < 50; ++i) x[i] = 0.02f * static_cast<float>(i % 7) - 0.05f;
  std::vector<float> t = {0.3f};
  ASSERT_OK(m->SetInput(0, TensorView::Host(DType::kFloat32, {1, 50}, x.data())));
  ASSERT_OK(m->SetInput(1, TensorView::Host(DType::kFloat32, {1}, t.data())));
  double z = b[0];
  for (int i = 0; i < 50; ++i) z += double{x[i]} * w[i];
  const double y = std::tanh(z);
  const double e = t[0] - y;
  const double dz = -2 * e * (1 - y * y);
  for (int call = 0; call < 2; ++call) {  // the state is read, not written: the same twice
    SCOPED_TRACE(absl::StrCat("call ", call));
    ASSERT_OK(m->Execute());
    ASSERT_EQ(m->num_outputs(), 7u);
    EXPECT_NEAR(m->Output(0).data_as<float>()[0], e * e, 1e-6);
    EXPECT_NEAR(m->Output(1).data_as<float>()[0], y, 1e-6);
    EXPECT_NEAR(m->Output(2).data_as<float>()[0], e, 1e-6);
    for (int i = 0; i < 50; ++i) {
      EXPECT_NEAR(m->Output(3).data_as<float>()[i], dz * x[i], 1e-6) << i;
      EXPECT_EQ(m->Output(5).data_as<float>()[i], w[i]) << i;
    }
    EXPECT_NEAR(m->Output(4).data_as<float>()[0], dz, 1e-6);
    EXPECT_EQ(m->Output(6).data_as<float>()[0], b[0]);
  }
  // The five-layer program's forward loads and runs too.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> five,
                       Program::Load(PtePath("berndporr__test_dnf_executorch5.pte")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> deep, rt.LoadMethod(*five, "forward"));
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < deep->num_inputs(); ++i) {
    const IoInfo& io = deep->plan().inputs[i];
    ASSERT_TRUE(io.is_tensor());
    inputs.emplace_back(io.bytes / sizeof(float), 0.1f);
    ASSERT_OK(deep->SetInput(i, TensorView::Host(io.dtype, io.sizes, inputs.back().data())));
  }
  ASSERT_OK(deep->Execute());
  for (size_t o = 0; o < deep->num_outputs(); ++o) {
    const TensorView out = deep->Output(o);
    for (int64_t k = 0; k < out.numel(); ++k) {
      EXPECT_TRUE(std::isfinite(out.data_as<float>()[k])) << "output " << o << ", element " << k;
    }
  }
}

// The reliability reproducers (../shared/repro3): an operator name holding a NUL and control
// bytes is named in full, escaped; a 1 GiB output is summarised a chunk at a time.
TEST(ExecuTorchProgramTest, ReproducersGiveAClearMessageOrRun) {
  const std::filesystem::path repro = std::filesystem::path(FERRY_SHARED_DIR) / "repro3";
  if (!std::filesystem::is_directory(repro)) GTEST_SKIP() << repro.string() << " is absent";
  cli::Options o;
  o.command = "run";
  o.program = (repro / "op_name_with_nul_truncates_message.pte").string();
  o.calls = 1;
  o.warmup = 0;
  CliResult nul = RunCli(o);
  EXPECT_EQ(nul.code, cli::kExitError);
  EXPECT_EQ(nul.err.find('\0'), std::string::npos);
  EXPECT_THAT(nul.err, AllOf(HasSubstr("\\x00"), HasSubstr("is not supported")));
  for (char c : nul.err) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c != 0x7f)) << int{c};
  o.program = (repro / "expand_to_1GiB_output.pte").string();
  CliResult big = RunCli(o);
  EXPECT_EQ(big.code, cli::kExitOk) << big.err;
  EXPECT_THAT(big.out, HasSubstr("float32[268435456] on host: sum 0 min 0 max 0"));
}

}  // namespace
}  // namespace ferry
