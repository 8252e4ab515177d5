#include "ferry/runtime/method.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/runtime/internal/method_impl.h"

namespace ferry {
namespace internal {
namespace {

std::string ShapeString(const TensorRef& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes.begin(), t.sizes.begin() + t.rank, ", "), "]");
}
std::string StridesString(const TensorRef& t) {
  return absl::StrCat("(", absl::StrJoin(t.strides.begin(), t.strides.begin() + t.rank, ", "),
                      ")");
}

// ExecuTorch's tolerance for a double input against its traced value.
bool CloseEnough(double given, double traced) {
  if (std::isnan(given) || std::isnan(traced)) return std::isnan(given) && std::isnan(traced);
  return std::fabs(given - traced) <= 1e-4 + 1e-5 * std::fabs(traced);
}

// Whether `given` may be passed for a non-tensor input traced as `traced`.
bool MatchesTraced(const Scalar& given, const Scalar& traced) {
  if (given.kind != traced.kind) return false;
  switch (traced.kind) {
    case Scalar::Kind::kDouble:
      return CloseEnough(given.d, traced.d);
    case Scalar::Kind::kDoubleList: {
      const absl::Span<const double> a = given.doubles(), b = traced.doubles();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!CloseEnough(a[i], b[i])) return false;
      }
      return true;
    }
    default:
      return given == traced;
  }
}

// "an int", "a double list".
std::string KindWithArticle(Scalar::Kind kind) {
  const bool vowel = kind == Scalar::Kind::kInt || kind == Scalar::Kind::kIntList;
  return absl::StrCat(vowel ? "an " : "a ", ScalarKindName(kind));
}

}  // namespace

absl::Status RunCopy(const CopyExec& c) {
  if (c.bytes == 0) return absl::OkStatus();
  switch (c.direction) {
    case CopyDirection::kHostToDevice:
    case CopyDirection::kHostToHost:
      // A host destination is host memory to the host runtime, so both go the same way.
      if (c.strided) {
        StridedLayout layout;
        layout.rank = c.rank;
        layout.sizes = c.sizes.data();
        layout.strides = c.strides.data();
        layout.element_size = c.src->element_size();
        return c.dst_runtime->CopyHostStridedToDevice(c.dst->data, c.src->data, layout);
      }
      if (c.direction == CopyDirection::kHostToHost) {
        std::memcpy(c.dst->data, c.src->data, c.bytes);
        return absl::OkStatus();
      }
      return c.dst_runtime->CopyHostToDevice(c.dst->data, c.src->data, c.bytes);
    case CopyDirection::kDeviceToHost:
      return c.src_runtime->CopyDeviceToHost(c.dst->data, c.src->data, c.bytes);
    case CopyDirection::kDeviceToDevice:
      if (c.src_runtime == c.dst_runtime) {
        return c.dst_runtime->CopyDeviceToDevice(c.dst->data, c.src->data, c.bytes);
      }
      return c.dst_runtime->CopyFromPeer(c.dst->data, *c.src_runtime, c.src->data, c.bytes);
  }
  return absl::InternalError("unknown copy direction");
}

std::string MethodImpl::IoLabel(Io io, size_t index) const {
  const bool input = io == Io::kInput;
  const std::vector<IoInfo>& ios = input ? plan_.inputs : plan_.outputs;
  return absl::StrCat("method \"", def_->name, "\": ", input ? "input " : "output ", index, " (\"",
                      absl::CHexEscape(ios[index].name), "\")");
}

absl::Status MethodImpl::CheckIndex(Io io, size_t index) const {
  const bool input = io == Io::kInput;
  const size_t count = input ? plan_.inputs.size() : plan_.outputs.size();
  if (index < count) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("method \"", def_->name, "\": ", input ? "input " : "output ", index,
                   " is out of range; the method has ", count, input ? " inputs" : " outputs"));
}

std::string MethodImpl::NodeLabel(int32_t node) const {
  return absl::StrCat("node ", node, " (", def_->nodes[node].name, ")");
}

absl::Status MethodImpl::StepError(const Step& step, const absl::Status& status) const {
  std::string where;
  if (step.kind == Step::Kind::kCopy) {
    const CopyStep& c = plan_.placement.copies[step.index];
    where = absl::StrCat("copy ", step.index, " (", CopyDirectionName(c.direction), " of \"",
                         def_->values[c.value].name, "\", ", c.reason, ")");
  } else if (step.kind == Step::Kind::kSync) {
    where = absl::StrCat("synchronizing ", step.runtime->device().ToString());
  } else {
    where = NodeLabel(step.node);
  }
  return absl::Status(status.code(), absl::StrCat("method \"", def_->name, "\", ", where, ": ",
                                                  status.message()));
}

void MethodImpl::ResolveDeviceTimes() {
  for (size_t i = 0; i < traced_steps_; ++i) {
    if (step_clock_[i] < 0) continue;
    DeviceClock& clock = device_clocks_[step_clock_[i]];
    if (!clock.anchored) continue;
    absl::StatusOr<int64_t> begin = clock.timer->ElapsedNs(0, step_marker_[i]);
    absl::StatusOr<int64_t> end = clock.timer->ElapsedNs(0, step_marker_[i] + 1);
    if (!begin.ok() || !end.ok()) continue;  // not reached: the host's times stay
    trace_spans_[i] = {clock.anchor_ns + *begin, clock.anchor_ns + *end, true};
  }
}

template <bool kTrace>
absl::Status MethodImpl::RunSteps() {
  if constexpr (kTrace) {
    traced_steps_ = 0;
    for (DeviceClock& clock : device_clocks_) {
      clock.anchor_ns = NowNs();
      clock.anchored = clock.timer->Record(0).ok();
    }
  }
  // Device times are read once the call is over (its final synchronizations done).
  struct Resolve {
    MethodImpl* impl;
    ~Resolve() {
      if constexpr (kTrace) {
        if (!impl->device_clocks_.empty()) impl->ResolveDeviceTimes();
      }
    }
  } resolve{this};
  const LargeTable<HostStep>& host_steps = host_tables_.steps();
  const size_t num_steps = steps_.size();
  for (size_t i = 0; i < num_steps; ++i) {
    const Step& step = steps_[i];
    [[maybe_unused]] int64_t start = 0;
    if constexpr (kTrace) {
      if (step_clock_[i] >= 0) {
        device_clocks_[step_clock_[i]].timer->Record(step_marker_[i]).IgnoreError();
      }
      start = NowNs();
    }
    absl::Status s;
    switch (step.kind) {
      case Step::Kind::kHost:
        s = RunHostStep(host_steps[step.index]);
        break;
      case Step::Kind::kDelegate: {
        const DelegateExec& d = delegates_[step.index];
        auto args = absl::Span<TensorRef* const>(delegate_refs_.data() + d.args_begin, d.num_args);
        auto results =
            absl::Span<TensorRef* const>(delegate_refs_.data() + d.results_begin, d.num_results);
        if (d.scope != nullptr) {
          DeviceScope scope(*d.scope);
          s = d.instance->Execute(args, results, d.scratch);
        } else {
          s = d.instance->Execute(args, results, d.scratch);
        }
        break;
      }
      case Step::Kind::kCopy:
        s = RunCopy(copies_[step.index]);
        break;
      case Step::Kind::kSync:
        s = step.runtime->Synchronize();
        break;
    }
    if constexpr (kTrace) {
      trace_spans_[i] = {start, NowNs()};
      traced_steps_ = i + 1;
      if (step_clock_[i] >= 0) {
        device_clocks_[step_clock_[i]].timer->Record(step_marker_[i] + 1).IgnoreError();
      }
    }
    if (!s.ok()) {
      // Leave no device work referring to caller memory behind.
      for (const Step& sync : final_syncs_) sync.runtime->Synchronize().IgnoreError();
      return StepError(step, s);
    }
  }
  for (size_t k = 0; k < final_syncs_.size(); ++k) {
    [[maybe_unused]] int64_t start = 0;
    if constexpr (kTrace) start = NowNs();
    absl::Status s = final_syncs_[k].runtime->Synchronize();
    if constexpr (kTrace) {
      trace_spans_[num_steps + k] = {start, NowNs()};
      traced_steps_ = num_steps + k + 1;
    }
    if (!s.ok()) return StepError(final_syncs_[k], s);
  }
  return absl::OkStatus();
}

absl::Status MethodImpl::Execute() {
  last_execute_failed_ = true;  // until the last step has succeeded
  traced_steps_ = 0;
  for (size_t i = 0; i < input_set_.size(); ++i) {
    if (!input_set_[i]) {
      return absl::FailedPreconditionError(
          absl::StrCat("method \"", def_->name, "\": input ", i, " (\"", plan_.inputs[i].name,
                       "\") is not set; call SetInput(", i, ", ...) before Execute"));
    }
  }
  // Bindings may be changed in any order between calls (a decode loop swaps its input and output
  // buffers), so the memory the caller bound is checked here, as a whole, before any step runs.
  if (any_output_bound_) FERRY_RETURN_IF_ERROR(CheckCallerMemory());
  // The same loop either way: without a trace it reads no clock and writes no span.
  FERRY_RETURN_IF_ERROR(trace_spans_.empty() ? RunSteps<false>() : RunSteps<true>());
  last_execute_failed_ = false;
  executed_ = true;
  return absl::OkStatus();
}

absl::Status MethodImpl::CheckCallerTensor(const char* what, size_t index, const IoInfo& io,
                                           const TensorRef& expected,
                                           const TensorView& given) const {
  // Built only on the error paths: binding allocates nothing when it succeeds.
  auto label = [&] { return absl::StrCat(what, " ", index, " (\"", io.name, "\")"); };
  const TensorRef& ref = given.ref();
  if (given.given_rank() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrCat(label(), ": the given tensor has rank ",
                                                   given.given_rank(), ", above the maximum ",
                                                   kMaxRank, "; expected shape ",
                                                   ShapeString(expected)));
  }
  if (ref.dtype != expected.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(label(), ": expected dtype ",
                                                   DTypeName(expected.dtype), ", given ",
                                                   DTypeName(ref.dtype)));
  }
  bool same_shape = ref.rank == expected.rank &&
                    std::equal(ref.sizes.begin(), ref.sizes.begin() + ref.rank,
                               expected.sizes.begin());
  if (!same_shape) {
    return absl::InvalidArgumentError(absl::StrCat(label(), ": expected shape ",
                                                   ShapeString(expected), ", given ",
                                                   ShapeString(ref)));
  }
  for (int d = 0; d < ref.rank; ++d) {
    if (ref.sizes[d] != 1 && ref.strides[d] != expected.strides[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          label(), ": expected a dense tensor with strides ", StridesString(expected), ", given ",
          StridesString(ref)));
    }
  }
  if (given.device() != io.device) {
    return absl::InvalidArgumentError(absl::StrCat(label(), " must be on ", io.device_label,
                                                   ", but the given tensor is on ",
                                                   given.device().ToString()));
  }
  const size_t bytes = expected.nbytes();
  if (ref.data == nullptr && bytes > 0) {
    return absl::InvalidArgumentError(absl::StrCat(label(), ": the given data pointer is null"));
  }
  // Kernels, host and device, load and store whole elements.
  const size_t alignment = DTypeSize(expected.dtype);
  if (bytes > 0 && reinterpret_cast<uintptr_t>(ref.data) % alignment != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the given pointer %p is not aligned to %d bytes, as %s elements must be", label(),
        ref.data, alignment, DTypeName(expected.dtype)));
  }
  if (!io.device.is_host()) {
    const DeviceRuntime* runtime = runtime_->devices().Find(io.device);
    if (runtime == nullptr || !runtime->Owns(ref.data, bytes)) {
      const bool freed = runtime != nullptr && runtime->WasFreed(ref.data);
      // Memory of the device whose allocation ends before the tensor does.
      const bool short_allocation = runtime != nullptr && !freed && runtime->Owns(ref.data, 1);
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the given pointer %p (%d bytes) claims to be %s memory, but it is %s", label(),
          ref.data, bytes, io.device_label,
          freed              ? "memory of that device that was freed"
          : short_allocation ? "memory of that device whose allocation ends before the "
                               "tensor's last byte"
                             : "not memory of that device"));
    }
  } else if (runtime_->devices().MayBeDeviceMemory(ref.data)) {
    // Ruled out in O(1) above for pointers outside every device's allocations.
    for (const DeviceRuntime* runtime : runtime_->devices().non_host_runtimes()) {
      // Freed device memory too: a guarded sim device unmaps it, and Execute would fault.
      const bool owns = runtime->Owns(ref.data, 1);
      if (owns || runtime->WasFreed(ref.data)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s must be host memory, but the given pointer %p is memory of %s%s", label(), ref.data,
            runtime->device().ToString(), owns ? "" : " that was freed"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status MethodImpl::CheckCallerMemory() const {
  auto conflict = [&](size_t o, const char* what, size_t index, const IoInfo& io,
                      const CallerRange& other) {
    const CallerRange& out = output_ranges_[o];
    return absl::InvalidArgumentError(absl::StrFormat(
        "method \"%s\": the buffer of output %d (\"%s\") [%p, +%d bytes) overlaps the memory of "
        "%s %d (\"%s\") [%p, +%d bytes); an output buffer must not share memory with an input "
        "or another output buffer, since a step would overwrite what a later step reads. Nothing "
        "was run",
        def_->name, o, plan_.outputs[o].name, reinterpret_cast<void*>(out.begin),
        out.end - out.begin, what, index, io.name, reinterpret_cast<void*>(other.begin),
        other.end - other.begin));
  };
  if (input_ranges_.size() + output_ranges_.size() <= kPairwiseRanges) {
    for (size_t o = 0; o < output_ranges_.size(); ++o) {
      const CallerRange& out = output_ranges_[o];
      if (out.empty()) continue;
      for (size_t i = 0; i < input_ranges_.size(); ++i) {
        if (out.Overlaps(input_ranges_[i])) {
          return conflict(o, "input", i, plan_.inputs[i], input_ranges_[i]);
        }
      }
      for (size_t p = o + 1; p < output_ranges_.size(); ++p) {
        if (out.Overlaps(output_ranges_[p])) {
          return conflict(o, "output", p, plan_.outputs[p], output_ranges_[p]);
        }
      }
    }
    return absl::OkStatus();
  }
  // Many inputs and outputs: one sweep over the ranges in address order, in scratch reserved at
  // load (no allocation). A range that starts before the furthest end seen so far overlaps the
  // range with that end; inputs may share memory with each other, so the furthest end is kept
  // twice, over all ranges and over outputs only.
  auto& ranges = range_scratch_;
  ranges.clear();
  for (size_t i = 0; i < input_ranges_.size(); ++i) {
    if (!input_ranges_[i].empty()) ranges.push_back({input_ranges_[i], static_cast<int64_t>(i)});
  }
  for (size_t o = 0; o < output_ranges_.size(); ++o) {
    if (!output_ranges_[o].empty()) {
      ranges.push_back({output_ranges_[o], -static_cast<int64_t>(o) - 1});
    }
  }
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) {
    return a.first.begin != b.first.begin ? a.first.begin < b.first.begin : a.second < b.second;
  });
  const std::pair<CallerRange, int64_t>* furthest = nullptr;         // over all ranges
  const std::pair<CallerRange, int64_t>* furthest_output = nullptr;  // over outputs
  auto report = [&](const std::pair<CallerRange, int64_t>& a,
                    const std::pair<CallerRange, int64_t>& b) {
    // `a` is an output; `b` an input or another output.
    const size_t o = static_cast<size_t>(-a.second - 1);
    if (b.second >= 0) {
      const size_t i = static_cast<size_t>(b.second);
      return conflict(o, "input", i, plan_.inputs[i], input_ranges_[i]);
    }
    const size_t p = static_cast<size_t>(-b.second - 1);
    return conflict(o, "output", p, plan_.outputs[p], output_ranges_[p]);
  };
  for (const auto& r : ranges) {
    const bool is_output = r.second < 0;
    if (furthest_output != nullptr && r.first.begin < furthest_output->first.end) {
      return report(*furthest_output, r);
    }
    if (is_output && furthest != nullptr && r.first.begin < furthest->first.end) {
      return report(r, *furthest);
    }
    if (furthest == nullptr || r.first.end > furthest->first.end) furthest = &r;
    if (is_output && (furthest_output == nullptr || r.first.end > furthest_output->first.end)) {
      furthest_output = &r;
    }
  }
  return absl::OkStatus();
}

absl::Status MethodImpl::SetInput(size_t index, const TensorView& tensor) {
  FERRY_RETURN_IF_ERROR(CheckIndex(Io::kInput, index));
  if (const Scalar* traced = plan_.inputs[index].value; traced != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(IoLabel(Io::kInput, index), " is ", KindWithArticle(traced->kind),
                     ", not a tensor; set it with SetInput(", index, ", Scalar)"));
  }
  const int32_t b = plan_.placement.input_buffers[index];
  FERRY_RETURN_IF_ERROR(CheckCallerTensor("input", index, plan_.inputs[index], refs_[b], tensor));
  refs_[b].data = tensor.data();
  input_ranges_[index] = CallerRange::Of(tensor.data(), refs_[b].nbytes());
  input_set_[index] = true;
  return absl::OkStatus();
}

absl::Status MethodImpl::SetOutputBuffer(size_t index, const TensorView& tensor) {
  FERRY_RETURN_IF_ERROR(CheckIndex(Io::kOutput, index));
  if (const Scalar* value = plan_.outputs[index].value; value != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(IoLabel(Io::kOutput, index), " is ", KindWithArticle(value->kind),
                     ", not a tensor, so it has no buffer; read it with OutputValue(", index, ")"));
  }
  const LargeTable<PlannedBuffer>& buffers = plan_.placement.buffers;
  const int32_t b = plan_.placement.output_buffers[index];
  // An in-place result returned as the output shares its base's memory: redirect the base.
  const int32_t target = output_targets_[index];
  if (buffers[target].kind != BufferKind::kArena) {
    return absl::FailedPreconditionError(absl::StrCat(
        "output ", index, " (\"", plan_.outputs[index].name, "\") is ", BufferKindName(buffers[target].kind), " memory of value \"",
        def_->values[buffers[target].value].name,
        "\" (not planned per-call storage), so it cannot be written into a caller buffer; read it "
        "with Output(", index, ")"));
  }
  FERRY_RETURN_IF_ERROR(
      CheckCallerTensor("output", index, plan_.outputs[index], refs_[b], tensor));
  refs_[target].data = tensor.data();
  if (target != b) refs_[b].data = tensor.data();
  output_ranges_[index] = CallerRange::Of(tensor.data(), refs_[b].nbytes());
  any_output_bound_ = true;
  return absl::OkStatus();
}

TensorView MethodImpl::Output(size_t index) const {
  if (index >= plan_.outputs.size() || last_execute_failed_) return TensorView();
  const int32_t b = plan_.placement.output_buffers[index];
  if (b < 0) return TensorView();  // not a tensor
  return TensorView(refs_[b], plan_.outputs[index].device);
}

absl::Status MethodImpl::SetInput(size_t index, const Scalar& value) {
  FERRY_RETURN_IF_ERROR(CheckIndex(Io::kInput, index));
  const Scalar* traced = plan_.inputs[index].value;
  if (traced == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(IoLabel(Io::kInput, index), " is a tensor; set it with SetInput(", index,
                     ", TensorView), not ", KindWithArticle(value.kind)));
  }
  if (MatchesTraced(value, *traced)) return absl::OkStatus();
  if (value.kind != traced->kind) {
    return absl::InvalidArgumentError(
        absl::StrCat(IoLabel(Io::kInput, index), " is ", KindWithArticle(traced->kind), ", given ",
                     KindWithArticle(value.kind), " (", value.ToString(), ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      IoLabel(Io::kInput, index), " is fixed at ", traced->ToString(),
      ", the value the program was traced with; given ", value.ToString(),
      traced->kind == Scalar::Kind::kDouble || traced->kind == Scalar::Kind::kDoubleList
          ? " (doubles match within 1e-4 + 1e-5 * |traced|)"
          : ""));
}

absl::StatusOr<const Scalar*> MethodImpl::OutputValue(size_t index,
                                                      std::optional<Scalar::Kind> kind) const {
  FERRY_RETURN_IF_ERROR(CheckIndex(Io::kOutput, index));
  const Scalar* value = plan_.outputs[index].value;
  if (value == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        IoLabel(Io::kOutput, index), " is a tensor; read it with Output(", index, ")"));
  }
  if (kind.has_value() && value->kind != *kind) {
    return absl::InvalidArgumentError(absl::StrCat(IoLabel(Io::kOutput, index), " is ",
                                                   KindWithArticle(value->kind), ", not ",
                                                   KindWithArticle(*kind)));
  }
  if (last_execute_failed_ || !executed_) {
    return absl::FailedPreconditionError(
        absl::StrCat(IoLabel(Io::kOutput, index),
                     ": the method has not run successfully since it was loaded "
                     "or since its last failed Execute"));
  }
  return value;
}

}  // namespace internal

Method::Method(std::unique_ptr<internal::MethodImpl> impl) : impl_(std::move(impl)) {}
Method::~Method() = default;
const MethodDef& Method::def() const { return impl_->def(); }
const MethodPlan& Method::plan() const { return impl_->plan(); }
size_t Method::num_inputs() const { return impl_->plan().inputs.size(); }
size_t Method::num_outputs() const { return impl_->plan().outputs.size(); }
absl::Status Method::SetInput(size_t index, const TensorView& tensor) {
  return impl_->SetInput(index, tensor);
}
absl::Status Method::SetOutputBuffer(size_t index, const TensorView& tensor) {
  return impl_->SetOutputBuffer(index, tensor);
}
namespace {
absl::StatusOr<TensorView> RawView(const char* what, size_t index,
                                   const std::vector<IoInfo>& ios, void* data, size_t bytes,
                                   Device device) {
  if (index >= ios.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", index, " is out of range; the method has ",
                                                   ios.size(), " ", what, "s"));
  }
  const IoInfo& io = ios[index];
  if (bytes < io.bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", index, " (\"", io.name, "\"): the buffer has ", bytes, " bytes, but ",
        TensorMeta{io.dtype, {io.sizes.begin(), io.sizes.end()}, {}}.ToString(), " needs ",
        io.bytes));
  }
  return TensorView(io.dtype, io.sizes, data, device);
}
}  // namespace

absl::Status Method::SetInput(size_t index, void* data, size_t bytes, Device device) {
  FERRY_ASSIGN_OR_RETURN(TensorView view,
                         RawView("input", index, plan().inputs, data, bytes, device));
  return SetInput(index, view);
}

absl::Status Method::SetOutputBuffer(size_t index, void* data, size_t bytes, Device device) {
  FERRY_ASSIGN_OR_RETURN(TensorView view,
                         RawView("output", index, plan().outputs, data, bytes, device));
  return SetOutputBuffer(index, view);
}

absl::Status Method::SetInput(size_t index, const Scalar& value) {
  return impl_->SetInput(index, value);
}

absl::Status Method::Execute() { return impl_->Execute(); }
absl::Span<const TraceStep> Method::trace_steps() const { return impl_->trace_steps(); }
absl::Span<const TraceSpan> Method::last_trace() const { return impl_->last_trace(); }
TensorView Method::Output(size_t index) const { return impl_->Output(index); }

absl::StatusOr<int64_t> Method::OutputInt(size_t index) const {
  FERRY_ASSIGN_OR_RETURN(const Scalar* v, impl_->OutputValue(index, Scalar::Kind::kInt));
  return v->i;
}
absl::StatusOr<double> Method::OutputDouble(size_t index) const {
  FERRY_ASSIGN_OR_RETURN(const Scalar* v, impl_->OutputValue(index, Scalar::Kind::kDouble));
  return v->d;
}
absl::StatusOr<bool> Method::OutputBool(size_t index) const {
  FERRY_ASSIGN_OR_RETURN(const Scalar* v, impl_->OutputValue(index, Scalar::Kind::kBool));
  return v->b;
}
absl::StatusOr<absl::string_view> Method::OutputString(size_t index) const {
  FERRY_ASSIGN_OR_RETURN(const Scalar* v, impl_->OutputValue(index, Scalar::Kind::kString));
  return v->str();
}
absl::StatusOr<const Scalar*> Method::OutputValue(size_t index) const {
  return impl_->OutputValue(index, std::nullopt);
}
const void* Method::buffer_data(int32_t buffer) const { return impl_->buffer_data(buffer); }

}  // namespace ferry
