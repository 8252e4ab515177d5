// Load-time placement: where every value lives, which copies run, and when.
//
// PlaceMethod is a pure function from a verified method (plain data), the effects of its nodes
// (which arguments each writes, which results alias which argument, which arguments are read only
// for their shape), the natural layout of every value and the load options, to a PlacementPlan.
// It implements the rules P1-P12 and P15 of docs/placement.md in one place; nothing else in Ferry
// decides placement.
//
//   PlacementInput input{&method, effects, layouts};
//   PlacementOptions options;
//   options.present_devices = {Device::Host(), Device::Sim(0)};
//   options.device_map[Device::Cuda(0)] = Device::Sim(0);
//   FERRY_ASSIGN_OR_RETURN(PlacementPlan plan, PlaceMethod(input, options));
//   for (const CopyStep& c : plan.copies) ...   // the copy manifest
//
// Model. Each value has a home (P3). The plan's buffers are physical storage: a value's home, the
// copies of it on other devices (at most one buffer per value, device and layout; a later version
// is copied into the same buffer again), aliases (views and in-place results of host ops share
// their argument's buffer), the program's own constant data and constant replicas. Writes in place
// bump the version of everything that shares memory with the written buffer; a reader gets a fresh
// copy only when the buffer on its device is stale (P5, P6).
//
// The schedule is the ordered list of per-call steps (copies and nodes); `once` copies run at load,
// in the order of `load_copies`. Buffer lifetimes are schedule positions, for the memory planner.
//
// Errors: InvalidArgument for a program that cannot be placed (a malformed target_device, a
// delegate writing a value that lives elsewhere, a write to a constant, a state written on two
// devices, a non-dense constant read on a device), NotFound for a declared device that is neither
// present nor mapped, FailedPrecondition for options that forbid the plan
// (error_on_per_call_copies) or contradict each other, Unimplemented for a layout conversion
// between two devices. Messages name the nodes, values, devices and bytes involved.
//
// Warnings (plan.diagnostics) besides those of the rules: values of the method that share a name
// warn once per name, with all their ids in `values`, since copies and messages that name such a
// value are ambiguous.
//
// Thread safety: a pure function. Allocates (load time only).
#ifndef FERRY_LOADER_PLAN_PLACEMENT_H_
#define FERRY_LOADER_PLAN_PLACEMENT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "ferry/base/huge_pages.h"
#include "ferry/loader/model/method_def.h"
#include "ferry/memory/device.h"

namespace ferry {

// What a node does to its arguments, from the op schema (host ops) or the delegate declaration.
struct NodeEffects {
  std::vector<int32_t> written_args;     // argument positions written in place
  std::vector<int32_t> view_of;          // per result: argument position it aliases, or -1
  std::vector<int32_t> shape_only_args;  // argument positions read only for their shape

  // No effects at all (most nodes).
  bool empty() const { return written_args.empty() && view_of.empty() && shape_only_args.empty(); }
};

// The layout a value has in an all-host run: dense in `dim_order`, or strided (a view).
struct ValueLayout {
  bool dense = true;
  std::vector<int32_t> dim_order;  // when dense; empty: row-major
  std::vector<int64_t> strides;    // elements; filled when not dense (named in messages)
};

// Most nodes have no effects and most values are dense row-major, so both lists name only the
// others: a large method's input is not two tables written and read for nothing.
struct PlacementInput {
  const MethodDef* method = nullptr;
  // The nodes that have effects, in increasing node order, each once; a node not listed has none.
  std::vector<std::pair<int32_t, NodeEffects>> effects;
  // The values whose all-host layout is not dense row-major, in increasing value order, each
  // once; a value not listed is dense row-major. Scalars' entries are ignored.
  std::vector<std::pair<ValueId, ValueLayout>> layouts;

  // Node n's effects (empty when not listed) and value v's layout (dense row-major when not
  // listed), by binary search.
  const NodeEffects& EffectsOf(int32_t n) const;
  const ValueLayout& LayoutOf(ValueId v) const;
};

struct PlacementOptions {
  bool skip_h2d_for_method_inputs = false;
  bool skip_d2h_for_method_outputs = false;
  bool error_on_per_call_copies = false;
  // Declared device -> device used. Applied once (no chains).
  absl::flat_hash_map<Device, Device> device_map;
  // Devices that exist. The host is always present.
  std::vector<Device> present_devices;
};

enum class CopyDirection : uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost };
enum class CopyTiming : uint8_t { kOnce, kPerCall };
// "h2d", "d2h", "d2d", "h2h"; "once", "per call".
const char* CopyDirectionName(CopyDirection direction);
const char* CopyTimingName(CopyTiming timing);

enum class BufferKind : uint8_t {
  kArena,            // planned storage in the arena of its device
  kInput,            // supplied by the caller per call (not planned)
  kProgramData,      // a constant's data in the program, read in place (host)
  kConstantReplica,  // a constant's replica in the constant region of a device, made at load
  kState,            // a state buffer's home: persistent, initialized at load
  kAlias,            // a view of another buffer (a view or in-place result of a host op)
};
const char* BufferKindName(BufferKind kind);

struct PlannedBuffer {
  ValueId value = -1;
  Device device;
  BufferKind kind = BufferKind::kArena;
  size_t bytes = 0;                // dense bytes; 0 for aliases
  std::vector<int32_t> dim_order;  // dense layout of non-alias buffers (empty: row-major)
  int32_t alias_of = -1;           // kAlias: the buffer it views
  int32_t alias_node = -1;         // kAlias: the node whose result it is
  // Schedule positions of the first write and the last read (aliases' reads count for the buffer
  // they alias); -1 when never used per call. Outputs are read at position schedule.size().
  int32_t first_step = -1;
  int32_t last_step = -1;
};

struct CopyStep {
  ValueId value = -1;
  int32_t src_buffer = -1;
  int32_t dst_buffer = -1;
  Device src_device;
  Device dst_device;
  CopyDirection direction = CopyDirection::kHostToDevice;
  CopyTiming timing = CopyTiming::kPerCall;
  size_t bytes = 0;
  bool converts_layout = false;  // the destination layout differs from the source's
  int32_t node = -1;             // the node the copy feeds, or -1
  int32_t output = -1;           // the method output it feeds, or -1
  std::string reason;            // "read by node 3 (relu) on host", "method output 0", ...
};

struct ScheduleStep {
  enum class Kind : uint8_t { kCopy, kNode };
  Kind kind = Kind::kNode;
  int32_t index = 0;  // into copies or nodes
};

struct NodePlacement {
  Device device;
  absl::InlinedVector<int32_t, 4> arg_buffers;     // -1 for scalar arguments
  absl::InlinedVector<int32_t, 2> result_buffers;
};

struct Diagnostic {
  enum class Severity : uint8_t { kWarning, kError };
  Severity severity = Severity::kWarning;
  std::string message;
  std::vector<ValueId> values;
  std::vector<int32_t> nodes;
  std::vector<Device> devices;
  size_t bytes = 0;
  int32_t input = -1;   // method input position, or -1
  int32_t output = -1;  // method output position, or -1
};

struct PlacementPlan {
  LargeTable<NodePlacement> nodes;  // one per node
  LargeTable<Device> value_homes;   // one per value (host for scalars)
  LargeTable<PlannedBuffer> buffers;
  std::vector<CopyStep> copies;          // the manifest: once and per-call copies
  std::vector<int32_t> load_copies;      // indices of the once copies, in load order
  LargeTable<ScheduleStep> schedule;     // per call
  // Per method input: the buffer the caller supplies; per method output: the buffer returned.
  // -1 for a value that is not a tensor (it has no buffer).
  std::vector<int32_t> input_buffers;
  std::vector<int32_t> output_buffers;
  std::vector<Diagnostic> diagnostics;
  // Devices the method's delegates declared that the device map sent elsewhere:
  // (declared, used), e.g. (cuda:0, sim:0) on a machine without a GPU.
  std::vector<std::pair<Device, Device>> mapped_devices;

  // Where input or output i is passed: its buffer's device; the host for a non-tensor value.
  const Device& input_device(size_t i) const { return DeviceOf(input_buffers[i]); }
  const Device& output_device(size_t i) const { return DeviceOf(output_buffers[i]); }
  int per_call_copies() const;
  size_t per_call_bytes() const;
  // Devices other than the host that the plan uses, sorted.
  std::vector<Device> devices() const;

 private:
  const Device& DeviceOf(int32_t buffer) const;
};

absl::StatusOr<PlacementPlan> PlaceMethod(const PlacementInput& input,
                                          const PlacementOptions& options);

// `order` with the row-major order spelt as the empty vector, so layouts compare equal however
// they were written.
std::vector<int32_t> CanonicalDimOrder(std::vector<int32_t> order);

// The message of every diagnostic, one per line, prefixed "warning: " or "error: ".
std::string FormatDiagnostics(const std::vector<Diagnostic>& diagnostics);

}  // namespace ferry

#endif  // FERRY_LOADER_PLAN_PLACEMENT_H_
