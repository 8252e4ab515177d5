// A loaded method: placement decided, arenas planned and allocated, constants on their devices.
//
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Method> m, runtime.LoadMethod(*program, "forward"));
//   for (const CopyStep& c : m->plan().placement.copies) ...    // the copy manifest
//   FERRY_RETURN_IF_ERROR(m->SetInput(0, TensorView::Host(DType::kFloat32, {2, 2}, a)));
//   FERRY_RETURN_IF_ERROR(m->Execute());
//   TensorView out = m->Output(0);                              // valid until the next Execute
//
// Lifetime: a Method refers to its Program (constant data is read in place) and its Runtime (device
// runtimes, backends); both must outlive it. Inputs set with SetInput are the caller's memory and
// must stay valid and unchanged while Execute runs; the method keeps pointing at them between calls
// until they are set again.
//
// Execute allocates nothing, takes no lock and looks nothing up by name: it runs the step list built
// at load (host kernels, delegate calls, copies, synchronization). Errors: SetInput and
// SetOutputBuffer return InvalidArgument naming the input or output, the expected and the given
// dtype, shape, rank, size or device, and change nothing; Execute returns FailedPrecondition
// naming an input that was never set, InvalidArgument naming both when an output buffer overlaps
// an input or another output buffer (checked before any step runs, since a step would overwrite
// what a later step reads; bindings may change in any order between calls), or the error of the
// step that failed (naming the node). A method stays usable after any error.
//
// After a failed Execute: the method's own memory (arenas, state) may hold values of the failed
// call. A caller buffer bound with SetOutputBuffer is written only by the step that produces
// that output (the output's copy or its producing node), so it holds either its previous
// content, when the failure came before that step, or this call's value of the output, when it
// came after; nothing else is ever written into it. Output(i) returns an empty view until the
// next successful Execute, so stale or partial results are never read by accident.
//
// Thread safety: a Method is used by one thread at a time.
#ifndef FERRY_RUNTIME_METHOD_H_
#define FERRY_RUNTIME_METHOD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/base/tensor.h"
#include "ferry/loader/model/method_def.h"
#include "ferry/loader/plan/placement.h"
#include "ferry/memory/device.h"
#include "ferry/runtime/tensor_view.h"

namespace ferry {

struct ArenaInfo {
  Device device;
  std::string device_label;   // the device as declared, e.g. "cuda:0 (as sim:0)"
  size_t arena_bytes = 0;     // planned arena (per-call values, state, scratch)
  size_t lower_bound = 0;     // peak bytes live at once
  size_t constant_bytes = 0;  // constant region (replicas made at load)
  // Replicas this method reads that another method of its program had made already
  // (LoadedProgram): shared, not made again, and not counted in constant_bytes.
  size_t shared_constant_bytes = 0;
  // Shared states on the device (ValueDef::shared, LoadedProgram): one buffer per program,
  // outside the arena; those this method made and those it shares with earlier methods.
  size_t shared_state_bytes = 0;
  // What the device had available when the method was loaded (DeviceRuntime::available_bytes),
  // and the caller's limit for it (LoadOptions::memory_limits; SIZE_MAX: none).
  size_t available_bytes = 0;
  size_t limit_bytes = SIZE_MAX;
};

// A method input or output: a tensor, or a value that is not one (`value` set).
struct IoInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  size_t bytes = 0;
  Device device;  // where the caller passes (inputs) or receives (outputs) it
  std::string device_label;  // the device as declared, e.g. "cuda:0 (as sim:0)"
  // Not a tensor (an int, a double, a string, None, a list): the value in the program (for an
  // input, the one the program was traced with), which lives as long as the Program; the
  // tensor fields are then empty, the device the host. nullptr for a tensor.
  const Scalar* value = nullptr;

  bool is_tensor() const { return value == nullptr; }
};

// Tracing (LoadOptions::record_trace). Times are the host's steady clock, in nanoseconds.
struct TraceSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // Timed on its device (a copy or delegate call on a device with timers, CUDA's events): the
  // device's times, placed on the host's clock at the call's start. Otherwise the host's call.
  bool device_clock = false;
};

// A step of a call, in the order Execute runs them.
struct TraceStep {
  enum class Kind : uint8_t { kNode, kCopy, kSync };
  Kind kind = Kind::kNode;
  bool delegate = false;  // kNode: a delegate call (else a host kernel)
  int32_t node = -1;      // kNode: the node; kCopy: the node the copy feeds, or -1
  int32_t copy = -1;      // kCopy: index into plan().placement.copies
  // Where it runs: a node's device; a copy's device side (the host for host-to-host); the
  // device a synchronization waits for.
  Device device;
};

// Work done at load: each phase, and each load-time copy (constant replicas, initial state).
struct LoadEvent {
  std::string name;  // "phase: Place", "copy host->sim:0 \"w\""
  TraceSpan span;
  Device device;      // a copy's device side; the host for phases
  int32_t copy = -1;  // a copy: index into plan().placement.copies
};

struct LoadTimings {
  double placement_us = 0;
  double planning_us = 0;
  double materialization_us = 0;  // allocation, touching arenas, load-time copies, backend init
};

struct MethodPlan {
  PlacementPlan placement;
  std::vector<ArenaInfo> arenas;  // host first, then devices in order: every device the plan uses
  std::vector<IoInfo> inputs;
  std::vector<IoInfo> outputs;
  LoadTimings timings;
  // With LoadOptions::record_trace: the load's phases and copies, in order; empty otherwise.
  std::vector<LoadEvent> load_events;
  // The delegate backends this method calls that are Ferry's built-ins (Runtime::RegisterBackend),
  // each once: the plan names them as such.
  std::vector<std::string> built_in_backends;
};

namespace internal {
class MethodImpl;
}

class Method {
 public:
  ~Method();
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;

  const MethodDef& def() const;
  const MethodPlan& plan() const;
  size_t num_inputs() const;
  size_t num_outputs() const;

  // Binds input `index` to the caller's memory. Checks dtype, shape and size against the plan, that
  // the pointer is aligned to the element size (kernels load whole elements), that
  // `tensor.device()` is the device the plan expects, and that the pointer really is memory of that
  // device (P13).
  absl::Status SetInput(size_t index, const TensorView& tensor);
  // Makes output `index` be written into the caller's memory from the next Execute on, with the
  // same checks as SetInput.
  absl::Status SetOutputBuffer(size_t index, const TensorView& tensor);
  // Raw forms: `bytes` of memory at `data` on `device`, taken as the dense tensor the plan
  // expects; fewer bytes than it needs is an error naming both sizes.
  absl::Status SetInput(size_t index, void* data, size_t bytes, Device device);
  absl::Status SetOutputBuffer(size_t index, void* data, size_t bytes, Device device);

  // Non-tensor inputs (IoInfo::value set: an int, a double, a bool, a string, None, a list).
  // Like ExecuTorch, a program fixes them when it is made: the input holds the traced value
  // from load on, and setting it checks that `value` is that value (doubles within
  // 1e-4 + 1e-5 * |traced|, lists item by item), returning InvalidArgument naming the input,
  // the traced and the given value otherwise. A tensor input given a Scalar, or a non-tensor
  // input given a tensor, is InvalidArgument. No heap allocation for ints, doubles and bools.
  absl::Status SetInput(size_t index, const Scalar& value);
  absl::Status SetIntInput(size_t index, int64_t value) {
    return SetInput(index, Scalar::Int(value));
  }
  absl::Status SetDoubleInput(size_t index, double value) {
    return SetInput(index, Scalar::Double(value));
  }
  absl::Status SetBoolInput(size_t index, bool value) {
    return SetInput(index, Scalar::Bool(value));
  }

  absl::Status Execute();

  // The memory of planned buffer `buffer` (an index into plan().placement.buffers) as bound now;
  // for tests and tools that check where the plan put things.
  const void* buffer_data(int32_t buffer) const;

  // Output `index` of the last successful Execute (its memory is the method's, or the caller's
  // buffer), on the device the plan names. An empty view (data() == nullptr) when `index` is out
  // of range or the last Execute failed.
  TensorView Output(size_t index) const;

  // With LoadOptions::record_trace: every step a call runs (fixed at load), and the times of
  // the steps the last Execute ran, one per step from the first (fewer when it failed at a
  // step: up to and including that one). Both empty without record_trace. The spans are
  // preallocated at load and overwritten by each Execute; recording costs two clock reads per
  // step (and two device timer records per step on a device with timers, read after the
  // call), and nothing when off (Execute then runs the same loop as without this option).
  absl::Span<const TraceStep> trace_steps() const;
  absl::Span<const TraceSpan> last_trace() const;

  // Non-tensor output `index` of the last successful Execute (IoInfo::value set): typed, or as
  // a Scalar of any kind (valid as long as the Program). InvalidArgument when `index` is out of
  // range, names a tensor output (read it with Output) or a value of another kind ("output 0
  // (\"n\") is an int, not a double"); FailedPrecondition before a successful Execute.
  absl::StatusOr<int64_t> OutputInt(size_t index) const;
  absl::StatusOr<double> OutputDouble(size_t index) const;
  absl::StatusOr<bool> OutputBool(size_t index) const;
  absl::StatusOr<absl::string_view> OutputString(size_t index) const;
  absl::StatusOr<const Scalar*> OutputValue(size_t index) const;

 private:
  friend class Runtime;
  explicit Method(std::unique_ptr<internal::MethodImpl> impl);
  std::unique_ptr<internal::MethodImpl> impl_;
};

}  // namespace ferry

#endif  // FERRY_RUNTIME_METHOD_H_
