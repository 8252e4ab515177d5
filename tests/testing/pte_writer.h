// Writes ExecuTorch program files (.pte) for tests, from the plain data the reader produces
// (loader/executorch.h), so that a hand-made program goes through the file format, the reader and
// the import exactly as an exported one does.
//
//   EtProgram p = ...;                        // methods with values, operators, kernel calls
//   std::vector<uint8_t> bytes = WritePte(p);
//   auto program = Program::FromBytes(bytes);
//
// What is written: per method its values (None, Int, Bool, Double, String, Tensor, IntList,
// DoubleList, BoolList, TensorList, OptionalTensorList), inputs, outputs, operators and one chain
// of its instructions (kernel calls, frees, moves); tensors with data (any EtDataKind other than
// kNone) have their bytes in the legacy inline constant buffer. No extended header, segments,
// delegates or memory plan. Nothing is checked: a test may write a program the reader refuses.
#ifndef FERRY_TESTS_TESTING_PTE_WRITER_H_
#define FERRY_TESTS_TESTING_PTE_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/loader/executorch.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/schema/executorch_program_generated.h"

namespace ferry::testing {

inline std::vector<uint8_t> WritePte(const EtProgram& program) {
  namespace fb = ::ferry::et::fbs;
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  const std::vector<uint8_t> reserved;
  buffers.push_back(fb::CreateBufferDirect(fbb, &reserved));
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
          type = fb::KernelTypes::Tensor;
          val = fb::CreateTensorDirect(fbb, static_cast<fb::ScalarType>(t.scalar_type), 0, &sizes,
                                       &order, t.requires_grad, index)
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
        default:
          break;  // delegates and jumps are not written
      }
    }
    std::vector<flatbuffers::Offset<fb::Chain>> chains = {
        fb::CreateChainDirect(fbb, &m.inputs, &m.outputs, &instructions)};
    std::vector<flatbuffers::Offset<fb::Operator>> operators;
    for (const EtOperator& op : m.operators) {
      operators.push_back(fb::CreateOperatorDirect(fbb, op.name.c_str(), op.overload.c_str()));
    }
    const std::vector<int64_t> arenas = {0};
    plans.push_back(fb::CreateExecutionPlanDirect(fbb, m.name.c_str(), 0, &values, &m.inputs,
                                                  &m.outputs, &chains, &operators, nullptr,
                                                  &arenas));
  }
  fb::FinishProgramBuffer(fbb, fb::CreateProgramDirect(fbb, 0, &plans, &buffers));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_PTE_WRITER_H_
