// What the .pte reader's two files share: loader/executorch/pte_reader.cc reads the file (its
// header, segments and program tables), pte_method_reader.cc one method. Internal to
// loader/executorch/.
#ifndef FERRY_LOADER_EXECUTORCH_INTERNAL_PTE_READ_H_
#define FERRY_LOADER_EXECUTORCH_INTERNAL_PTE_READ_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/internal/untrusted_bytes.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/executorch/schema/executorch_program_generated.h"

namespace ferry::internal::pte {

namespace fb = ::ferry::et::fbs;

// ExecuTorch's runtime limit on tensor rank (kTensorDimensionLimit).
inline constexpr size_t kMaxEtRank = 16;

inline absl::string_view View(const flatbuffers::String* s) {
  return s == nullptr ? absl::string_view() : absl::string_view(s->c_str(), s->size());
}

template <typename T>
size_t Len(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// The FlatBuffers verifier checks the alignment of a vector's length field, not of 8-byte
// elements; reading a misaligned int64 or double is undefined.
template <typename T>
bool Aligned8(const flatbuffers::Vector<T>* v) {
  static_assert(sizeof(T) == 8);
  return v == nullptr || v->size() == 0 || reinterpret_cast<uintptr_t>(v->data()) % alignof(T) == 0;
}

inline absl::Status Invalid(absl::string_view what) { return absl::InvalidArgumentError(what); }

// What a method refers to at the program level.
struct ProgramContext {
  absl::Span<const uint8_t> file;
  const fb::Program* root = nullptr;
  const EtProgram* program = nullptr;  // segments and subsegments, already verified
};

// Why reading stopped at a list or string that goes over the program's CopyBudget (one budget
// for the whole file: value lists, instruction arguments, arena sizes and subsegment offsets are
// its entries; names, strings, compile specs and named-data keys its bytes). `what` names the
// units: "entries", "arguments", "bytes".
inline std::string OverCopyBudget(size_t n, absl::string_view what) {
  return absl::StrCat("its ", n, " ", what,
                      " go over what the file could hold unshared: the file shares them among "
                      "more tables than a program needs");
}

// After the FlatBuffers verifier has rejected `program` (the FlatBuffer, without segments) with
// these limits: the first part of it that fails verification on its own, as a path of the
// schema's fields in the verifier's order, e.g. "execution_plan[0] (method \"forward\").values[3]
// (Tensor).sizes"; nullopt when every part passes alone (the limits were reached). Reads only
// what a passed check makes safe to read (pte_verify_failure.cc).
std::optional<std::string> LocateVerifierFailure(absl::Span<const uint8_t> program,
                                                 size_t max_depth, size_t max_tables);

// One method of the program (`plan`), read and checked; `label` names it in errors ("method
// \"forward\""), and every list and string it copies is charged to `budget`.
absl::StatusOr<EtMethod> ReadMethod(const ProgramContext& context, const fb::ExecutionPlan& plan,
                                    std::string label, CopyBudget* budget);

}  // namespace ferry::internal::pte

#endif  // FERRY_LOADER_EXECUTORCH_INTERNAL_PTE_READ_H_
