// A verified method as plain data: what Program hands to placement, planning and the executor.
//
// A MethodDef is produced by Program (loader/program.h) only after the FlatBuffers verifier and the
// semantic checks have passed, so every index in it is in range, every tensor size fits in
// size_t, every argument is defined before the node that reads it, and every constant's data lies
// inside the program. It holds no FlatBuffers types. Spans point into the Program's memory (the
// mapped file), so a MethodDef lives no longer than its Program.
#ifndef FERRY_LOADER_MODEL_METHOD_DEF_H_
#define FERRY_LOADER_MODEL_METHOD_DEF_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/base/huge_pages.h"
#include "ferry/base/tensor.h"
#include "ferry/memory/device.h"

namespace ferry {

class NamedData;       // loader/model/named_data.h
class ProgramMapping;  // loader/program_mapping.h

using ValueId = int32_t;

enum class ValueKind : uint8_t {
  kInput = 0,         // tensor supplied by the caller per call
  kConstant = 1,      // tensor with data in the program
  kState = 2,         // persistent mutable tensor with initial data in the program
  kIntermediate = 3,  // tensor produced by exactly one node
  kScalar = 4,        // a value that is not a tensor (a Scalar), known at load
};

const char* ValueKindName(ValueKind kind);

// Field order: the meta first, so that its dtype, sizes and the ends of its dim order (what
// layouts, byte sizes and declared results are made from) lie in the first 64 bytes, and the
// kind and name next, on the second line: a walk over a large method's values (its table is
// page-aligned, a ValueDef three cache lines) touches one or two lines per value, not three.
struct ValueDef {
  // User-provided (not `= default`), so that a value-initialized ValueDef (emplace_back()) is not
  // zero-filled before its members are initialized: reading makes one per value.
  ValueDef() {}  // NOLINT(modernize-use-equals-default)

  TensorMeta meta;   // tensors
  ValueKind kind = ValueKind::kIntermediate;
  std::string name;  // never empty: the program's name, or "value N"
  Scalar scalar;     // kScalar
  // Constant data, or a state's initial data: dense in meta's dim order, meta.ByteSize() bytes,
  // inside the program's memory, 64-byte aligned.
  absl::Span<const uint8_t> data;
  // kState: shared by the methods of a program loaded together that have a shared state of the
  // same name (one buffer, one home device, one content).
  bool shared = false;

  bool is_tensor() const { return kind != ValueKind::kScalar; }
};

enum class NodeKind : uint8_t { kHostOp = 0, kDelegate = 1 };

// Argument and result lists: most nodes have a few, kept inline (no allocation per node).
using ValueIds = absl::InlinedVector<ValueId, 4>;

// A delegate call's own fields.
struct DelegateDef {
  std::string backend;
  std::vector<std::pair<std::string, std::string>> compile_specs;
  absl::Span<const uint8_t> payload;
  // Per argument, the dim order the delegate was compiled for; an empty entry (or an empty
  // vector) means "as the value is stored".
  std::vector<std::vector<int32_t>> arg_dim_orders;
  // Arguments the delegate writes in place (state it owns on its device).
  std::vector<int32_t> written_args;

  // The value of compile spec `key`, if present.
  std::optional<absl::string_view> CompileSpec(absl::string_view key) const;
};

// Two cache lines, aligned: what every walk over the nodes reads (argument and result lists,
// kind) in the first. A delegate's own fields are behind a pointer, so that the many host ops of
// a large method do not carry them.
struct alignas(64) NodeDef {
  // User-provided, as ValueDef's: no zero fill before the members are initialized.
  NodeDef() {}  // NOLINT(modernize-use-equals-default)
  NodeDef(const NodeDef& other);
  NodeDef& operator=(const NodeDef& other);
  NodeDef(NodeDef&&) noexcept = default;
  NodeDef& operator=(NodeDef&&) noexcept = default;
  ~NodeDef() = default;

  ValueIds args;
  ValueIds results;
  NodeKind kind = NodeKind::kHostOp;

 private:
  std::unique_ptr<DelegateDef> delegate_;  // kDelegate; copied with the node

 public:
  std::string op;    // kHostOp
  std::string name;  // never empty: the program's name, or the op / backend name

  // kDelegate: the call's fields; a host op's are empty.
  const DelegateDef& delegate() const;
  // The call's fields to fill in, made on first use.
  DelegateDef& mutable_delegate();
  // delegate().CompileSpec(key).
  std::optional<absl::string_view> CompileSpec(absl::string_view key) const {
    return delegate().CompileSpec(key);
  }
};

inline constexpr absl::string_view kTargetDeviceSpec = "target_device";

// One arena of the memory plan a program's exporter made (ExecuTorch's non_const_buffer_sizes,
// non_const_buffer_device and the tensors' memory_id/offsets). Ferry plans its own arenas; this is
// read, checked at load (every tensor inside its arena), shown beside Ferry's (`ferry plan`) and
// audited (loader/plan/exporter_audit.h).
struct ExporterArena {
  uint32_t memory_id = 0;
  int64_t declared_bytes = 0;  // the size the exporter declared
  int64_t used_bytes = 0;      // the end of the furthest tensor placed in it
  int tensors = 0;             // tensors placed in it
  // The device the exporter put it on, as declared (before any device map); the host when the
  // program says nothing.
  Device device = Device::Host();
};

// A copy an exporter put in the program (ExecuTorch's et_copy::_h2d_copy.out and _d2h_copy.out),
// dropped at import: Ferry decides its own copies, and the copy's result is the value it copies.
// Kept for the audit (loader/plan/exporter_audit.h).
struct ExporterCopy {
  int32_t instruction = -1;  // the exporter's instruction
  bool to_device = true;     // _h2d_copy; false: _d2h_copy
  ValueId value = -1;        // the value copied (and, for Ferry, the copy's result)
  int32_t exporter_value = -1;  // the exporter's value the copy writes
};

// A tensor the exporter annotated with a device (ExecuTorch's ExtraTensorInfo device_type and
// device_index), as it declared it (before any device map).
struct ExporterDevice {
  ValueId value = -1;
  Device device;
};

// A value whose memory the exporter planned (ExecuTorch's allocation_info): the arena it put the
// value in, by memory_id (ExporterArena::memory_id).
struct ExporterAllocation {
  ValueId value = -1;
  uint32_t memory_id = 0;
};

struct MethodDef {
  std::string name;
  // Large methods' tables are on huge pages (base/huge_pages.h): fewer faults while loading.
  LargeTable<ValueDef> values;
  LargeTable<NodeDef> nodes;        // in execution order
  // The kInput values, in call order, and the method's non-tensor inputs: kScalar values holding
  // what the program was traced with, the only value a call may pass (ExecuTorch's rule).
  std::vector<ValueId> inputs;
  // Returned values, in order: tensors, or kScalar values returned as they are.
  std::vector<ValueId> outputs;
  // The read-only mapping of the program's file that constant and state data lie in; nullptr
  // when the program is in memory. Loading gives it page hints (loader/program_mapping.h) so that
  // host memory stays bounded while large constants are copied to a device.
  const ProgramMapping* mapping = nullptr;
  // The program's named data, which delegate payloads may refer to by key (DelegateInit passes
  // it on); nullptr for a program without any.
  const NamedData* named_data = nullptr;
  // The exporter's memory plan, by memory_id; empty for Ferry's own programs.
  std::vector<ExporterArena> exporter_arenas;
  // Imported programs: per node, the exporter's instruction it comes from (-1 for a node the
  // import added, such as a state's write-back); the exporter's copies, device annotations and
  // arena of each planned value. Empty for Ferry's own programs.
  std::vector<int32_t> node_instructions;
  std::vector<ExporterCopy> exporter_copies;
  std::vector<ExporterDevice> exporter_devices;
  std::vector<ExporterAllocation> exporter_allocations;
};

}  // namespace ferry

#endif  // FERRY_LOADER_MODEL_METHOD_DEF_H_
