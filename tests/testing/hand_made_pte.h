// A small hand-made ExecuTorch program (forward: out = a + b, a float32[2] constant in a segment,
// a delegate with an inline payload) built straight with the generated FlatBuffers API, with one
// knob per way to break it (PteSpec), for the tests of the .pte reader:
//
//   EXPECT_THAT(ReadWith([](PteSpec& s) { s.op_index = 5; }), RefusedWith("operator 5"));
//
// Unlike pte_writer.h, it writes an extended header and segments, and can write what no writer
// would (a value without its union member, a jump out of the chain).
#ifndef FERRY_TESTS_TESTING_HAND_MADE_PTE_H_
#define FERRY_TESTS_TESTING_HAND_MADE_PTE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "flatbuffers/flatbuffers.h"
#include "gmock/gmock.h"
#include "loader/executorch/schema/executorch_program_generated.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {

namespace fb = ::ferry::et::fbs;

// Writes `value`'s low `n` bytes at `at`, little-endian.
inline void PutLE(std::vector<uint8_t>& bytes, size_t at, uint64_t value, size_t n) {
  for (size_t i = 0; i < n; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

// Offsets of the extended header's fields in a file.
inline constexpr size_t kLengthAt = 12;
inline constexpr size_t kProgramSizeAt = 16;
inline constexpr size_t kSegmentBaseAt = 24;
inline constexpr size_t kSegmentDataSizeAt = 32;

// Hand-made programs. A small valid one (forward: out = a + b, plus a float32[2] constant in a
// segment and a delegate with an inline payload), and one knob per way to break it.

struct PteSpec {
  std::vector<int32_t> inputs = {0, 1};
  std::vector<int32_t> outputs = {2};
  int32_t op_index = 0;
  std::vector<int32_t> args = {0, 1, 3, 2, 2};
  int32_t delegate_index = 0;
  std::vector<int32_t> delegate_args = {2, 4, 2};
  fb::DataLocation payload_location = fb::DataLocation::INLINE;
  uint32_t payload_index = 0;
  int8_t scalar_type = static_cast<int8_t>(fb::ScalarType::FLOAT);  // of the constant
  std::vector<int32_t> sizes = {2};                                 // of the constant
  std::vector<uint8_t> dim_order = {0};                             // of the constant
  uint32_t constant_index = 1;
  std::vector<uint64_t> constant_offsets = {0, 0};
  uint32_t memory_id = 1;       // of value 2
  uint32_t memory_offset = 32;  // of value 2
  std::vector<int64_t> arena_sizes = {0, 48};
  // ExecutionPlan.non_const_buffer_device, written as given: (buffer_idx, device_type,
  // device_index); none when empty.
  struct ArenaDevice {
    int32_t buffer_idx;
    int8_t device_type;
    int8_t device_index;
  };
  std::vector<ArenaDevice> arena_devices;
  std::vector<int64_t> int_list = {3};  // value 5
  bool empty_value_3 = false;           // value 3 without its union member
  int chains = 1;
  int32_t jump_destination = -1;  // adds a jump instruction when >= 0
  std::vector<std::string> method_names = {"forward"};
  std::string op_name = "aten::add";
  std::string backend_id = "TestBackend";
  uint64_t segment_size = 8;
  bool extended_header = true;
};

// The FlatBuffer part of a program built from `spec`.
inline std::vector<uint8_t> BuildFlatBuffer(const PteSpec& spec) {
  flatbuffers::FlatBufferBuilder fbb;
  auto planned = [&](uint32_t id, uint32_t offset) {
    return fb::CreateAllocationDetails(fbb, id, offset, 0);
  };
  auto float_tensor = [&](std::vector<int32_t> sizes, uint32_t id, uint32_t offset) {
    std::vector<uint8_t> order(sizes.size());
    for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<uint8_t>(d);
    return fb::CreateTensorDirect(fbb, fb::ScalarType::FLOAT, 0, &sizes, &order, false, 0,
                                  planned(id, offset));
  };
  std::vector<flatbuffers::Offset<fb::ExecutionPlan>> plans;
  for (const std::string& name : spec.method_names) {
    std::vector<flatbuffers::Offset<fb::EValue>> values;
    values.push_back(
        fb::CreateEValue(fbb, fb::KernelTypes::Tensor, float_tensor({2}, 1, 0).Union()));
    values.push_back(
        fb::CreateEValue(fbb, fb::KernelTypes::Tensor, float_tensor({2}, 1, 16).Union()));
    values.push_back(
        fb::CreateEValue(fbb, fb::KernelTypes::Tensor,
                         float_tensor({2}, spec.memory_id, spec.memory_offset).Union()));
    values.push_back(spec.empty_value_3 ? fb::CreateEValue(fbb, fb::KernelTypes::Int, 0)
                                        : fb::CreateEValue(fbb, fb::KernelTypes::Int,
                                                           fb::CreateInt(fbb, 1).Union()));
    values.push_back(fb::CreateEValue(
        fbb, fb::KernelTypes::Tensor,
        fb::CreateTensorDirect(fbb, static_cast<fb::ScalarType>(spec.scalar_type), 0, &spec.sizes,
                               &spec.dim_order, false, spec.constant_index)
            .Union()));
    values.push_back(fb::CreateEValue(fbb, fb::KernelTypes::IntList,
                                      fb::CreateIntListDirect(fbb, &spec.int_list).Union()));
    std::vector<flatbuffers::Offset<fb::Instruction>> instructions;
    instructions.push_back(
        fb::CreateInstruction(fbb, fb::InstructionArguments::KernelCall,
                              fb::CreateKernelCallDirect(fbb, spec.op_index, &spec.args).Union()));
    instructions.push_back(fb::CreateInstruction(
        fbb, fb::InstructionArguments::DelegateCall,
        fb::CreateDelegateCallDirect(fbb, spec.delegate_index, &spec.delegate_args).Union()));
    if (spec.jump_destination >= 0) {
      instructions.push_back(
          fb::CreateInstruction(fbb, fb::InstructionArguments::JumpFalseCall,
                                fb::CreateJumpFalseCall(fbb, 4, spec.jump_destination).Union()));
    }
    std::vector<flatbuffers::Offset<fb::Chain>> chains;
    for (int c = 0; c < spec.chains; ++c) {
      chains.push_back(fb::CreateChainDirect(fbb, nullptr, nullptr, &instructions));
    }
    std::vector<flatbuffers::Offset<fb::Operator>> operators = {
        fb::CreateOperatorDirect(fbb, spec.op_name.c_str(), "out")};
    const std::vector<uint8_t> spec_value = {'c', 'p', 'u'};
    std::vector<flatbuffers::Offset<fb::CompileSpec>> compile_specs = {
        fb::CreateCompileSpecDirect(fbb, "target_device", &spec_value)};
    std::vector<flatbuffers::Offset<fb::BackendDelegate>> delegates = {
        fb::CreateBackendDelegateDirect(
            fbb, spec.backend_id.c_str(),
            fb::CreateBackendDelegateDataReference(fbb, spec.payload_location, spec.payload_index),
            &compile_specs)};
    std::vector<flatbuffers::Offset<fb::NonConstBufferDevice>> arena_devices;
    for (const PteSpec::ArenaDevice& d : spec.arena_devices) {
      arena_devices.push_back(fb::CreateNonConstBufferDevice(
          fbb, d.buffer_idx, static_cast<fb::DeviceType>(d.device_type), d.device_index));
    }
    plans.push_back(fb::CreateExecutionPlanDirect(
        fbb, name.c_str(), 0, &values, &spec.inputs, &spec.outputs, &chains, &operators,
        &delegates, &spec.arena_sizes, arena_devices.empty() ? nullptr : &arena_devices));
  }
  const std::vector<uint8_t> payload = {1, 2, 3, 4};
  std::vector<flatbuffers::Offset<fb::BackendDelegateInlineData>> inline_data = {
      fb::CreateBackendDelegateInlineDataDirect(fbb, &payload)};
  std::vector<flatbuffers::Offset<fb::DataSegment>> segments = {
      fb::CreateDataSegment(fbb, 0, spec.segment_size)};
  auto constant_segment = fb::CreateSubsegmentOffsetsDirect(fbb, 0, &spec.constant_offsets);
  fb::FinishProgramBuffer(fbb, fb::CreateProgramDirect(fbb, 0, &plans, nullptr, &inline_data,
                                                       &segments, constant_segment));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

// The whole file: the FlatBuffer with a 32-byte extended header inserted after the identifier
// (as ExecuTorch's writer does), padded to 16, then the segment: float32 {1.5, 2.5}.
inline std::vector<uint8_t> BuildPte(const PteSpec& spec = {}) {
  std::vector<uint8_t> fb_bytes = BuildFlatBuffer(spec);
  std::vector<uint8_t> out;
  if (!spec.extended_header) return fb_bytes;
  out.assign(fb_bytes.begin(), fb_bytes.begin() + 8);
  uint32_t root = 0;
  std::memcpy(&root, fb_bytes.data(), sizeof(root));
  PutLE(out, 0, root + 32, 4);  // the root table moves with everything after the identifier
  out.resize(8 + 32);
  std::memcpy(out.data() + 8, "eh00", 4);
  out.insert(out.end(), fb_bytes.begin() + 8, fb_bytes.end());
  const uint64_t program_size = out.size();
  out.resize((out.size() + 15) / 16 * 16, 0);
  const uint64_t base = out.size();
  const float data[2] = {1.5f, 2.5f};
  out.insert(out.end(), reinterpret_cast<const uint8_t*>(data),
             reinterpret_cast<const uint8_t*>(data) + sizeof(data));
  PutLE(out, kLengthAt, 32, 4);
  PutLE(out, kProgramSizeAt, program_size, 8);
  PutLE(out, kSegmentBaseAt, base, 8);
  PutLE(out, kSegmentDataSizeAt, sizeof(data), 8);
  return out;
}

inline absl::StatusOr<EtProgram> Read(const PteSpec& spec) {
  const std::vector<uint8_t> bytes = BuildPte(spec);
  absl::StatusOr<EtProgram> program = ReadExecuTorchProgram(bytes);
  // The spans point into `bytes`, which dies here: tests look at everything but spans.
  return program;
}

template <typename Edit>
absl::StatusOr<EtProgram> ReadWith(Edit edit) {
  PteSpec spec;
  edit(spec);
  return Read(spec);
}

MATCHER_P(RefusedWith, text, "") {
  return ::testing::ExplainMatchResult(
      StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr(text)), arg, result_listener);
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_HAND_MADE_PTE_H_
