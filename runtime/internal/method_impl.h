// The loaded state of a Method and its executor. Internal to runtime/.
#ifndef FERRY_RUNTIME_INTERNAL_METHOD_IMPL_H_
#define FERRY_RUNTIME_INTERNAL_METHOD_IMPL_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/base/huge_pages.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/model/method_def.h"
#include "ferry/loader/plan/placement.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/memory/device_registry.h"
#include "ferry/memory/device_runtime.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/internal/host_steps.h"
#include "ferry/runtime/method.h"
#include "ferry/runtime/runtime.h"

namespace ferry::internal {

// A copy between two planned buffers, resolved at load.
struct CopyExec {
  CopyDirection direction = CopyDirection::kHostToDevice;
  DeviceRuntime* src_runtime = nullptr;
  DeviceRuntime* dst_runtime = nullptr;
  const TensorRef* src = nullptr;
  const TensorRef* dst = nullptr;
  size_t bytes = 0;
  bool strided = false;  // gather src (host) into dense dst
  int32_t rank = 0;
  std::array<int64_t, kMaxRank> sizes{};    // src sizes in dst memory order (strided copies)
  std::array<int64_t, kMaxRank> strides{};  // src strides in dst memory order
  int32_t copy = -1;                        // index in the manifest
};

absl::Status RunCopy(const CopyExec& c);

// Nanoseconds on the host's steady clock: the clock of traces (TraceSpan).
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Step {
  enum class Kind : uint8_t { kHost, kDelegate, kCopy, kSync };
  Kind kind = Kind::kHost;
  int32_t node = -1;
  // kHost: index into host_tables.steps(); kCopy: index into copies_; kDelegate: into delegates_.
  int32_t index = 0;
  // kSync: the device to wait for.
  DeviceRuntime* runtime = nullptr;
};

struct DelegateExec {
  DelegateInstance* instance = nullptr;
  DeviceRuntime* scope = nullptr;  // device whose scope is opened around the call; null on host
  size_t args_begin = 0, num_args = 0;
  size_t results_begin = 0, num_results = 0;
  int32_t scratch_buffer = -1;  // index into scratch_ pointers
  void* scratch = nullptr;
};

// Pinned host memory from a device runtime, freed on destruction.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer(DeviceRuntime* runtime, void* data) : runtime_(runtime), data_(data) {}
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
      : runtime_(other.runtime_), data_(std::exchange(other.data_, nullptr)) {}
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(PinnedHostBuffer&&) = delete;
  ~PinnedHostBuffer() {
    if (data_ != nullptr) runtime_->FreePinnedHost(data_);
  }

 private:
  DeviceRuntime* runtime_;
  void* data_;
};

class MethodLoader;  // runtime/method_loader.cc: the load phases

// Caller memory bound to an input or an output: [begin, end), empty when none.
struct CallerRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  static CallerRange Of(const void* data, size_t bytes) {
    const uintptr_t b = reinterpret_cast<uintptr_t>(data);
    return {b, b + bytes};
  }
  bool empty() const { return begin == end; }
  bool Overlaps(const CallerRange& other) const {
    return !empty() && !other.empty() && begin < other.end && other.begin < end;
  }
};

struct ProgramResidency;
struct SharedState;

class MethodImpl {
 public:
  // `program`: what the program's methods share (constant replicas, shared states), or nullptr
  // for a method that makes all of its own.
  static absl::StatusOr<std::unique_ptr<MethodImpl>> Load(const Runtime& runtime,
                                                          const MethodDef& method,
                                                          const LoadOptions& options,
                                                          ProgramResidency* program);

  const MethodDef& def() const { return *def_; }
  const MethodPlan& plan() const { return plan_; }

  absl::Status SetInput(size_t index, const TensorView& tensor);
  absl::Status SetOutputBuffer(size_t index, const TensorView& tensor);
  absl::Status SetInput(size_t index, const Scalar& value);
  absl::Status Execute();
  TensorView Output(size_t index) const;
  // Output `index` when it is a non-tensor value of `kind` (any kind when nullopt).
  absl::StatusOr<const Scalar*> OutputValue(size_t index, std::optional<Scalar::Kind> kind) const;
  const void* buffer_data(int32_t buffer) const { return refs_[buffer].data; }
  absl::Span<const TraceStep> trace_steps() const { return trace_steps_; }
  absl::Span<const TraceSpan> last_trace() const {
    return absl::MakeConstSpan(trace_spans_.data(), traced_steps_);
  }

 private:
  friend class MethodLoader;
  MethodImpl() = default;
  absl::Status CheckCallerTensor(const char* what, size_t index, const IoInfo& io,
                                 const TensorRef& expected, const TensorView& given) const;
  // InvalidArgument when a caller's output buffer overlaps an input or another output buffer;
  // names both.
  absl::Status CheckCallerMemory() const;
  absl::Status StepError(const Step& step, const absl::Status& status) const;
  // Execute's steps, timing each into trace_spans_ when kTrace.
  template <bool kTrace>
  absl::Status RunSteps();
  enum class Io { kInput, kOutput };
  // "method \"m\": input 1 (\"n\")": the caller's element, for errors.
  std::string IoLabel(Io io, size_t index) const;
  // InvalidArgument naming the method when `index` is no input (output) of it.
  absl::Status CheckIndex(Io io, size_t index) const;
  std::string NodeLabel(int32_t node) const;

  const Runtime* runtime_ = nullptr;
  const MethodDef* def_ = nullptr;
  MethodPlan plan_;

  // One TensorRef per planned buffer; never resized after load (steps point into it).
  LargeTable<TensorRef> refs_;
  LargeTable<DeviceRuntime*> buffer_runtime_;
  LargeTable<int64_t> alias_offset_;  // per buffer: byte offset of an alias from its base
  // Per output: the buffer whose memory a caller's buffer bound to it replaces (the output's own,
  // or the base an in-place result shares memory and layout with).
  std::vector<int32_t> output_targets_;

  std::vector<DeviceBuffer> arenas_;
  std::vector<PinnedHostBuffer> pinned_arenas_;  // the host arena, when a device pins it
  // Replicas this method made (shared with later methods of its program through aliasing
  // pointers), and those it shares with earlier ones.
  std::vector<std::shared_ptr<DeviceBuffer>> constant_regions_;
  std::vector<std::shared_ptr<void>> shared_replicas_;
  std::vector<std::shared_ptr<SharedState>> shared_states_;

  HostStepTables host_tables_;
  std::vector<CopyExec> copies_;
  std::vector<std::unique_ptr<DelegateInstance>> instances_;
  std::vector<DelegateExec> delegates_;
  std::vector<TensorRef*> delegate_refs_;
  LargeTable<Step> steps_;
  std::vector<Step> final_syncs_;

  // LoadOptions::record_trace: one entry per step and final synchronization, sized at load.
  std::vector<TraceStep> trace_steps_;
  std::vector<TraceSpan> trace_spans_;
  size_t traced_steps_ = 0;  // steps the last Execute ran
  // Device timers (DeviceRuntime::CreateTimer): marker 0 is recorded at a call's start (with
  // the host's time then), a device step's markers around it.
  struct DeviceClock {
    std::unique_ptr<DeviceTimer> timer;
    int64_t anchor_ns = 0;  // host time of marker 0 in this call
    bool anchored = false;
  };
  std::vector<DeviceClock> device_clocks_;
  std::vector<int32_t> step_clock_;    // per trace step: index into device_clocks_, or -1
  std::vector<uint32_t> step_marker_;  // per trace step with a clock: its first marker
  // After a traced call: device-timed spans replace the host's where the timers have them.
  void ResolveDeviceTimes();

  std::vector<bool> input_set_;
  std::vector<CallerRange> input_ranges_;   // per input
  std::vector<CallerRange> output_ranges_;  // per output: the caller's buffer, if bound
  // Up to this many inputs and outputs, CheckCallerMemory compares every pair; above, it sorts
  // the bound ranges into this scratch, reserved at load for all of them.
  static constexpr size_t kPairwiseRanges = 16;
  mutable std::vector<std::pair<CallerRange, int64_t>> range_scratch_;  // input i, output -(o+1)
  bool any_output_bound_ = false;
  bool last_execute_failed_ = false;
  bool executed_ = false;  // a call has succeeded since load
};

}  // namespace ferry::internal

#endif  // FERRY_RUNTIME_INTERNAL_METHOD_IMPL_H_
