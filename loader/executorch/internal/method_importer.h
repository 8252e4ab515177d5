// The import of one ExecuTorch method onto a MethodDef (loader/executorch/importer.h), as the op
// families see it: importer.cc walks the method's instructions and owns values, constants and
// delegate calls; each family of ops (loader/executorch/ops/<family>.cc, the stems of
// kernels/<family>_ops.cc) maps its kernel calls onto Ferry nodes through the calls below, and
// lists them in a table of its own (loader/executorch/ops/ops.h).
//
//   // aten::relu.out(self, *, out)
//   absl::Status ImportRelu(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
//     FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
//     FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
//     m.AddNode("relu", {a}, r);
//     return absl::OkStatus();
//   }
//
// Conventions. `args` are the call's schema arguments (without `out` and the returned value) as
// ExecuTorch value indices, all in range; `out` is the tensor value the call writes. ExecuTorch
// writes results into preallocated values and reuses them, Ferry produces each intermediate once:
// ReadTensor gives the Ferry value an ExecuTorch value holds now, Produce a new one for `out`.
// Errors name the method and the instruction (Invalid, Unimplemented); a family never reads the
// file itself.
#ifndef FERRY_LOADER_EXECUTORCH_INTERNAL_METHOD_IMPORTER_H_
#define FERRY_LOADER_EXECUTORCH_INTERNAL_METHOD_IMPORTER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/base/tensor.h"
#include "ferry/loader/executorch/ptd_reader.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/model/method_def.h"

namespace ferry::internal {

// A constant's bytes (or a delegate's payload), to be copied into the import's aligned storage
// once every method is done.
struct PendingConstant {
  size_t method = 0;
  ValueId value = 0;
  absl::Span<const uint8_t> source;  // in the file; empty when `folded` holds the bytes
  std::vector<uint8_t> folded;       // computed here (a cast)
  absl::Span<const uint8_t> folded_from;  // the bytes `folded` was computed from
  int32_t payload_of_node = -1;      // a delegate payload: the node's index, and `value` unused
  int32_t same_as = -1;              // the bytes are those of this earlier entry (not copied)
};

// The import's pending constants, each distinct source once: bytes of the files by their span
// (tensors sharing a constant buffer, calls of one delegate), casts by the span they were computed
// from and their dtype. A later entry with the same source shares the first one's copy.
class PendingConstants {
 public:
  using Key = std::tuple<const uint8_t*, size_t, int>;  // span; the cast's dtype, or -1
  static Key Bytes(absl::Span<const uint8_t> s) { return {s.data(), s.size(), -1}; }
  static Key Cast(absl::Span<const uint8_t> s, DType d) {
    return {s.data(), s.size(), static_cast<int>(d)};
  }

  bool Has(const Key& key) const { return index_.contains(key); }
  // Adds `c`, whose bytes are `key`'s: copied if they are new, else shared (`c`'s bytes unused).
  void Add(const Key& key, PendingConstant c);
  const std::vector<PendingConstant>& list() const { return list_; }
  size_t size() const { return list_.size(); }
  // Drops the entries from `n` on (those of a method the import refused).
  void Truncate(size_t n);

 private:
  std::vector<PendingConstant> list_;
  std::vector<Key> keys_;  // per entry
  absl::flat_hash_map<Key, int32_t> index_;
};

struct EtOpMapping;  // loader/executorch/ops/ops.h

class MethodImporter {
 public:
  MethodImporter(const EtMethod& et, size_t method_index, const EtDataFile* data,
                 PendingConstants* constants);

  absl::StatusOr<MethodDef> Run();

  // --- For the op families ----------------------------------------------------------------

  // ExecuTorch value `v` (in range).
  const EtValue& value(int32_t v) const { return et_.values[v]; }
  // The instruction being imported.
  int instruction() const { return instruction_; }

  // Errors naming the method and the instruction: "method "forward", instruction 3 (aten::add.out):
  // <what>".
  absl::Status Unimplemented(absl::string_view what) const;
  absl::Status Invalid(absl::string_view what) const;

  // The Ferry metadata of tensor value `v`: Invalid for a value that is not a tensor,
  // Unimplemented for a dtype, dynamic shape or rank Ferry does not support.
  absl::StatusOr<TensorMeta> MetaOf(int32_t v) const;
  // The Ferry value an instruction reads for tensor value `v`: its latest producer, an input, or
  // (on first use) a constant.
  absl::StatusOr<ValueId> ReadTensor(int32_t v);
  // Whether tensor value `v` is a constant of the program that no instruction has written yet
  // (its bytes, EtTensor::data, are what a read gets).
  bool IsUnwrittenConstant(int32_t v) const;
  // A new intermediate for ExecuTorch value `v` with `meta`; `role` tells apart the helper values
  // of one call ("mat1 @ mat2").
  ValueId NewIntermediate(int32_t v, TensorMeta meta, absl::string_view role = "");
  // The value the call's result is written to: a new one per write of `out`, which later reads
  // of `out` get. Unimplemented when `out` is not row-major.
  absl::StatusOr<ValueId> Produce(int32_t out);
  // A scalar value known at load, named `name`.
  ValueId AddScalar(Scalar s, absl::string_view name);
  absl::StatusOr<Scalar> NonTensor(int32_t v, absl::string_view what);
  absl::StatusOr<ValueId> NonTensorIo(int32_t v, absl::string_view what);
  // A host op node of the current instruction.
  void AddNode(absl::string_view op, ValueIds args, ValueId result);
  // One of several results (conv's output and its column buffer).
  void AddNode(absl::string_view op, ValueIds args, ValueIds results);

  // Scalar arguments; `what` names the argument in errors ("dim").
  absl::StatusOr<std::vector<int64_t>> IntList(int32_t v, absl::string_view what);
  absl::StatusOr<int64_t> IntValue(int32_t v, absl::string_view what) const;
  // `absent` for None.
  absl::StatusOr<int64_t> OptionalIntValue(int32_t v, absl::string_view what,
                                           int64_t absent) const;
  absl::StatusOr<bool> BoolValue(int32_t v, absl::string_view what) const;
  // An Int, Double or Bool as a Ferry number.
  absl::StatusOr<Scalar> NumberValue(int32_t v, absl::string_view what) const;
  // The tensors of a TensorList (or of an OptionalTensorList without None), in order.
  absl::StatusOr<std::vector<int32_t>> TensorListValue(int32_t v, absl::string_view what);
  // OK when the scalar argument (alpha, beta) is 1 or absent; Unimplemented otherwise.
  absl::Status RequireOne(int32_t v, absl::string_view what) const;

  // The host op `op` on tensor `self` into a new value for `out` (relu, clone).
  absl::Status MapUnary(absl::string_view op, int32_t self, int32_t out);
  // Ferry op `op`(self, number): `number` an Int, Double or Bool value (`what` names it).
  absl::Status MapTensorNumber(absl::string_view op, int32_t self, int32_t number,
                               absl::string_view what, int32_t out);
  // A *_copy op: the view `view_op(self, extra...)`, then a clone into `out`, so that the result
  // is a fresh tensor as ExecuTorch's semantics require.
  absl::Status ViewThenClone(absl::string_view view_op, int32_t self, std::vector<Scalar> extra,
                             int32_t out);
  // The tensor that `out` starts from: for an in-place op (self == out), argument 0 itself;
  // otherwise a clone of it, so that argument 0 keeps its contents.
  absl::StatusOr<ValueId> WriteTarget(int32_t self, int32_t out);
  // Constant `self` (IsUnwrittenConstant), cast once here to `to` (its dtype, with self's sizes),
  // as a new constant that later reads of `out` get. A constant cast to one dtype again shares the
  // first cast's bytes. `convert` writes element i of the source's bytes into the result's.
  using ElementCast = void (*)(const uint8_t* from, size_t i, uint8_t* to);
  void FoldConstantCast(int32_t self, int32_t out, TensorMeta to, ElementCast convert);
  // et_copy::_h2d_copy.out(self, *, out) and _d2h_copy.out: the exporter's own copies between the
  // host and a device. Ferry decides its own copies: `out` becomes `self`, and the copy is kept
  // for the audit (MethodDef::exporter_copies).
  absl::Status ImportExporterCopy(bool to_device, absl::Span<const int32_t> args, int32_t out);

 private:

  std::string Where() const;
  absl::Status AddInputs();
  absl::Status SetOutputs();
  void WriteBackStates();
  // The method's unsupported ops after the current instruction, but operator `named`.
  std::string OtherUnsupportedOps(int32_t named) const;
  absl::Status ImportInstruction(const EtInstruction& instruction);
  absl::Status ImportMultiOutput(const EtOpMapping& mapping, const std::vector<int32_t>& args);
  absl::Status ImportDelegateCall(const EtInstruction& instruction);
  void Annotate(int32_t v, ValueId id);
  bool Written(int32_t v) const;
  absl::StatusOr<ValueId> DelegateArgument(int32_t v, size_t position);
  ValueId Add(ValueDef value);
  absl::StatusOr<absl::Span<const uint8_t>> ExternalData(int32_t v) const;
  absl::Status SpendList(int32_t v, absl::string_view what);

  const EtMethod& et_;
  const size_t method_index_;
  const EtDataFile* const data_;  // may be null
  PendingConstants& constants_;
  MethodDef def_;
  std::vector<ValueId> latest_;  // per ExecuTorch value: its Ferry value now, or -1
  // Mutable state with initial data, as read: (ExecuTorch value, Ferry kState value).
  std::vector<std::pair<int32_t, ValueId>> states_;
  size_t list_budget_ = 0;       // list items the method's instructions may still copy
  size_t delegate_budget_ = 0;   // bytes the method's delegate calls may still copy
  int instruction_ = -1;
  std::string op_name_;
};

}  // namespace ferry::internal

#endif  // FERRY_LOADER_EXECUTORCH_INTERNAL_METHOD_IMPORTER_H_
