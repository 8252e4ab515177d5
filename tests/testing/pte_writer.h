// Writes ExecuTorch program files (.pte) for tests, from the plain data the reader produces
// (loader/executorch/pte_reader.h), so that a hand-made program goes through the file format, the
// reader and the import exactly as an exported one does.
//
//   EtProgram p = ...;                        // methods with values, operators, kernel calls
//   std::vector<uint8_t> bytes = WritePte(p);
//   auto program = Program::FromBytes(bytes);
//
// What is written: per method its values (None, Int, Bool, Double, String, Tensor, IntList,
// DoubleList, BoolList, TensorList, OptionalTensorList), inputs, outputs, operators, delegates
// (backend id, compile specs, the payload inline in Program.backend_delegate_data) and one chain
// of its instructions (kernel calls, delegate calls, frees, moves); tensors with data (any
// EtDataKind other than kNone) have their bytes in the legacy inline constant buffer; a tensor
// with a device_type other than 0 carries an ExtraTensorInfo with its device. The memory plan as
// given: a tensor's allocation (memory_id, offset), the method's non_const_buffer_sizes ({0}, no
// arenas, when empty) and non_const_buffer_devices. No extended header or segments. Nothing is
// checked: a test may write a program the reader refuses.
#ifndef FERRY_TESTS_TESTING_PTE_WRITER_H_
#define FERRY_TESTS_TESTING_PTE_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/program.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/executorch/schema/executorch_program_generated.h"

namespace ferry::testing {

inline std::vector<uint8_t> WritePte(const EtProgram& program) {
  namespace fb = ::ferry::et::fbs;
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  const std::vector<uint8_t> reserved;
  buffers.push_back(fb::CreateBufferDirect(fbb, &reserved));
  std::vector<flatbuffers::Offset<fb::BackendDelegateInlineData>> delegate_data;
  std::vector<flatbuffers::Offset<fb::ExecutionPlan>> plans;
  for (const EtMethod& m : program.methods) {
    std::vector<flatbuffers::Offset<fb::EValue>> values;
    for (const EtValue& v : m.values) {
      flatbuffers::Offset<void> val;
      fb::KernelTypes type = fb::KernelTypes::Null;
      switch (v.kind) {
        case EtValueKind::kNull:
          type = fb::KernelTypes::Null;
          val = fb::CreateNull(fbb).Union();
          break;
        case EtValueKind::kInt:
          type = fb::KernelTypes::Int;
          val = fb::CreateInt(fbb, v.int_value).Union();
          break;
        case EtValueKind::kBool:
          type = fb::KernelTypes::Bool;
          val = fb::CreateBool(fbb, v.bool_value).Union();
          break;
        case EtValueKind::kDouble:
          type = fb::KernelTypes::Double;
          val = fb::CreateDouble(fbb, v.double_value).Union();
          break;
        case EtValueKind::kString:
          type = fb::KernelTypes::String;
          val = fb::CreateStringDirect(fbb, v.string_value.c_str()).Union();
          break;
        case EtValueKind::kTensor: {
          const EtTensor& t = v.tensor;
          std::vector<int32_t> sizes(t.sizes.begin(), t.sizes.end());
          std::vector<uint8_t> order = t.dim_order;
          if (order.empty()) {
            for (size_t d = 0; d < sizes.size(); ++d) order.push_back(static_cast<uint8_t>(d));
          }
          uint32_t index = 0;
          if (t.data.kind != EtDataKind::kNone) {
            const std::vector<uint8_t> bytes(t.data.bytes.begin(), t.data.bytes.end());
            index = static_cast<uint32_t>(buffers.size());
            buffers.push_back(fb::CreateBufferDirect(fbb, &bytes));
          }
          flatbuffers::Offset<fb::ExtraTensorInfo> extra = 0;
          if (t.device_type != 0) {
            extra = fb::CreateExtraTensorInfoDirect(
                fbb, 0, nullptr, fb::TensorDataLocation::CONSTANT_SEGMENT,
                static_cast<fb::DeviceType>(t.device_type), t.device_index);
          }
          flatbuffers::Offset<fb::AllocationDetails> allocation = 0;
          if (t.allocation.has_value()) {
            allocation = fb::CreateAllocationDetails(
                fbb, t.allocation->memory_id, static_cast<uint32_t>(t.allocation->offset),
                static_cast<uint32_t>(t.allocation->offset >> 32));
          }
          type = fb::KernelTypes::Tensor;
          val = fb::CreateTensorDirect(fbb, static_cast<fb::ScalarType>(t.scalar_type), 0, &sizes,
                                       &order, t.requires_grad, index, allocation, 0,
                                       fb::TensorShapeDynamism::STATIC, extra)
                    .Union();
          break;
        }
        case EtValueKind::kIntList: {
          std::vector<int64_t> items(v.items.begin(), v.items.end());
          type = fb::KernelTypes::IntList;
          val = fb::CreateIntListDirect(fbb, &items).Union();
          break;
        }
        case EtValueKind::kDoubleList:
          type = fb::KernelTypes::DoubleList;
          val = fb::CreateDoubleListDirect(fbb, &v.doubles).Union();
          break;
        case EtValueKind::kBoolList: {
          std::vector<uint8_t> items(v.bools.begin(), v.bools.end());
          type = fb::KernelTypes::BoolList;
          val = fb::CreateBoolList(fbb, fbb.CreateVector(items)).Union();
          break;
        }
        case EtValueKind::kTensorList:
          type = fb::KernelTypes::TensorList;
          val = fb::CreateTensorListDirect(fbb, &v.items).Union();
          break;
        case EtValueKind::kOptionalTensorList:
          type = fb::KernelTypes::OptionalTensorList;
          val = fb::CreateOptionalTensorListDirect(fbb, &v.items).Union();
          break;
      }
      values.push_back(fb::CreateEValue(fbb, type, val));
    }
    std::vector<flatbuffers::Offset<fb::Instruction>> instructions;
    for (const EtInstruction& i : m.instructions) {
      switch (i.kind) {
        case EtInstructionKind::kKernelCall:
          instructions.push_back(fb::CreateInstruction(
              fbb, fb::InstructionArguments::KernelCall,
              fb::CreateKernelCallDirect(fbb, i.op_index, &i.args).Union()));
          break;
        case EtInstructionKind::kFree:
          instructions.push_back(fb::CreateInstruction(
              fbb, fb::InstructionArguments::FreeCall, fb::CreateFreeCall(fbb, i.free_value).Union()));
          break;
        case EtInstructionKind::kMove:
          instructions.push_back(fb::CreateInstruction(
              fbb, fb::InstructionArguments::MoveCall,
              fb::CreateMoveCall(fbb, i.move_from, i.move_to).Union()));
          break;
        case EtInstructionKind::kDelegateCall:
          instructions.push_back(fb::CreateInstruction(
              fbb, fb::InstructionArguments::DelegateCall,
              fb::CreateDelegateCallDirect(fbb, i.delegate_index, &i.args).Union()));
          break;
        default:
          break;  // jumps are not written
      }
    }
    std::vector<flatbuffers::Offset<fb::Chain>> chains = {
        fb::CreateChainDirect(fbb, &m.inputs, &m.outputs, &instructions)};
    std::vector<flatbuffers::Offset<fb::Operator>> operators;
    for (const EtOperator& op : m.operators) {
      operators.push_back(fb::CreateOperatorDirect(fbb, op.name.c_str(), op.overload.c_str()));
    }
    std::vector<flatbuffers::Offset<fb::BackendDelegate>> delegates;
    for (const EtDelegate& d : m.delegates) {
      const std::vector<uint8_t> payload(d.payload.begin(), d.payload.end());
      const uint32_t index = static_cast<uint32_t>(delegate_data.size());
      delegate_data.push_back(fb::CreateBackendDelegateInlineDataDirect(fbb, &payload));
      std::vector<flatbuffers::Offset<fb::CompileSpec>> specs;
      for (const auto& [key, value] : d.compile_specs) {
        const std::vector<uint8_t> bytes(value.begin(), value.end());
        specs.push_back(fb::CreateCompileSpecDirect(fbb, key.c_str(), &bytes));
      }
      delegates.push_back(fb::CreateBackendDelegateDirect(
          fbb, d.backend_id.c_str(),
          fb::CreateBackendDelegateDataReference(fbb, fb::DataLocation::INLINE, index), &specs));
    }
    const std::vector<int64_t> arenas =
        m.non_const_buffer_sizes.empty() ? std::vector<int64_t>{0} : m.non_const_buffer_sizes;
    std::vector<flatbuffers::Offset<fb::NonConstBufferDevice>> arena_devices;
    for (const EtBufferDevice& d : m.non_const_buffer_devices) {
      arena_devices.push_back(fb::CreateNonConstBufferDevice(
          fbb, static_cast<int32_t>(d.buffer_idx), static_cast<fb::DeviceType>(d.device_type),
          d.device_index));
    }
    plans.push_back(fb::CreateExecutionPlanDirect(
        fbb, m.name.c_str(), 0, &values, &m.inputs, &m.outputs, &chains, &operators, &delegates,
        &arenas, arena_devices.empty() ? nullptr : &arena_devices));
  }
  fb::FinishProgramBuffer(
      fbb, fb::CreateProgramDirect(fbb, 0, &plans, &buffers,
                                   delegate_data.empty() ? nullptr : &delegate_data));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

// `program` written as a .pte file and loaded from its bytes, as Program::Load loads a file.
inline absl::StatusOr<std::unique_ptr<Program>> ThroughFile(const EtProgram& program) {
  return Program::FromBytes(WritePte(program));
}

// Method `name`'s status in a loaded program: the load's error, else the method's (the import's
// reason, for a method it refused).
inline absl::Status MethodStatus(const absl::StatusOr<std::unique_ptr<Program>>& program,
                                 const std::string& name = "forward") {
  if (!program.ok()) return program.status();
  return (*program)->method(name).status();
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_PTE_WRITER_H_
