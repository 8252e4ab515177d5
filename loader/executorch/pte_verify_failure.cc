// Where the FlatBuffers verifier rejects an ExecuTorch program: the walk of VerifierPath
// (loader/internal/verifier_path.h) over the program schema, descending into methods, their
// values (tensors field by field), chains, instructions, operators and delegates.

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "ferry/base/text.h"
#include "ferry/loader/executorch/internal/pte_read.h"
#include "ferry/loader/internal/verifier_path.h"

namespace ferry::internal::pte {
namespace {

using Where = VerifierPath::Where;

Where InTensor(const VerifierPath& at, const fb::Tensor* tensor, std::string*) {
  using T = fb::Tensor;
  Where where = at.Plain(tensor, T::VT_SIZES, "sizes", &T::sizes);
  if (!where) where = at.Plain(tensor, T::VT_DIM_ORDER, "dim_order", &T::dim_order);
  if (!where) {
    where = at.OneTable(tensor, T::VT_ALLOCATION_INFO, "allocation_info", &T::allocation_info);
  }
  if (!where) {
    where =
        at.OneTable(tensor, T::VT_EXTRA_TENSOR_INFO, "extra_tensor_info", &T::extra_tensor_info);
  }
  return where;
}

Where InValue(const VerifierPath& at, const fb::EValue* value, std::string* label) {
  *label = at.UnionLabel(value, fb::EValue::VT_VAL_TYPE, &fb::EValue::val_type,
                         &fb::EnumNameKernelTypes);
  if (!at.ScalarField<uint8_t>(value, fb::EValue::VT_VAL_TYPE)) return "val_type";
  if (!at.Offset(value, fb::EValue::VT_VAL)) return "val (its offset)";
  const fb::Tensor* tensor = value->val_as_Tensor();
  if (tensor == nullptr || !at.TableStart(tensor)) return std::nullopt;
  std::string unused;
  return InTensor(at, tensor, &unused);
}

Where InInstruction(const VerifierPath& at, const fb::Instruction* in, std::string* label) {
  *label = at.UnionLabel(in, fb::Instruction::VT_INSTR_ARGS_TYPE, &fb::Instruction::instr_args_type,
                         &fb::EnumNameInstructionArguments);
  if (!at.ScalarField<uint8_t>(in, fb::Instruction::VT_INSTR_ARGS_TYPE)) {
    return "instr_args_type";
  }
  if (!at.Offset(in, fb::Instruction::VT_INSTR_ARGS)) return "instr_args (its offset)";
  if (const fb::KernelCall* call = in->instr_args_as_KernelCall();
      call != nullptr && at.TableStart(call)) {
    return at.Plain(call, fb::KernelCall::VT_ARGS, "args", &fb::KernelCall::args);
  }
  if (const fb::DelegateCall* call = in->instr_args_as_DelegateCall();
      call != nullptr && at.TableStart(call)) {
    Where where = at.Plain(call, fb::DelegateCall::VT_ARGS, "args", &fb::DelegateCall::args);
    if (!where) {
      where = at.Tables(call, fb::DelegateCall::VT_SCRATCH, "scratch", &fb::DelegateCall::scratch);
    }
    return where;
  }
  return std::nullopt;
}

Where InChain(const VerifierPath& at, const fb::Chain* chain, std::string*) {
  using C = fb::Chain;
  Where where = at.Plain(chain, C::VT_INPUTS, "inputs", &C::inputs);
  if (!where) where = at.Plain(chain, C::VT_OUTPUTS, "outputs", &C::outputs);
  if (!where) {
    where = at.Tables(chain, C::VT_INSTRUCTIONS, "instructions", &C::instructions, InInstruction);
  }
  if (!where) where = at.Tables(chain, C::VT_STACKTRACE, "stacktrace", &C::stacktrace);
  return where;
}

Where InOperator(const VerifierPath& at, const fb::Operator* op, std::string*) {
  Where where = at.Plain(op, fb::Operator::VT_NAME, "name", &fb::Operator::name);
  if (!where) where = at.Plain(op, fb::Operator::VT_OVERLOAD, "overload", &fb::Operator::overload);
  return where;
}

Where InDelegate(const VerifierPath& at, const fb::BackendDelegate* d, std::string*) {
  using D = fb::BackendDelegate;
  Where where = at.Plain(d, D::VT_ID, "id", &D::id);
  if (!where) where = at.OneTable(d, D::VT_PROCESSED, "processed", &D::processed);
  if (!where) where = at.Tables(d, D::VT_COMPILE_SPECS, "compile_specs", &D::compile_specs);
  return where;
}

Where InPlan(const VerifierPath& at, const fb::ExecutionPlan* plan, std::string* label) {
  using P = fb::ExecutionPlan;
  Where where = at.Plain(plan, P::VT_NAME, "name", &P::name);
  if (where) return where;
  if (plan->name() != nullptr) {
    *label = absl::StrCat(" (method \"", SanitizeName(View(plan->name())), "\")");
  }
  where =
      at.OneTable(plan, P::VT_CONTAINER_META_TYPE, "container_meta_type", &P::container_meta_type);
  if (!where) where = at.Tables(plan, P::VT_VALUES, "values", &P::values, InValue);
  if (!where) where = at.Plain(plan, P::VT_INPUTS, "inputs", &P::inputs);
  if (!where) where = at.Plain(plan, P::VT_OUTPUTS, "outputs", &P::outputs);
  if (!where) where = at.Tables(plan, P::VT_CHAINS, "chains", &P::chains, InChain);
  if (!where) where = at.Tables(plan, P::VT_OPERATORS, "operators", &P::operators, InOperator);
  if (!where) where = at.Tables(plan, P::VT_DELEGATES, "delegates", &P::delegates, InDelegate);
  if (!where) {
    where = at.Plain(plan, P::VT_NON_CONST_BUFFER_SIZES, "non_const_buffer_sizes",
                     &P::non_const_buffer_sizes);
  }
  if (!where) {
    where = at.Tables(plan, P::VT_NON_CONST_BUFFER_DEVICE, "non_const_buffer_device",
                      &P::non_const_buffer_device);
  }
  return where;
}

}  // namespace

std::optional<std::string> LocateVerifierFailure(absl::Span<const uint8_t> program,
                                                 size_t max_depth, size_t max_tables) {
  const VerifierPath at(program, max_depth, max_tables);
  if (!at.RootOffset()) return "the root offset (bytes 0..3)";
  using P = fb::Program;
  const P* root = fb::GetProgram(program.data());
  if (!at.TableStart(root)) return "the Program table's header";
  if (!at.ScalarField<uint32_t>(root, P::VT_VERSION)) return "version";
  Where where = at.Tables(root, P::VT_EXECUTION_PLAN, "execution_plan", &P::execution_plan, InPlan);
  if (!where) {
    where = at.Tables(root, P::VT_CONSTANT_BUFFER, "constant_buffer", &P::constant_buffer);
  }
  if (!where) {
    where = at.Tables(root, P::VT_BACKEND_DELEGATE_DATA, "backend_delegate_data",
                      &P::backend_delegate_data);
  }
  if (!where) where = at.Tables(root, P::VT_SEGMENTS, "segments", &P::segments);
  if (!where) {
    where = at.OneTable(root, P::VT_CONSTANT_SEGMENT, "constant_segment", &P::constant_segment);
  }
  if (!where) {
    where = at.Tables(root, P::VT_MUTABLE_DATA_SEGMENTS, "mutable_data_segments",
                      &P::mutable_data_segments);
  }
  if (!where) where = at.Tables(root, P::VT_NAMED_DATA, "named_data", &P::named_data);
  return where;
}

}  // namespace ferry::internal::pte
