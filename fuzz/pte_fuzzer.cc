// libFuzzer target: the input is an ExecuTorch program (.pte), read by ReadExecuTorchProgram; an
// accepted program is walked whole (every index followed, every span read), so that anything the
// reader let through that points outside the input or the program faults under ASan. Seeds: the
// real programs of ../shared/pte when that folder exists. An accepted program is then mapped onto
// MethodDefs (ImportExecuTorchProgram), whose constants are read whole. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/types/span.h"
#include "ferry/loader/executorch/importer.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/model/checks.h"

namespace {

// Reads every byte of `span` (so ASan checks it lies in live memory).
uint8_t Touch(absl::Span<const uint8_t> span) {
  uint8_t x = 0;
  for (uint8_t b : span) x ^= b;
  return x;
}

// Whether every index the program holds is in range (the reader promises it; a false here
// aborts, so libFuzzer saves the input).
bool InRange(int32_t v, size_t n) { return v >= 0 && static_cast<size_t>(v) < n; }

void Walk(const ferry::EtProgram& program) {
  volatile uint8_t sink = 0;
  for (const ferry::EtSegment& segment : program.segments) sink = sink ^ Touch(segment.bytes);
  for (const ferry::EtNamedData& named : program.named_data) sink = sink ^ Touch(named.bytes);
  for (const ferry::EtMethod& method : program.methods) {
    const size_t nv = method.values.size();
    bool ok = true;
    for (int32_t v : method.inputs) ok = ok && InRange(v, nv);
    for (int32_t v : method.outputs) ok = ok && InRange(v, nv);
    for (const ferry::EtValue& value : method.values) {
      sink = sink ^ Touch(value.tensor.data.bytes);
      if (value.kind == ferry::EtValueKind::kIntList || value.kind == ferry::EtValueKind::kTensorList) {
        for (int32_t item : value.items) ok = ok && InRange(item, nv);
      }
    }
    for (const ferry::EtInstruction& instruction : method.instructions) {
      for (int32_t a : instruction.args) ok = ok && InRange(a, nv);
      if (instruction.kind == ferry::EtInstructionKind::kKernelCall) {
        ok = ok && InRange(instruction.op_index, method.operators.size());
      } else if (instruction.kind == ferry::EtInstructionKind::kDelegateCall) {
        ok = ok && InRange(instruction.delegate_index, method.delegates.size());
      }
    }
    for (const ferry::EtDelegate& delegate : method.delegates) sink = sink ^ Touch(delegate.payload);
    if (!ok) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 20)) return 0;
  // The reader needs 8-byte aligned bytes; a buffer of exactly `size` bytes so that reading past
  // the input faults.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  absl::StatusOr<ferry::EtProgram> program =
      ferry::ReadExecuTorchProgram(absl::MakeConstSpan(copy.get(), size));
  if (!program.ok()) return 0;
  Walk(*program);
  absl::StatusOr<ferry::EtImport> imported = ferry::ImportExecuTorchProgram(*program);
  if (imported.ok()) {
    // What the importer builds must be a valid model: a method that breaks an invariant would
    // reach placement and the executor.
    volatile uint8_t sink = 0;
    for (const ferry::MethodDef& method : imported->methods) {
      if (!ferry::VerifyMethodDef(method).ok()) std::abort();
      for (const ferry::ValueDef& value : method.values) sink = sink ^ Touch(value.data);
    }
  }
  return 0;
}
