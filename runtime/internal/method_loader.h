// The method loader: the state its phases share and one member per phase. The phases are listed
// in runtime/method_loader.cc and defined in runtime/load/<phase>.cc. Internal to runtime/.
#ifndef FERRY_RUNTIME_INTERNAL_METHOD_LOADER_H_
#define FERRY_RUNTIME_INTERNAL_METHOD_LOADER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ferry/memory/memory_planner.h"
#include "ferry/runtime/internal/load_util.h"
#include "ferry/runtime/internal/method_impl.h"
#include "ferry/runtime/internal/replica_cache.h"

namespace ferry {
namespace internal {

inline constexpr size_t kArenaAlignment = 64;

using Clock = std::chrono::steady_clock;
inline double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// `a + b`, saturating at SIZE_MAX (a total that large fits nowhere anyway).
inline size_t SaturatingAdd(size_t a, size_t b) {
  size_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? SIZE_MAX : sum;
}

// `value` rounded up to a multiple of `alignment` (a power of two); false on overflow.
inline bool RoundUp(size_t value, size_t alignment, size_t* out) {
  if (__builtin_add_overflow(value, alignment - 1, out)) return false;
  *out &= ~(alignment - 1);
  return true;
}

// One device's share of the method's memory, planned before anything is allocated.
struct DeviceMemory {
  Device device;
  DeviceRuntime* runtime = nullptr;
  LargeTable<BufferRequest> requests;
  LargeTable<int32_t> owners;  // per request: buffer index, or -(instance + 1) for scratch
  std::vector<std::pair<int32_t, size_t>> replicas;  // constant replica buffer, offset
  size_t constant_bytes = 0;
  size_t shared_state_bytes = 0;  // shared states used here (made here or by earlier methods)
  size_t new_state_bytes = 0;     // those of them made here
  MemoryPlan plan;
  bool pinned = false;  // the host arena, in pinned memory of `pinning`
  size_t total() const {
    return SaturatingAdd(SaturatingAdd(plan.arena_size, constant_bytes), new_state_bytes);
  }
};

class MethodLoader {
 public:
  MethodLoader(const Runtime& rt, const MethodDef& m, const LoadOptions& options,
               ProgramResidency* program, MethodImpl& impl)
      : rt_(rt),
        m_(m),
        options_(options),
        program_(program),
        replicas_(program != nullptr ? &program->replicas : nullptr),
        impl_(impl),
        mctx_(absl::StrCat("method \"", m.name, "\"")) {}

  // Runs the phases in order (runtime/method_loader.cc).
  absl::Status Run();

 private:
  std::string NodeContext(size_t n) const {
    return absl::StrCat(mctx_, ", node ", n, " (", m_.nodes[n].name, ")");
  }
  const PlacementPlan& plan() const { return impl_.plan_.placement; }

  // 0. The host memory of the load's own tables (LoadTableBytes) against the host's available
  // memory and LoadOptions::table_memory_limit_bytes: before any table is built, for the tables
  // per value and per node (`list_entries` and `payload_bytes` 0), and again once ResolveOps has
  // counted the argument lists and payloads, before the tables that grow with them.
  absl::Status CheckTableMemory(size_t list_entries, size_t payload_bytes);
  std::optional<size_t> host_available_for_tables_;  // asked by the first check that needs it
  // 1. Ops and backends by name, and the layout of every value in an all-host run (shape
  // inference checks every host op's declared results).
  absl::Status ResolveOps();
  struct ResolveScratch;
  absl::Status ResolveHostOp(size_t n, const NodeDef& node, ResolveScratch& scratch,
                             NodeEffects& effects);
  absl::Status ResolveDelegate(size_t n, const NodeDef& node, TensorRef& meta_layout,
                               NodeEffects& effects);
  // Value v's natural layout is its meta's (`scratch` receives it).
  void SetNaturalFromMeta(ValueId v, TensorRef& scratch);
  // 2. Placement: a pure function of the method, the op effects and the options.
  absl::Status Place();
  // 3. One TensorRef per planned buffer, in the buffer's own layout (data still null).
  absl::Status ResolveLayouts();
  // 4. Delegate instances, initialized with the layouts their arguments have on their device;
  // each instance's signature must match what the program declares for the node.
  absl::Status InitBackends();
  absl::Status CheckSignature(size_t n, const DelegateInit& init,
                              const DelegateSignature& signature) const;
  // 5. Per device: arena offsets from buffer lifetimes, constant region size.
  absl::Status PlanArenas();
  // What replica buffer `b` is made from and what it is, when the program shares replicas and
  // `b` is made from program data; nullopt otherwise.
  std::optional<ReplicaKey> ReplicaKeyOf(int32_t b,
                                         const std::vector<int32_t>& load_copy_into) const;
  // Shared state buffer `b`, when the program shares states: the program's buffer when an
  // earlier method made it (checked to agree), else one this method makes. Outside the arena.
  absl::Status PlanSharedState(int32_t b, DeviceMemory& dm);
  // 6. Every device's total against its capacity and LoadOptions::memory_limits; the host's and
  // sim devices' totals together against the host's memory.
  absl::Status CheckBudgets();
  // ResourceExhausted naming the device (or host memory as a whole), the bytes needed and had,
  // and the largest values planned there.
  absl::Status BudgetError(const DeviceMemory& dm, size_t need, size_t have, absl::string_view what,
                           bool host_memory) const;
  // 7. Arenas (touched at load, never during a call) and constant regions.
  absl::Status Allocate();
  // 8. The copy manifest, resolved to runtimes and TensorRefs.
  absl::Status ResolveCopies();
  // 9. Load-time copies: constant replicas and state initial data.
  absl::Status Materialize();
  // 10. The step list, with synchronization wherever the host needs device work finished.
  void BuildSteps();
  // 11. Inputs' and outputs' names, shapes and devices, for the caller.
  void DescribeIo();
  // With LoadOptions::record_trace: what each step is (Method::trace_steps), and the spans a
  // call fills, sized once here.
  void RecordTraceSteps();

  const Runtime& rt_;
  const MethodDef& m_;
  const LoadOptions& options_;
  ProgramResidency* const program_;  // when loaded through a LoadedProgram
  ReplicaCache* const replicas_;     // program_'s replicas, or nullptr
  MethodImpl& impl_;
  const std::string mctx_;

  // Phase 1.
  LargeTable<const Backend*> backends_;
  LargeTable<const OpSchema*> schemas_;
  // The host nodes' count and their arguments and results in all (ResolveOps counts them, for
  // BuildSteps to size its tables).
  size_t host_steps_ = 0;
  size_t host_args_ = 0;
  size_t host_results_ = 0;
  // Entries of every node's argument and result lists, and bytes of the delegates' payloads
  // (ResolveOps counts them, for CheckTableMemory).
  size_t list_entries_ = 0;
  size_t payload_bytes_ = 0;
  // Whether some node is a delegate (after ResolveOps): the walks for delegates only skip
  // methods of host ops.
  bool HasDelegates() const { return host_steps_ < m_.nodes.size(); }
  // The devices the plan's buffers and nodes use (the host among them when it is used), each
  // once, and the buffers on each: ResolveLayouts gathers them for PlanArenas.
  std::vector<Device> devices_;
  std::vector<size_t> buffers_on_;  // parallel to devices_
  // Buffers of program data and aliases, in order (ResolveLayouts), for Allocate to point at
  // the program's bytes and at their bases without another walk over every buffer.
  std::vector<int32_t> data_or_alias_buffers_;
  size_t NoteDevice(const Device& d) {
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == d) return i;
    }
    devices_.push_back(d);
    buffers_on_.push_back(0);
    return devices_.size() - 1;
  }
  // Value v's layout and view offset when they are not its meta's at offset 0, else nullptr.
  const InferredResult* OddLayout(ValueId v) const {
    if (odd_layouts_.empty()) return nullptr;  // most methods: no lookup at all
    auto it = odd_layouts_.find(v);
    return it != odd_layouts_.end() ? &it->second : nullptr;
  }
  // Value v's layout in an all-host run into `layout` (data nullptr); returns its element offset
  // from the base it is a view of (0 for a value that is no view). Only for natural_set_ values.
  int64_t NaturalLayout(ValueId v, TensorRef& layout) const {
    if (const InferredResult* odd = OddLayout(v)) {
      layout = odd->layout;
      return odd->view_offset;
    }
    m_.values[v].meta.FillRef(layout);
    return 0;
  }
  size_t BuffersOn(const Device& d) const {
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == d) return buffers_on_[i];
    }
    return 0;
  }
  // Per tensor value, its layout in an all-host run and a view's element offset from its base
  // (NaturalLayout), made in ResolveOps (natural_set_ says which are made). Most are their
  // meta's (TensorMeta::FillRef) at offset 0 and are not stored; the others, views and results
  // an op lays out otherwise than declared, are kept here.
  absl::flat_hash_map<ValueId, InferredResult> odd_layouts_;
  LargeTable<uint8_t> natural_set_;
  // Phase 3.
  LargeTable<int32_t> memory_root_;  // per buffer: the non-alias buffer whose memory it uses
  LargeTable<int64_t> root_offset_;  // per buffer: its byte offset in memory_root_'s memory
  // Per buffer: the furthest base it shares memory and layout with (at offset 0), or itself.
  LargeTable<int32_t> same_layout_root_;
  PlacementInput pin_;
  // Phase 2.
  PlacementOptions popt_;
  // Devices the method declared that the map sent elsewhere, for labels ("cuda:0 (as sim:0)").
  absl::flat_hash_map<Device, Device> label_map_;
  // Phase 4.
  LargeTable<int32_t> instance_of_node_;
  // Phases 5 and 7.
  std::vector<DeviceMemory> memory_;  // host first, then the plan's devices
  DeviceRuntime* pinning_ = nullptr;  // the device whose pinned memory holds the host arena
  std::vector<void*> scratch_;        // per instance
  double planning_us_ = 0;
  // Replicas the program already holds (buffer, replica), and this method's new ones that it
  // will share once made (buffer, key).
  std::vector<std::pair<int32_t, std::shared_ptr<void>>> reused_;
  std::vector<std::pair<int32_t, ReplicaKey>> to_share_;
  std::vector<bool> reused_buffer_;  // per buffer
  // The constant region of each replica buffer made here (few buffers of most methods are).
  absl::flat_hash_map<int32_t, std::shared_ptr<DeviceBuffer>> region_of_buffer_;
  // Shared states: those the program holds already, and those this method makes.
  std::vector<std::pair<int32_t, std::shared_ptr<SharedState>>> states_reused_;
  std::vector<std::pair<int32_t, std::shared_ptr<SharedState>>> states_made_;
};

}  // namespace internal
}  // namespace ferry

#endif  // FERRY_RUNTIME_INTERNAL_METHOD_LOADER_H_
