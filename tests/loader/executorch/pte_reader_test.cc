// The ExecuTorch program reader: the real programs in ../shared/pte with the facts they hold,
// every truncation and thousands of single-byte mutations of them (never a crash; meaningful
// under ASan), and hand-made programs (tests/testing/hand_made_pte.h) broken in the file's
// header, segments or program tables, each refused with a message that names the problem. A
// method's own tables are tested in pte_method_reader_test.cc.
//
// The facts below were read off `flatc --json --strict-json --raw-binary
// loader/executorch/schema/executorch_program.fbs -- <file>` dumps and `xxd` of the files, not off
// the reader under test.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/program.h"
#include "flatbuffers/flatbuffers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/executorch/schema/executorch_program_generated.h"
#include "tests/testing/hand_made_pte.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

namespace fb = ::ferry::et::fbs;
using ::ferry::testing::BuildPte;
using ::ferry::testing::kLengthAt;
using ::ferry::testing::kProgramSizeAt;
using ::ferry::testing::kSegmentBaseAt;
using ::ferry::testing::kSegmentDataSizeAt;
using ::ferry::testing::PteSpec;
using ::ferry::testing::PutLE;
using ::ferry::testing::Read;
using ::ferry::testing::ReadWith;
using ::ferry::testing::RefusedWith;
using ::ferry::testing::StatusIs;
using ::testing::_;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// ---------------------------------------------------------------------------------------------
// Real programs.

constexpr char kPteDir[] = FERRY_SHARED_PTE_DIR;

constexpr const char* kRealPrograms[] = {
    "executorch__extension_module_test_resources_add.pte",
    "executorch__extension_module_test_resources_linear.pte",
    "test_models_deprecated_ModuleLinear-no-constant-segment.pte",
    "corey-cole__tests_models_multi.pte",
    "corey-cole__tests_models_add.pte",
    "corey-cole__tests_models_lstm_lstm.pte",
    "examples_arduino_examples_KeywordSpotting_model.pte",
};

#define SKIP_WITHOUT_REAL_PROGRAMS()                                                      \
  if (!std::filesystem::is_directory(kPteDir)) {                                          \
    GTEST_SKIP() << "no real ExecuTorch programs: " << kPteDir                            \
                 << " is absent (it is shared between checkouts, beside the repository)"; \
  }

// The file's bytes (a vector's storage is aligned for any scalar).
std::vector<uint8_t> ReadPte(const std::string& name) {
  std::ifstream in(std::filesystem::path(kPteDir) / name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<EtProgram> ReadReal(const std::string& name, std::vector<uint8_t>* storage) {
  *storage = ReadPte(name);
  return ReadExecuTorchProgram(*storage);
}

std::vector<float> Floats(absl::Span<const uint8_t> bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

const EtTensor& TensorAt(const EtMethod& m, int32_t v) {
  EXPECT_EQ(m.values.at(v).kind, EtValueKind::kTensor) << "value " << v;
  return m.values.at(v).tensor;
}

std::vector<std::string> OperatorNames(const EtMethod& m) {
  std::vector<std::string> names;
  for (const EtOperator& op : m.operators) names.push_back(op.FullName());
  return names;
}

// Reads every part of a program the reader accepted and checks the promises of its header:
// every index in range, every span inside the file. Under ASan a bad span shows up here.
void CheckInvariants(const EtProgram& program, absl::Span<const uint8_t> file) {
  auto inside = [&](absl::Span<const uint8_t> s) {
    if (s.empty()) return true;
    return s.data() >= file.data() && s.data() + s.size() <= file.data() + file.size();
  };
  size_t sum = 0;
  auto touch = [&](absl::Span<const uint8_t> s) {
    for (uint8_t b : s) sum += b;
  };
  for (const EtSegment& s : program.segments) {
    ASSERT_TRUE(inside(s.bytes));
    touch(s.bytes);
  }
  for (const EtNamedData& n : program.named_data) {
    ASSERT_LT(n.segment_index, program.segments.size());
    ASSERT_TRUE(inside(n.bytes));
  }
  for (const EtMethod& m : program.methods) {
    const size_t n = m.values.size();
    for (const EtValue& v : m.values) {
      for (int32_t id : v.items) {
        ASSERT_TRUE(id == -1 || (id >= 0 && static_cast<size_t>(id) < n));
      }
      if (v.kind != EtValueKind::kTensor) continue;
      const EtTensor& t = v.tensor;
      ASSERT_TRUE(inside(t.data.bytes));
      if (t.data.kind != EtDataKind::kNone && t.data.kind != EtDataKind::kExternal) {
        ASSERT_EQ(t.data.bytes.size(), t.byte_size);
      }
      touch(t.data.bytes);
      ASSERT_TRUE(t.dim_order.empty() || t.dim_order.size() == t.sizes.size());
    }
    for (int32_t id : m.inputs) ASSERT_LT(static_cast<size_t>(id), n);
    for (int32_t id : m.outputs) ASSERT_LT(static_cast<size_t>(id), n);
    for (const EtInstruction& i : m.instructions) {
      for (int32_t id : i.args) ASSERT_LT(static_cast<size_t>(id), n);
      if (i.kind == EtInstructionKind::kKernelCall) {
        ASSERT_LT(static_cast<size_t>(i.op_index), m.operators.size());
      }
      if (i.kind == EtInstructionKind::kDelegateCall) {
        ASSERT_LT(static_cast<size_t>(i.delegate_index), m.delegates.size());
      }
    }
    for (const EtDelegate& d : m.delegates) {
      ASSERT_TRUE(inside(d.payload));
      touch(d.payload);
    }
  }
  EXPECT_GE(sum, 0u);
}

TEST(ExecuTorchRealProgramTest, EveryRealProgramReads) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  for (const char* name : kRealPrograms) {
    SCOPED_TRACE(name);
    std::vector<uint8_t> bytes;
    absl::StatusOr<EtProgram> program = ReadReal(name, &bytes);
    ASSERT_OK(program.status());
    CheckInvariants(*program, bytes);
  }
}

TEST(ExecuTorchRealProgramTest, AProgramOverTheMemoryLimitIsRefusedBeforeItsMethodsAreRead) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::string name = "corey-cole__tests_models_multi.pte";
  std::vector<uint8_t> bytes;
  ASSERT_OK_AND_ASSIGN(EtProgram whole, ReadReal(name, &bytes));
  size_t values = 0, instructions = 0;
  for (const EtMethod& m : whole.methods) {
    values += m.values.size();
    instructions += m.instructions.size();
  }
  ASSERT_GT(values, 0u);
  // 8 bytes per value and instruction: less than any structure for them takes.
  const size_t tight = 8 * (values + instructions);
  EXPECT_THAT(ReadExecuTorchProgram(bytes, tight),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr(absl::StrCat("reading the program's ", values,
                                                    " values and ", instructions, " nodes takes")),
                             HasSubstr("ProgramLoadOptions::memory_limit_bytes"),
                             HasSubstr("nothing was built"))));
  // 4 KiB per value and instruction: more than they take.
  EXPECT_OK(ReadExecuTorchProgram(bytes, 4096 * (values + instructions)).status());
  // The same limit through Program::Load, which names the file.
  const std::string path = (std::filesystem::path(kPteDir) / name).string();
  ProgramLoadOptions options;
  options.memory_limit_bytes = tight;
  EXPECT_THAT(Program::Load(path, options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr(absl::StrCat("program \"", path, "\": reading the program's"))));
  options.memory_limit_bytes = 4096 * (values + instructions);
  EXPECT_OK(Program::Load(path, options).status());
}

TEST(ExecuTorchRealProgramTest, AddWithoutExtendedHeader) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  std::vector<uint8_t> bytes;
  ASSERT_OK_AND_ASSIGN(EtProgram program,
                       ReadReal("executorch__extension_module_test_resources_add.pte", &bytes));
  EXPECT_FALSE(program.extended_header.has_value());
  EXPECT_EQ(program.program_size, 728u);
  EXPECT_THAT(program.method_names(), ElementsAre("forward"));
  const EtMethod& m = program.methods[0];
  EXPECT_THAT(OperatorNames(m), ElementsAre("aten::add.out"));
  EXPECT_EQ(m.operators[0].name, "aten::add");
  EXPECT_EQ(m.operators[0].overload, "out");
  ASSERT_EQ(m.values.size(), 4u);
  EXPECT_THAT(m.inputs, ElementsAre(0, 1));
  EXPECT_THAT(m.outputs, ElementsAre(2));
  for (int v : {0, 1, 2}) {
    const EtTensor& t = TensorAt(m, v);
    EXPECT_EQ(t.dtype, DType::kFloat32);
    EXPECT_THAT(t.sizes, ElementsAre(1));
    EXPECT_THAT(t.dim_order, ElementsAre(0));
    EXPECT_EQ(t.data.kind, EtDataKind::kNone);
    ASSERT_TRUE(t.allocation.has_value());
    EXPECT_EQ(t.allocation->memory_id, 1u);
    EXPECT_EQ(t.allocation->offset, 16u * v);
  }
  EXPECT_EQ(m.values[3].kind, EtValueKind::kInt);  // alpha
  EXPECT_EQ(m.values[3].int_value, 1);
  ASSERT_EQ(m.instructions.size(), 1u);
  EXPECT_EQ(m.instructions[0].kind, EtInstructionKind::kKernelCall);
  EXPECT_EQ(m.instructions[0].op_index, 0);
  // a, b, alpha, out, and the returned value (the same as out).
  EXPECT_THAT(m.instructions[0].args, ElementsAre(0, 1, 3, 2, 2));
  EXPECT_THAT(m.non_const_buffer_sizes, ElementsAre(0, 48));
  EXPECT_FALSE(program.constant_segment.has_value());  // offsets [0]: nothing but the reserved one
  EXPECT_EQ(program.constant_buffer_count, 0u);
  ASSERT_EQ(program.segments.size(), 1u);
  EXPECT_EQ(program.segments[0].size, 0u);
}

TEST(ExecuTorchRealProgramTest, LinearWeightsAreExternalByName) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  std::vector<uint8_t> bytes;
  ASSERT_OK_AND_ASSIGN(EtProgram program,
                       ReadReal("executorch__extension_module_test_resources_linear.pte", &bytes));
  EXPECT_FALSE(program.extended_header.has_value());
  const EtMethod* m = program.method("forward");
  ASSERT_NE(m, nullptr);
  EXPECT_THAT(OperatorNames(*m), ElementsAre("aten::permute_copy.out", "aten::addmm.out"));
  ASSERT_EQ(m->values.size(), 10u);
  EXPECT_THAT(m->inputs, ElementsAre(2));
  EXPECT_THAT(m->outputs, ElementsAre(7));
  const EtTensor& weight = TensorAt(*m, 0);
  EXPECT_EQ(weight.data.kind, EtDataKind::kExternal);
  EXPECT_EQ(weight.fully_qualified_name, "linear.weight");
  EXPECT_THAT(weight.sizes, ElementsAre(3, 3));
  EXPECT_FALSE(weight.allocation.has_value());
  const EtTensor& bias = TensorAt(*m, 1);
  EXPECT_EQ(bias.data.kind, EtDataKind::kExternal);
  EXPECT_EQ(bias.fully_qualified_name, "linear.bias");
  EXPECT_THAT(bias.sizes, ElementsAre(3));
  for (int v : {2, 7}) {
    EXPECT_EQ(TensorAt(*m, v).dtype, DType::kFloat32);
    EXPECT_THAT(TensorAt(*m, v).sizes, ElementsAre(3, 3));
  }
  // permute_copy's dims: an int list holds the indices of Int values (1 and 0), not numbers.
  ASSERT_EQ(m->values[6].kind, EtValueKind::kIntList);
  EXPECT_THAT(m->values[6].items, ElementsAre(4, 5));
  EXPECT_EQ(m->values[4].int_value, 1);
  EXPECT_EQ(m->values[5].int_value, 0);
  ASSERT_EQ(m->instructions.size(), 2u);
  EXPECT_THAT(m->instructions[0].args, ElementsAre(0, 6, 3, 3));
  EXPECT_THAT(m->instructions[1].args, ElementsAre(1, 2, 3, 8, 9, 7, 7));
}

TEST(ExecuTorchRealProgramTest, LegacyInlineConstantBuffer) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  std::vector<uint8_t> bytes;
  ASSERT_OK_AND_ASSIGN(
      EtProgram program,
      ReadReal("test_models_deprecated_ModuleLinear-no-constant-segment.pte", &bytes));
  EXPECT_EQ(program.constant_buffer_count, 3u);  // entry 0 reserved
  EXPECT_FALSE(program.constant_segment.has_value());
  EXPECT_THAT(program.segments, IsEmpty());
  const EtMethod& m = program.methods.at(0);
  EXPECT_EQ(m.name, "forward");
  EXPECT_THAT(OperatorNames(m), ElementsAre("aten::mul.out", "aten::add.out"));
  EXPECT_THAT(m.inputs, ElementsAre(2));
  EXPECT_THAT(m.outputs, ElementsAre(4));
  const EtTensor& a = TensorAt(m, 0);
  EXPECT_EQ(a.data.kind, EtDataKind::kConstantBuffer);
  EXPECT_EQ(a.data.index, 1u);
  EXPECT_THAT(Floats(a.data.bytes), ElementsAre(3, 3, 3, 3));
  const EtTensor& b = TensorAt(m, 1);
  EXPECT_EQ(b.data.kind, EtDataKind::kConstantBuffer);
  EXPECT_EQ(b.data.index, 2u);
  EXPECT_THAT(Floats(b.data.bytes), ElementsAre(2, 2, 2, 2));
  EXPECT_THAT(TensorAt(m, 2).sizes, ElementsAre(2, 2));
  EXPECT_THAT(m.instructions[0].args, ElementsAre(0, 2, 3, 3));
  EXPECT_THAT(m.instructions[1].args, ElementsAre(3, 1, 5, 4, 4));
}

TEST(ExecuTorchRealProgramTest, TwoMethodsAndAnExtendedHeader) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  std::vector<uint8_t> bytes;
  ASSERT_OK_AND_ASSIGN(EtProgram program, ReadReal("corey-cole__tests_models_multi.pte", &bytes));
  ASSERT_TRUE(program.extended_header.has_value());
  EXPECT_EQ(program.extended_header->length, 32u);
  EXPECT_EQ(program.extended_header->program_size, 2240u);
  EXPECT_EQ(program.extended_header->segment_base_offset, 2304u);
  EXPECT_EQ(program.extended_header->segment_data_size, 8u);
  EXPECT_EQ(program.program_size, 2240u);
  EXPECT_THAT(program.method_names(), ElementsAre("double", "forward"));
  ASSERT_EQ(program.segments.size(), 1u);
  EXPECT_EQ(program.segments[0].file_offset, 2304u);
  EXPECT_EQ(program.segments[0].size, 8u);
  ASSERT_TRUE(program.constant_segment.has_value());
  EXPECT_EQ(program.constant_segment->segment_index, 0u);
  EXPECT_THAT(program.constant_segment->offsets, ElementsAre(0, 0));
  for (const EtMethod& m : program.methods) {
    SCOPED_TRACE(m.name);
    EXPECT_THAT(OperatorNames(m),
                ElementsAre("dim_order_ops::_to_dim_order_copy.out", "aten::add.out"));
    EXPECT_THAT(m.inputs, ElementsAre(1));
    EXPECT_THAT(m.outputs, ElementsAre(5));
    EXPECT_EQ(TensorAt(m, 1).dtype, DType::kFloat32);
    EXPECT_THAT(TensorAt(m, 1).sizes, ElementsAre(2));
    // An int64 scalar constant (rank 0) in the constant segment: the number 1.
    const EtTensor& one = TensorAt(m, 0);
    EXPECT_EQ(one.dtype, DType::kInt64);
    EXPECT_THAT(one.sizes, IsEmpty());
    EXPECT_EQ(one.data.kind, EtDataKind::kConstantSegment);
    EXPECT_EQ(one.data.file_offset, 2304u);
    ASSERT_EQ(one.data.bytes.size(), 8u);
    int64_t value = 0;
    std::memcpy(&value, one.data.bytes.data(), sizeof(value));
    EXPECT_EQ(value, 1);
    EXPECT_EQ(m.values[3].kind, EtValueKind::kBool);
    EXPECT_EQ(m.values[4].kind, EtValueKind::kIntList);
    EXPECT_THAT(m.values[4].items, IsEmpty());
    EXPECT_EQ(m.values[6].kind, EtValueKind::kInt);
    ASSERT_EQ(m.instructions.size(), 2u);
    EXPECT_THAT(m.instructions[0].args, ElementsAre(0, 3, 4, 2, 2));
    EXPECT_THAT(m.instructions[1].args, ElementsAre(1, 2, 6, 5, 5));
  }
}

TEST(ExecuTorchRealProgramTest, XnnpackDelegateInASegment) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  std::vector<uint8_t> bytes;
  ASSERT_OK_AND_ASSIGN(EtProgram program, ReadReal("corey-cole__tests_models_add.pte", &bytes));
  ASSERT_TRUE(program.extended_header.has_value());
  EXPECT_EQ(program.extended_header->program_size, 1088u);
  EXPECT_EQ(program.extended_header->segment_base_offset, 1152u);
  const EtMethod& m = program.methods.at(0);
  EXPECT_EQ(m.name, "forward");
  EXPECT_THAT(m.operators, IsEmpty());
  ASSERT_EQ(m.delegates.size(), 1u);
  const EtDelegate& d = m.delegates[0];
  EXPECT_EQ(d.backend_id, "XnnpackBackend");
  EXPECT_THAT(d.compile_specs, IsEmpty());
  EXPECT_EQ(d.location, EtPayloadLocation::kSegment);
  EXPECT_EQ(d.index, 1u);
  EXPECT_EQ(d.file_offset, 1152u);
  EXPECT_EQ(d.payload.size(), 432u);
  EXPECT_EQ(d.payload.data(), bytes.data() + 1152);
  ASSERT_EQ(m.instructions.size(), 1u);
  EXPECT_EQ(m.instructions[0].kind, EtInstructionKind::kDelegateCall);
  EXPECT_EQ(m.instructions[0].delegate_index, 0);
  EXPECT_THAT(m.instructions[0].args, ElementsAre(0, 1, 2));  // inputs and output in one list
  EXPECT_THAT(m.inputs, ElementsAre(0, 1));
  EXPECT_THAT(m.outputs, ElementsAre(2));
  for (int v : {0, 1, 2}) EXPECT_THAT(TensorAt(m, v).sizes, ElementsAre(3));
}

TEST(ExecuTorchRealProgramTest, CustomLstmOpWithConstantsInASegment) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  std::vector<uint8_t> bytes;
  ASSERT_OK_AND_ASSIGN(EtProgram program,
                       ReadReal("corey-cole__tests_models_lstm_lstm.pte", &bytes));
  const EtMethod& m = program.methods.at(0);
  EXPECT_THAT(OperatorNames(m), ElementsAre("etnp::lstm.out"));
  EXPECT_THAT(m.inputs, ElementsAre(4, 5, 6));
  EXPECT_THAT(m.outputs, ElementsAre(7, 8, 9));
  EXPECT_THAT(TensorAt(m, 4).sizes, ElementsAre(5, 2, 4));
  EXPECT_THAT(TensorAt(m, 7).sizes, ElementsAre(5, 2, 3));
  ASSERT_TRUE(program.constant_segment.has_value());
  EXPECT_THAT(program.constant_segment->offsets, ElementsAre(0, 0, 192, 336, 384));
  const uint64_t base = program.extended_header->segment_base_offset;
  const uint64_t expected_offsets[] = {0, 192, 336, 384};
  for (int v = 0; v < 4; ++v) {
    const EtTensor& t = TensorAt(m, v);
    EXPECT_EQ(t.data.kind, EtDataKind::kConstantSegment);
    EXPECT_EQ(t.data.index, static_cast<uint32_t>(v + 1));
    EXPECT_EQ(t.data.file_offset, base + expected_offsets[v]);
  }
  EXPECT_EQ(TensorAt(m, 0).byte_size, 12u * 4 * 4);  // float32[12, 4]
  ASSERT_EQ(m.values[10].kind, EtValueKind::kTensorList);
  EXPECT_THAT(m.values[10].items, ElementsAre(7, 8, 9));
  ASSERT_EQ(m.instructions.size(), 1u);
  EXPECT_THAT(m.instructions[0].args, ElementsAre(4, 5, 6, 0, 1, 2, 3, 7, 8, 9, 10));
}

TEST(ExecuTorchRealProgramTest, KeywordSpottingCortexMOpsAndInt8Constants) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  std::vector<uint8_t> bytes;
  ASSERT_OK_AND_ASSIGN(EtProgram program,
                       ReadReal("examples_arduino_examples_KeywordSpotting_model.pte", &bytes));
  const EtMethod& m = program.methods.at(0);
  EXPECT_EQ(m.values.size(), 289u);
  EXPECT_THAT(
      OperatorNames(m),
      ElementsAre("cortex_m::quantize_per_tensor.out", "cortex_m::quantized_depthwise_conv2d.out",
                  "dim_order_ops::_clone_dim_order.out", "cortex_m::quantized_conv2d.out",
                  "cortex_m::pad.out", "cortex_m::quantized_avg_pool2d.out",
                  "cortex_m::quantized_linear.out", "cortex_m::dequantize_per_tensor.out"));
  EXPECT_EQ(m.instructions.size(), 16u);
  EXPECT_THAT(m.inputs, ElementsAre(83));
  EXPECT_THAT(m.outputs, ElementsAre(283));
  const EtTensor& input = TensorAt(m, 83);
  EXPECT_EQ(input.dtype, DType::kFloat32);
  EXPECT_THAT(input.sizes, ElementsAre(1, 1, 49, 10));
  EXPECT_THAT(input.dim_order, ElementsAre(0, 2, 1, 3));  // channels last
  EXPECT_THAT(TensorAt(m, 283).sizes, ElementsAre(1, 12));
  // int8 and int32 constants, read with Ferry's dtypes.
  const EtTensor& weights = TensorAt(m, 36);
  EXPECT_EQ(weights.scalar_type, 1);
  EXPECT_EQ(EtScalarTypeName(weights.scalar_type), "int8");
  EXPECT_EQ(weights.dtype, DType::kInt8);
  EXPECT_THAT(weights.sizes, ElementsAre(64, 1, 10, 4));
  EXPECT_EQ(weights.byte_size, 64u * 10 * 4);
  EXPECT_EQ(weights.data.kind, EtDataKind::kConstantSegment);
  EXPECT_EQ(weights.data.index, 21u);
  EXPECT_EQ(weights.data.file_offset, program.extended_header->segment_base_offset + 5376);
  EXPECT_EQ(EtScalarTypeName(TensorAt(m, 37).scalar_type), "int32");
  ASSERT_EQ(program.segments.size(), 1u);
  EXPECT_EQ(program.segments[0].size, 39216u);
  EXPECT_EQ(program.constant_segment->offsets.size(), 64u);
}

TEST(ExecuTorchRealProgramTest, ADataFileIsNotAProgram) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::vector<uint8_t> bytes =
      ReadPte("executorch__extension_module_test_resources_linear.ptd");
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("this is an ExecuTorch data file (.ptd, file identifier "
                                 "\"FT01\"), not a program")));
}

// ---------------------------------------------------------------------------------------------
// Truncated and mutated real programs: a status or a program whose invariants hold, never a
// crash. Each input is copied into a buffer of exactly its size, so that ASan sees a read past it.

void ReadCopy(absl::Span<const uint8_t> bytes) {
  std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  absl::StatusOr<EtProgram> program = ReadExecuTorchProgram(copy);
  if (program.ok()) {
    CheckInvariants(*program, copy);
  } else {
    EXPECT_FALSE(program.status().message().empty());
  }
}

TEST(ExecuTorchCorruptionTest, EveryTruncationOfARealProgramIsHandled) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  for (const char* name : kRealPrograms) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = ReadPte(name);
    // Every prefix of the small files; a stride (plus the first and last bytes) for large ones.
    const size_t stride = bytes.size() <= 4096 ? 1 : 7;
    const bool has_header = bytes.size() >= 12 && std::memcmp(bytes.data() + 8, "eh00", 4) == 0;
    for (size_t n = 0; n < bytes.size(); ++n) {
      if (n % stride != 0 && n > 64 && n + 64 < bytes.size()) continue;
      ReadCopy(absl::MakeConstSpan(bytes.data(), n));
      // With a header that claims the full size the cut is caught before the FlatBuffer is
      // looked at; a header that agrees with the cut sends it to the verifier.
      if (has_header && n >= 40) {
        std::vector<uint8_t> agreeing(bytes.begin(), bytes.begin() + n);
        PutLE(agreeing, kProgramSizeAt, n, 8);
        PutLE(agreeing, kSegmentBaseAt, 0, 8);
        PutLE(agreeing, kSegmentDataSizeAt, 0, 8);
        ReadCopy(agreeing);
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(ExecuTorchCorruptionTest, TruncatedProgramsWithAHeaderAreRefused) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  std::vector<uint8_t> bytes = ReadPte("corey-cole__tests_models_multi.pte");
  for (size_t n :
       {size_t{12}, size_t{31}, size_t{100}, size_t{2239}, size_t{2304}, bytes.size() - 1}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    EXPECT_THAT(ReadExecuTorchProgram(cut), StatusIs(absl::StatusCode::kInvalidArgument, _)) << n;
  }
}

TEST(ExecuTorchCorruptionTest, SingleByteMutationsOfRealProgramsAreHandled) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  constexpr int kMutationsPerFile = 3000;
  for (const char* name : kRealPrograms) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = ReadPte(name);
    ASSERT_OK_AND_ASSIGN(EtProgram original, ReadExecuTorchProgram(bytes));
    // Mostly the FlatBuffer part: mutating constant data proves little.
    const size_t hot = std::min<size_t>(bytes.size(), original.program_size + 64);
    std::mt19937 rng(12345);
    int refused = 0;
    for (int i = 0; i < kMutationsPerFile; ++i) {
      std::vector<uint8_t> mutated = bytes;
      const size_t limit = (i % 10 == 0) ? bytes.size() : hot;
      const size_t at = std::uniform_int_distribution<size_t>(0, limit - 1)(rng);
      mutated[at] ^= static_cast<uint8_t>(std::uniform_int_distribution<int>(1, 255)(rng));
      absl::StatusOr<EtProgram> program = ReadExecuTorchProgram(mutated);
      if (program.ok()) {
        CheckInvariants(*program, mutated);
      } else {
        ++refused;
        EXPECT_FALSE(program.status().message().empty());
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(refused, 0);
  }
}

TEST(ExecuTorchHandMadeTest, TheValidProgramReads) {
  const std::vector<uint8_t> bytes = BuildPte();
  ASSERT_OK_AND_ASSIGN(EtProgram program, ReadExecuTorchProgram(bytes));
  CheckInvariants(program, bytes);
  ASSERT_TRUE(program.extended_header.has_value());
  const EtMethod& m = program.methods.at(0);
  EXPECT_EQ(m.values.size(), 6u);
  const EtTensor& constant = TensorAt(m, 4);
  EXPECT_EQ(constant.data.kind, EtDataKind::kConstantSegment);
  EXPECT_THAT(Floats(constant.data.bytes), ElementsAre(1.5f, 2.5f));
  ASSERT_EQ(m.delegates.size(), 1u);
  EXPECT_EQ(m.delegates[0].backend_id, "TestBackend");
  EXPECT_EQ(m.delegates[0].location, EtPayloadLocation::kInline);
  EXPECT_THAT(m.delegates[0].payload, ElementsAre(1, 2, 3, 4));
  ASSERT_EQ(m.delegates[0].compile_specs.size(), 1u);
  EXPECT_EQ(m.delegates[0].compile_specs[0].first, "target_device");
  EXPECT_EQ(m.delegates[0].compile_specs[0].second, "cpu");
  ASSERT_EQ(m.instructions.size(), 2u);
  EXPECT_EQ(m.instructions[1].kind, EtInstructionKind::kDelegateCall);
  EXPECT_THAT(m.values[5].items, ElementsAre(3));
}

TEST(ExecuTorchHandMadeTest, SegmentBeyondTheFile) {
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.segment_size = 4096; }),
              RefusedWith("segment 0 (4096 bytes at offset 0 from the segment base"));
  // Without an extended header nothing says where segments start.
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.extended_header = false; }),
              RefusedWith("segment 0 holds 8 bytes, but the file has no extended header"));
}

TEST(ExecuTorchHandMadeTest, ExporterArenasSumTheirTensors) {
  // Values 0 and 1 (float32[2], 8 bytes) are planned at offsets 0 and 16 of arena 1; value 2 is
  // moved to the last 8 bytes of arena 2; arena 3 holds nothing.
  ASSERT_OK_AND_ASSIGN(EtProgram program, ReadWith([](PteSpec& s) {
                         s.arena_sizes = {0, 48, 64, 100};
                         s.memory_id = 2;
                         s.memory_offset = 56;
                       }));
  const std::vector<ExporterArena> arenas = EtExporterArenas(program.methods[0]);
  ASSERT_EQ(arenas.size(), 3u);
  EXPECT_EQ(arenas[0].memory_id, 1u);
  EXPECT_EQ(arenas[0].declared_bytes, 48);
  EXPECT_EQ(arenas[0].used_bytes, 24);
  EXPECT_EQ(arenas[0].tensors, 2);
  EXPECT_EQ(arenas[1].memory_id, 2u);
  EXPECT_EQ(arenas[1].declared_bytes, 64);
  EXPECT_EQ(arenas[1].used_bytes, 64);
  EXPECT_EQ(arenas[1].tensors, 1);
  EXPECT_EQ(arenas[2].declared_bytes, 100);
  EXPECT_EQ(arenas[2].used_bytes, 0);
  EXPECT_EQ(arenas[2].tensors, 0);
  // One byte further is past the arena, and refused by the reader.
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.arena_sizes = {0, 48, 64};
                s.memory_id = 2;
                s.memory_offset = 57;
              }),
              RefusedWith("its 8 bytes at offset 57 of arena 2 run past the arena's 64 bytes"));
}

TEST(ExecuTorchHandMadeTest, MethodNames) {
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.method_names = {"forward", "forward"};
              }),
              RefusedWith("method \"forward\" is defined more than once"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.method_names = {}; }),
              RefusedWith("the program has no methods"));
  ASSERT_OK_AND_ASSIGN(EtProgram two, ReadWith([](PteSpec& s) { s.method_names = {"a", "b"}; }));
  EXPECT_THAT(two.method_names(), ElementsAre("a", "b"));
  EXPECT_NE(two.method("b"), nullptr);
  EXPECT_EQ(two.method("c"), nullptr);
}

TEST(ExecuTorchHandMadeTest, BadExtendedHeader) {
  const std::vector<uint8_t> good = BuildPte();
  const uint64_t program_size = good[kProgramSizeAt] | (good[kProgramSizeAt + 1] << 8);
  auto with = [&](size_t at, uint64_t value, size_t n) {
    std::vector<uint8_t> bytes = good;
    PutLE(bytes, at, value, n);
    return ReadExecuTorchProgram(bytes);
  };
  EXPECT_THAT(with(kProgramSizeAt, good.size() + 1, 8),
              RefusedWith(absl::StrCat("the extended header says the program is ", good.size() + 1,
                                       " bytes, but the file is ", good.size(),
                                       " bytes: it is truncated")));
  EXPECT_THAT(with(kProgramSizeAt, 20, 8),
              RefusedWith("program_size, 20 bytes, does not cover the header itself (40 bytes)"));
  EXPECT_THAT(with(kLengthAt, 16, 4),
              RefusedWith("the extended header's length is 16 bytes, less than the 24 bytes of "
                          "its fields"));
  EXPECT_THAT(with(kLengthAt, 1u << 30, 4), RefusedWith("runs past the end of the file"));
  EXPECT_THAT(with(kSegmentBaseAt, good.size() + 8, 8),
              RefusedWith("segment_base_offset, " + std::to_string(good.size() + 8) +
                          ", is past the end of the file"));
  EXPECT_THAT(with(kSegmentBaseAt, 64, 8), RefusedWith("lies inside the program"));
  EXPECT_THAT(with(kSegmentDataSizeAt, std::numeric_limits<uint64_t>::max(), 8),
              RefusedWith("the extended header's segment data"));
  // A smaller program_size cuts the FlatBuffer short: the verifier refuses it.
  EXPECT_THAT(with(kProgramSizeAt, program_size - 16, 8),
              RefusedWith("the FlatBuffers verifier rejected"));
  // The header alone, cut short.
  std::vector<uint8_t> cut(good.begin(), good.begin() + 20);
  EXPECT_THAT(ReadExecuTorchProgram(cut), RefusedWith("the extended header is cut short"));
}

TEST(ExecuTorchHandMadeTest, NotAnExecuTorchProgram) {
  std::vector<uint8_t> bytes = BuildPte();
  EXPECT_THAT(ReadExecuTorchProgram({}), RefusedWith("the file is 0 bytes, too short"));
  std::memcpy(bytes.data() + 4, "FRRY", 4);
  EXPECT_THAT(ReadExecuTorchProgram(bytes), RefusedWith("this is a Ferry program"));
  std::memcpy(bytes.data() + 4, "ET11", 4);
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("ExecuTorch program format \"ET11\" is not supported")));
  std::memcpy(bytes.data() + 4, "PK\x03\x04", 4);
  EXPECT_THAT(ReadExecuTorchProgram(bytes), RefusedWith("not an ExecuTorch program"));
  std::memcpy(bytes.data() + 4, "ET1\x80", 4);  // a damaged identifier, not a version
  EXPECT_THAT(ReadExecuTorchProgram(bytes), RefusedWith("not an ExecuTorch program"));
}

TEST(ExecuTorchHandMadeTest, UnalignedBytesAreRefused) {
  std::vector<uint8_t> shifted = BuildPte();
  shifted.insert(shifted.begin(), 0);
  EXPECT_THAT(ReadExecuTorchProgram(absl::MakeConstSpan(shifted).subspan(1)),
              RefusedWith("not 8-byte aligned in memory"));
}

TEST(ExecuTorchHandMadeTest, DamagedRootOffsetIsRefusedByTheVerifier) {
  std::vector<uint8_t> bytes = BuildPte();
  PutLE(bytes, 0, 0x7ffffff0, 4);
  EXPECT_THAT(ReadExecuTorchProgram(bytes), RefusedWith(" bytes at the root offset (bytes 0..3)"));
}

TEST(ExecuTorchHandMadeTest, NamesOfKinds) {
  EXPECT_EQ(EtScalarTypeName(6), "float32");
  EXPECT_EQ(EtScalarTypeName(4), "int64");
  EXPECT_EQ(EtScalarTypeName(-3), "scalar type -3");
  EXPECT_STREQ(EtValueKindName(EtValueKind::kOptionalTensorList), "optional tensor list");
  EXPECT_STREQ(EtInstructionKindName(EtInstructionKind::kJumpFalse), "jump if false");
  EXPECT_STREQ(EtDataKindName(EtDataKind::kExternal), "external");
  EXPECT_EQ((EtOperator{"aten::add", "out"}.FullName()), "aten::add.out");
  EXPECT_EQ((EtOperator{"aten::relu", ""}.FullName()), "aten::relu");
}

}  // namespace
}  // namespace ferry
