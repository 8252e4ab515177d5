// Method loading, in phases. MethodImpl::Load runs them in order; each phase reads what the
// earlier ones decided and adds its own part of the loaded method:
//
//   0. CheckTableMemory  the load's own tables (about 1 KiB per node) against host memory: per
//                        value and node first, then with the argument lists ResolveOps counts
//   1. ResolveOps        ops and backends by name; every value's layout in an all-host run
//   2. Place             the placement rules (loader/plan/placement.h): devices, copies, buffers
//   3. ResolveLayouts    one TensorRef per planned buffer, in that buffer's own layout
//   4. InitBackends      one delegate instance per delegate node, its contract checked
//   5. PlanArenas        per device: the arena's offsets and the constant region's size
//   6. CheckBudgets      every device's total against its capacity and the caller's limits
//   7. Allocate          arenas (touched) and constant regions; pointers into them
//   8. ResolveCopies     the copy manifest as executable copies
//   9. Materialize       load-time copies: constant replicas, state initial data (a replica the
//                        program already holds for another method is shared, not made again)
//  10. BuildSteps        the step list Execute runs, with the synchronization it needs
//  11. DescribeIo        the caller-facing description of inputs and outputs
//
// Nothing is allocated before phase 7 except what backends take in Init for their payloads, so
// a program whose declared sizes do not fit is refused before any of its memory is touched.
// Every resource acquired is owned by the MethodImpl under construction, which the caller
// destroys on error.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/memory/memory_planner.h"
#include "ferry/runtime/internal/load_util.h"
#include "ferry/runtime/internal/method_impl.h"
#include "ferry/runtime/internal/replica_cache.h"

namespace ferry {
namespace internal {
namespace {

constexpr size_t kArenaAlignment = 64;

using Clock = std::chrono::steady_clock;
double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

ValueLayout LayoutOf(const TensorRef& ref) {
  ValueLayout layout;
  const absl::Span<const int64_t> sizes(ref.sizes.data(), ref.rank);
  const absl::Span<const int64_t> strides(ref.strides.data(), ref.rank);
  if (ref.IsContiguous()) return layout;  // dense, row-major: nothing to store
  layout.dense = IsDenseLayout(sizes, strides, &layout.dim_order);
  if (layout.dense) {
    layout.dim_order = CanonicalDimOrder(std::move(layout.dim_order));
  } else {
    layout.dim_order.clear();
    layout.strides.assign(strides.begin(), strides.end());
  }
  return layout;
}

// The same dtype, sizes and strides, size-1 dims' strides included (the data pointer aside): an
// op's inferred results may carry any of them (graph_backend.cc's SameLayout ignores those).
bool SameSizesAndStrides(const TensorRef& a, const TensorRef& b) {
  if (a.dtype != b.dtype || a.rank != b.rank) return false;
  for (int32_t i = 0; i < a.rank; ++i) {
    if (a.sizes[i] != b.sizes[i] || a.strides[i] != b.strides[i]) return false;
  }
  return true;
}

// Whether `t` has `meta`'s dtype, sizes and strides (those TensorMeta::FillRef makes), without
// making them for a row-major meta. False where a stride would overflow (FillRef saturates).
bool HasMetaLayout(const TensorRef& t, const TensorMeta& meta, TensorRef& scratch) {
  if (t.dtype != meta.dtype || t.rank != meta.rank()) return false;
  if (!meta.dim_order.empty()) {
    meta.FillRef(scratch);
    return SameSizesAndStrides(t, scratch);
  }
  int64_t stride = 1;
  for (int32_t i = t.rank - 1; i >= 0; --i) {
    if (t.sizes[i] != meta.sizes[i] || t.strides[i] != stride) return false;
    if (i > 0 && __builtin_mul_overflow(stride, meta.sizes[i], &stride)) return false;
  }
  return true;
}

// Whether a host node's op call matches the previous one's: the same schema, argument layouts,
// scalars and declared results. Inference is a function of these (OpSchema::infer), so a node
// that matches reuses the previous node's inferred results: runs of like nodes (a chain, the
// layers of a model) infer once. A tensor laid out as its meta says is compared by its meta, so
// that no layout is made for a node that matches.
class InferMemo {
 public:
  // One argument: a tensor laid out as `meta` says, a tensor laid out otherwise (`layout`), or a
  // scalar. The metas, scalars and declared results are the method's own, unchanged while the
  // memo is used; layouts are copied.
  struct Arg {
    const TensorMeta* meta = nullptr;
    const TensorRef* layout = nullptr;
    const Scalar* scalar = nullptr;
  };

  bool Matches(const OpSchema* schema, absl::Span<const Arg> args,
               absl::Span<const TensorMeta* const> declared) const {
    if (schema != schema_ || args.size() != args_.size() || declared.size() != declared_.size()) {
      return false;
    }
    for (size_t a = 0; a < args.size(); ++a) {
      const Arg& x = args[a];
      const Arg& y = args_[a];
      if (x.meta != nullptr) {
        if (y.meta == nullptr || (x.meta != y.meta && !(*x.meta == *y.meta))) return false;
      } else if (x.layout != nullptr) {
        if (y.layout == nullptr || !SameSizesAndStrides(*x.layout, *y.layout)) return false;
      } else if (y.scalar == nullptr || !(*x.scalar == *y.scalar)) {
        return false;
      }
    }
    for (size_t r = 0; r < declared.size(); ++r) {
      if (!(*declared[r] == *declared_[r])) return false;
    }
    return true;
  }
  // Remembers a call whose inference passed.
  void Set(const OpSchema* schema, absl::Span<const Arg> args,
           absl::Span<const TensorMeta* const> declared) {
    schema_ = schema;
    args_.assign(args.begin(), args.end());
    layouts_.resize(args.size());
    for (size_t a = 0; a < args.size(); ++a) {
      if (args[a].layout == nullptr) continue;
      layouts_[a] = *args[a].layout;
      args_[a].layout = &layouts_[a];
    }
    declared_.assign(declared.begin(), declared.end());
  }

 private:
  const OpSchema* schema_ = nullptr;
  std::vector<Arg> args_;
  std::vector<TensorRef> layouts_;  // args_' layouts point here
  std::vector<const TensorMeta*> declared_;
};

std::string SpecString(DType dtype, absl::Span<const int64_t> sizes) {
  return absl::StrCat(DTypeName(dtype), "[", absl::StrJoin(sizes, ", "), "]");
}

// `a + b`, saturating at SIZE_MAX (a total that large fits nowhere anyway).
size_t SaturatingAdd(size_t a, size_t b) {
  size_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? SIZE_MAX : sum;
}

// `value` rounded up to a multiple of `alignment` (a power of two); false on overflow.
bool RoundUp(size_t value, size_t alignment, size_t* out) {
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

}  // namespace

class MethodLoader {
 public:
  MethodLoader(const Runtime& rt, const MethodDef& m, const LoadOptions& options,
               ProgramResidency* program, MethodImpl& impl)
      : rt_(rt), m_(m), options_(options), program_(program),
        replicas_(program != nullptr ? &program->replicas : nullptr), impl_(impl),
        mctx_(absl::StrCat("method \"", m.name, "\"")) {}

  absl::Status Run() {
    const auto start = Clock::now();
    FERRY_RETURN_IF_ERROR(CheckTableMemory(0, 0));
    FERRY_RETURN_IF_ERROR(ResolveOps());
    FERRY_RETURN_IF_ERROR(CheckTableMemory(list_entries_, payload_bytes_));
    FERRY_RETURN_IF_ERROR(Place());
    impl_.plan_.timings.placement_us = MicrosSince(start);
    const auto materialize_start = Clock::now();
    FERRY_RETURN_IF_ERROR(ResolveLayouts());
    FERRY_RETURN_IF_ERROR(InitBackends());
    FERRY_RETURN_IF_ERROR(PlanArenas());
    FERRY_RETURN_IF_ERROR(CheckBudgets());
    FERRY_RETURN_IF_ERROR(Allocate());
    FERRY_RETURN_IF_ERROR(ResolveCopies());
    FERRY_RETURN_IF_ERROR(Materialize());
    BuildSteps();
    DescribeIo();
    impl_.input_set_.assign(m_.inputs.size(), false);
    impl_.input_ranges_.assign(m_.inputs.size(), CallerRange{});
    impl_.output_ranges_.assign(m_.outputs.size(), CallerRange{});
    impl_.range_scratch_.reserve(m_.inputs.size() + m_.outputs.size());
    impl_.plan_.timings.materialization_us = MicrosSince(materialize_start) - planning_us_;
    return absl::OkStatus();
  }

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
  absl::Status BudgetError(const DeviceMemory& dm, size_t need, size_t have,
                           absl::string_view what, bool host_memory) const;
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

  const Runtime& rt_;
  const MethodDef& m_;
  const LoadOptions& options_;
  ProgramResidency* const program_;  // when loaded through a LoadedProgram
  ReplicaCache* const replicas_;      // program_'s replicas, or nullptr
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

absl::Status MethodLoader::CheckTableMemory(size_t list_entries, size_t payload_bytes) {
  const size_t need =
      LoadTableBytes(m_.values.size(), m_.nodes.size(), list_entries, payload_bytes);
  // Both checks of a load ask the host once (a query reads /proc/meminfo).
  if (need >= kHostMemoryQueryFloorBytes && !host_available_for_tables_.has_value()) {
    host_available_for_tables_ = HostAvailableBytes();
  }
  const size_t available =
      need >= kHostMemoryQueryFloorBytes ? *host_available_for_tables_ : SIZE_MAX;
  const size_t limit = options_.table_memory_limit_bytes;
  if (need <= limit && need <= available) return absl::OkStatus();
  const std::string over =
      limit < available ? absl::StrCat("the ", FormatBytes(limit),
                                       " that LoadOptions::table_memory_limit_bytes "
                                       "allows")
                        : absl::StrCat("the ", FormatBytes(available), " the host has available");
  return absl::ResourceExhaustedError(
      absl::StrCat(mctx_, " has ", m_.values.size(), " values and ", m_.nodes.size(),
                   " nodes: loading it builds about ", FormatBytes(need),
                   " of tables in host memory, more than ", over, ". Nothing was allocated."));
}

// ResolveOps' scratch, reused from node to node.
struct MethodLoader::ResolveScratch {
  TensorRef meta_layout;
  std::vector<InferMemo::Arg> memo_args;    // inference's arguments as the memo compares them
  std::vector<OpArg> args;                  // inference's arguments
  std::vector<TensorRef> arg_layouts;       // the tensor arguments' layouts
  std::vector<const TensorMeta*> declared;  // the node's declared results
  std::vector<InferredResult> inferred;
  // Per inferred result, made with it: whether its layout is dense row-major, and whether it is
  // its declared meta's at offset 0 (so not kept in odd_layouts_).
  struct ResultForm {
    bool contiguous;
    bool as_declared;
  };
  std::vector<ResultForm> inferred_forms;
  InferMemo memo;
  // The last op looked up: runs of nodes of one op (chains, layers) look it up once.
  absl::string_view last_op;
  const OpSchema* last_schema = nullptr;
};

void MethodLoader::SetNaturalFromMeta(ValueId v, TensorRef& scratch) {
  m_.values[v].meta.FillRef(scratch);
  natural_set_[v] = 1;
  if (!scratch.IsContiguous()) pin_.layouts.emplace_back(v, LayoutOf(scratch));
}

absl::Status MethodLoader::ResolveOps() {
  const size_t nv = m_.values.size();
  const size_t nn = m_.nodes.size();
  backends_.assign(nn, nullptr);
  schemas_.assign(nn, nullptr);
  odd_layouts_.clear();
  pin_.method = &m_;
  // Placement's input lists only the nodes with effects and the values whose layout is not dense
  // row-major (what LayoutOf gives a contiguous value); a value's entry is made where its natural
  // layout is, in no particular order, and the list sorted at the end.
  pin_.effects.clear();
  pin_.layouts.clear();
  // Inputs, constants and states are laid out as their meta says, intermediates as their
  // producer makes them. A value's layout is set when a node first reads it (an input, constant
  // or state) or makes it (an intermediate), and at the end for the values no node reads: no walk
  // over the whole value table, which on a large method is out of cache by now.
  natural_set_.assign(nv, 0);
  ResolveScratch scratch;
  for (size_t n = 0; n < nn; ++n) {
    const NodeDef& node = m_.nodes[n];
    list_entries_ += node.args.size() + node.results.size();
    NodeEffects effects;  // most nodes have none
    if (node.kind == NodeKind::kHostOp) {
      FERRY_RETURN_IF_ERROR(ResolveHostOp(n, node, scratch, effects));
    } else {
      FERRY_RETURN_IF_ERROR(ResolveDelegate(n, node, scratch.meta_layout, effects));
    }
    if (!effects.empty()) pin_.effects.emplace_back(static_cast<int32_t>(n), std::move(effects));
  }
  for (size_t v = 0; v < nv; ++v) {
    if (natural_set_[v]) continue;
    const ValueDef& value = m_.values[v];  // scalars, and values no node reads
    if (value.is_tensor() && value.kind != ValueKind::kIntermediate) {
      SetNaturalFromMeta(static_cast<ValueId>(v), scratch.meta_layout);
    }
  }
  auto by_value = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (!std::is_sorted(pin_.layouts.begin(), pin_.layouts.end(), by_value)) {
    std::sort(pin_.layouts.begin(), pin_.layouts.end(), by_value);
  }
  return absl::OkStatus();
}

// A host op: its schema (found by name), its arguments' layouts, its results inferred and
// checked against their declared metas, and its effects (writes, views, shape-only reads).
absl::Status MethodLoader::ResolveHostOp(size_t n, const NodeDef& node, ResolveScratch& s,
                                         NodeEffects& effects) {
  std::vector<InferMemo::Arg>& memo_args = s.memo_args;
  std::vector<OpArg>& args = s.args;
  std::vector<TensorRef>& arg_layouts = s.arg_layouts;
  std::vector<const TensorMeta*>& declared = s.declared;
  std::vector<InferredResult>& inferred = s.inferred;
  std::vector<ResolveScratch::ResultForm>& inferred_forms = s.inferred_forms;
  InferMemo& memo = s.memo;
  const OpSchema* schema =
      s.last_schema != nullptr && node.op == s.last_op ? s.last_schema : rt_.ops().Find(node.op);
  s.last_op = node.op;
  s.last_schema = schema;
  if (schema == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        NodeContext(n), ": unknown op \"", node.op,
        "\"; register it with Runtime::ops().Register before loading"));
  }
  schemas_[n] = schema;
  ++host_steps_;
  host_args_ += node.args.size();
  host_results_ += node.results.size();
  memo_args.assign(node.args.size(), InferMemo::Arg{});
  for (size_t a = 0; a < node.args.size(); ++a) {
    const ValueId id = node.args[a];
    const ValueDef& value = m_.values[id];
    if (value.is_tensor()) {
      // Not yet set: not an intermediate (reading checked that each is made before it is
      // read), so laid out as its meta says.
      if (!natural_set_[id]) SetNaturalFromMeta(id, s.meta_layout);
      if (const InferredResult* odd = OddLayout(id)) {
        memo_args[a].layout = &odd->layout;
      } else {
        memo_args[a].meta = &value.meta;
      }
    } else {
      memo_args[a].scalar = &value.scalar;
    }
  }
  declared.clear();
  for (ValueId r : node.results) declared.push_back(&m_.values[r].meta);
  if (!memo.Matches(schema, memo_args, declared)) {
    args.assign(node.args.size(), OpArg{});
    arg_layouts.resize(node.args.size());
    for (size_t a = 0; a < node.args.size(); ++a) {
      const InferMemo::Arg& arg = memo_args[a];
      if (arg.meta != nullptr) {
        arg.meta->FillRef(arg_layouts[a]);
        args[a].tensor = &arg_layouts[a];
      } else if (arg.layout != nullptr) {
        arg_layouts[a] = *arg.layout;
        args[a].tensor = &arg_layouts[a];
      } else {
        args[a].scalar = arg.scalar;
      }
    }
    FERRY_RETURN_IF_ERROR(
        InferAndCheck(*schema, args, declared, &inferred, [&] { return NodeContext(n); }));
    memo.Set(schema, memo_args, declared);
    inferred_forms.resize(inferred.size());
    for (size_t r = 0; r < inferred.size(); ++r) {
      InferredResult& result = inferred[r];
      result.layout.data = nullptr;
      inferred_forms[r].contiguous = result.layout.IsContiguous();
      inferred_forms[r].as_declared =
          result.view_offset == 0 && HasMetaLayout(result.layout, *declared[r], s.meta_layout);
    }
  }  // else `inferred` holds the previous node's results, which are this node's
  bool any_view = false;
  for (size_t r = 0; r < node.results.size(); ++r) {
    const ValueId v = node.results[r];
    natural_set_[v] = 1;
    if (!inferred_forms[r].as_declared) odd_layouts_.insert_or_assign(v, inferred[r]);
    if (!inferred_forms[r].contiguous) {
      pin_.layouts.emplace_back(v, LayoutOf(inferred[r].layout));
    }
  }
  if (!schema->view_of.empty()) {
    for (size_t r = 0; r < node.results.size(); ++r) {
      any_view = any_view || schema->ViewOf(static_cast<int>(r)) >= 0;
    }
  }
  if (!schema->written_args.empty()) {
    effects.written_args.assign(schema->written_args.begin(), schema->written_args.end());
  }
  if (!schema->shape_only_args.empty()) {
    effects.shape_only_args.assign(schema->shape_only_args.begin(),
                                   schema->shape_only_args.end());
  }
  if (any_view) {  // empty view_of: no result is a view
    effects.view_of.assign(node.results.size(), -1);
    for (size_t r = 0; r < node.results.size(); ++r) {
      effects.view_of[r] = schema->ViewOf(static_cast<int>(r));
    }
  }
  return absl::OkStatus();
}

// A delegate call: its backend (found by name), its results laid out as declared, its writes.
absl::Status MethodLoader::ResolveDelegate(size_t n, const NodeDef& node, TensorRef& meta_layout,
                                           NodeEffects& effects) {
  const Backend* backend = rt_.FindBackend(node.delegate().backend);
  if (backend == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        NodeContext(n), ": no backend named \"", node.delegate().backend,
        "\" is registered; register one under that name with Runtime::RegisterBackend "
        "before loading"));
  }
  backends_[n] = backend;
  payload_bytes_ += node.delegate().payload.size();
  for (ValueId r : node.results) SetNaturalFromMeta(r, meta_layout);
  effects.written_args.assign(node.delegate().written_args.begin(),
                              node.delegate().written_args.end());
  return absl::OkStatus();
}

absl::Status MethodLoader::Place() {
  popt_.skip_h2d_for_method_inputs = options_.skip_h2d_for_method_inputs;
  popt_.skip_d2h_for_method_outputs = options_.skip_d2h_for_method_outputs;
  popt_.error_on_per_call_copies = options_.error_on_per_call_copies;
  popt_.device_map = options_.device_map.value_or(rt_.default_device_map());
  for (const Device& d : rt_.devices().devices()) {
    if (!d.is_host()) popt_.present_devices.push_back(d);
  }
  FERRY_ASSIGN_OR_RETURN(impl_.plan_.placement, PlaceMethod(pin_, popt_));
  std::vector<std::pair<int32_t, NodeEffects>>().swap(pin_.effects);  // placement's alone
  for (const auto& [declared, used] : plan().mapped_devices) label_map_[declared] = used;
  for (size_t n = 0; HasDelegates() && n < m_.nodes.size(); ++n) {
    if (backends_[n] != nullptr && !backends_[n]->SupportsDevice(plan().nodes[n].device.type)) {
      return absl::UnimplementedError(
          absl::StrCat(NodeContext(n), ": backend \"", m_.nodes[n].delegate().backend,
                       "\" does not run on ", DeviceLabel(plan().nodes[n].device, label_map_)));
    }
  }
  return absl::OkStatus();
}

absl::Status MethodLoader::ResolveLayouts() {
  const PlacementPlan& p = plan();
  const size_t nb = p.buffers.size();
  // Made in order, each once: no fill first (the table is the largest of a load).
  impl_.refs_.clear();
  impl_.refs_.reserve(nb);
  impl_.buffer_runtime_.assign(nb, nullptr);
  impl_.alias_offset_.assign(nb, 0);
  // Runs of buffers on one device (most of them) look its runtime up once.
  const Device* last_device = nullptr;
  DeviceRuntime* runtime = nullptr;
  size_t device_index = 0;  // into devices_
  for (size_t b = 0; b < nb; ++b) {
    const PlannedBuffer& buf = p.buffers[b];
    if (last_device == nullptr || buf.device != *last_device) {
      runtime = rt_.devices().Find(buf.device);
      if (runtime == nullptr) {
        return absl::InternalError(absl::StrCat(mctx_, ": device ", buf.device.ToString(),
                                                " has no runtime"));
      }
      last_device = &buf.device;
      device_index = NoteDevice(buf.device);
    }
    ++buffers_on_[device_index];
    impl_.buffer_runtime_[b] = runtime;
    if (buf.kind == BufferKind::kProgramData || buf.kind == BufferKind::kAlias) {
      data_or_alias_buffers_.push_back(static_cast<int32_t>(b));
    }
    if (buf.kind == BufferKind::kAlias) {
      if (buf.value < 0 || static_cast<size_t>(buf.value) >= natural_set_.size() ||
          !natural_set_[buf.value]) {
        return absl::InternalError(absl::StrCat(mctx_, ": planned buffer ", b,
                                                " is a view of value ", buf.value,
                                                ", which has no layout"));
      }
      TensorRef& ref = impl_.refs_.emplace_back();
      impl_.alias_offset_[b] =
          NaturalLayout(buf.value, ref) * static_cast<int64_t>(ref.element_size());
    } else if (buf.dim_order.empty() && m_.values[buf.value].meta.dim_order.empty()) {
      m_.values[buf.value].meta.FillRef(impl_.refs_.emplace_back());
    } else {
      TensorMeta meta = m_.values[buf.value].meta;
      meta.dim_order = buf.dim_order;
      meta.FillRef(impl_.refs_.emplace_back());
    }
  }
  // Delegates are the only nodes off the host.
  for (size_t n = 0; HasDelegates() && n < m_.nodes.size(); ++n) {
    if (backends_[n] != nullptr) NoteDevice(p.nodes[n].device);
  }
  // Per buffer, the buffer whose memory it is, its byte offset there, and the base it shares
  // memory and layout with. A plan makes every alias after its base, so one forward pass finds
  // them all (walking each alias's chain would cost a chain of N in-place writes N^2).
  memory_root_.resize(nb);
  root_offset_.resize(nb);
  same_layout_root_.resize(nb);
  for (size_t b = 0; b < nb; ++b) {
    const PlannedBuffer& buf = p.buffers[b];
    memory_root_[b] = same_layout_root_[b] = static_cast<int32_t>(b);
    root_offset_[b] = 0;
    if (buf.kind != BufferKind::kAlias) continue;
    const int32_t base = buf.alias_of;
    if (base < 0 || static_cast<size_t>(base) >= b) {
      return absl::InternalError(absl::StrCat(mctx_, ": planned buffer ", b, " aliases buffer ",
                                              base, ", which is not made before it"));
    }
    memory_root_[b] = memory_root_[base];
    root_offset_[b] = root_offset_[base] + impl_.alias_offset_[b];
    if (impl_.alias_offset_[b] == 0 && impl_.refs_[b].strides == impl_.refs_[base].strides &&
        impl_.refs_[b].sizes == impl_.refs_[base].sizes) {
      same_layout_root_[b] = same_layout_root_[base];
    }
  }
  // The all-host layouts are done with: their memory goes back for the phases after this one.
  absl::flat_hash_map<ValueId, InferredResult>().swap(odd_layouts_);
  LargeTable<uint8_t>().swap(natural_set_);
  return absl::OkStatus();
}

absl::Status MethodLoader::InitBackends() {
  const size_t nn = m_.nodes.size();
  instance_of_node_.assign(nn, -1);
  DelegateInit init;  // reused: its lists keep their memory from one delegate to the next
  for (size_t n = 0; n < nn; ++n) {
    if (backends_[n] == nullptr) continue;
    const NodeDef& node = m_.nodes[n];
    const NodePlacement& placed = plan().nodes[n];
    init.args.clear();
    init.scalar_args.clear();
    init.results.clear();
    init.node_name = node.name;
    init.payload = node.delegate().payload;
    init.compile_specs = &node.delegate().compile_specs;
    init.device = placed.device;
    init.device_runtime = rt_.devices().Find(placed.device);
    init.written_args.assign(node.delegate().written_args.begin(),
                             node.delegate().written_args.end());
    init.ops = &rt_.ops();
    for (size_t a = 0; a < node.args.size(); ++a) {
      const ValueDef& value = m_.values[node.args[a]];
      if (value.is_tensor()) {
        init.args.push_back(impl_.refs_[placed.arg_buffers[a]]);
        init.scalar_args.push_back(nullptr);
      } else {
        TensorRef none;
        none.rank = -1;
        init.args.push_back(none);
        init.scalar_args.push_back(&value.scalar);
      }
    }
    for (int32_t b : placed.result_buffers) init.results.push_back(impl_.refs_[b]);
    absl::StatusOr<std::unique_ptr<DelegateInstance>> instance = backends_[n]->Init(init);
    if (!instance.ok()) {
      return absl::Status(instance.status().code(),
                          absl::StrCat(NodeContext(n), ": backend \"", node.delegate().backend,
                                       "\" init failed: ", instance.status().message()));
    }
    // Owned by the method from here, so that it is destroyed if a later check fails.
    instance_of_node_[n] = static_cast<int32_t>(impl_.instances_.size());
    impl_.instances_.push_back(*std::move(instance));
    FERRY_RETURN_IF_ERROR(CheckSignature(n, init, impl_.instances_.back()->signature()));
  }
  return absl::OkStatus();
}

absl::Status MethodLoader::CheckSignature(size_t n, const DelegateInit& init,
                                          const DelegateSignature& signature) const {
  const NodeDef& node = m_.nodes[n];
  // The messages' subject, built only on error.
  auto who = [&] {
    return absl::StrCat(NodeContext(n), ": delegate \"", node.delegate().backend, "\"");
  };
  // Tensor arguments, in call order.
  size_t k = 0;
  for (size_t a = 0; a < init.args.size(); ++a) {
    const TensorRef& arg = init.args[a];
    if (arg.rank < 0) continue;
    if (k >= signature.tensor_args.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          who(), " is called with tensor argument ", a, " (\"", m_.values[node.args[a]].name,
          "\"), but its payload reads only ", signature.tensor_args.size(), " tensors"));
    }
    const TensorSpec& spec = signature.tensor_args[k++];
    const absl::Span<const int64_t> sizes(arg.sizes.data(), arg.rank);
    if (spec.dtype != arg.dtype || !SameSizes(spec.sizes, sizes)) {
      return absl::InvalidArgumentError(
          absl::StrCat(who(), ": argument ", a, " (\"", m_.values[node.args[a]].name,
                       "\") is declared ", SpecString(arg.dtype, sizes),
                       ", but the backend's payload reads ", SpecString(spec.dtype, spec.sizes)));
    }
  }
  if (k != signature.tensor_args.size()) {
    return absl::InvalidArgumentError(absl::StrCat(who(), " passes ", k,
                                                   " tensor arguments, but its payload reads ",
                                                   signature.tensor_args.size()));
  }
  if (signature.results.size() != init.results.size()) {
    return absl::InvalidArgumentError(absl::StrCat(who(), " declares ", init.results.size(),
                                                   " results, but its payload produces ",
                                                   signature.results.size()));
  }
  for (size_t r = 0; r < init.results.size(); ++r) {
    const TensorRef& result = init.results[r];
    const TensorSpec& spec = signature.results[r];
    const absl::Span<const int64_t> sizes(result.sizes.data(), result.rank);
    if (spec.dtype != result.dtype || !SameSizes(spec.sizes, sizes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          who(), ": result ", r, " (\"", m_.values[node.results[r]].name, "\") is declared ",
          SpecString(result.dtype, sizes), ", but the backend's payload produces ",
          SpecString(spec.dtype, spec.sizes)));
    }
  }
  return absl::OkStatus();
}

absl::Status MethodLoader::PlanSharedState(int32_t b, DeviceMemory& dm) {
  const PlannedBuffer& buf = plan().buffers[b];
  const ValueDef& value = m_.values[buf.value];
  std::shared_ptr<SharedState> state = program_->states.Find(value.name);
  if (state == nullptr) {
    state = std::make_shared<SharedState>();
    state->method = m_.name;
    state->device = buf.device;
    state->dtype = value.meta.dtype;
    state->sizes = value.meta.sizes;
    state->dim_order = buf.dim_order;
    state->bytes = buf.bytes;
    dm.new_state_bytes = SaturatingAdd(dm.new_state_bytes, buf.bytes);
    dm.shared_state_bytes = SaturatingAdd(dm.shared_state_bytes, buf.bytes);
    states_made_.emplace_back(b, std::move(state));
    return absl::OkStatus();
  }
  const std::string what = absl::StrCat(mctx_, ": shared state \"", value.name, "\"");
  if (state->device != buf.device) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " lives on ", DeviceLabel(buf.device, label_map_),
        " where this method writes or reads it, but method \"", state->method,
        "\" placed it on ", state->device.ToString(),
        "; a shared state has one home device, so every method must place it there"));
  }
  if (state->dtype != value.meta.dtype || state->sizes != value.meta.sizes ||
      state->dim_order != buf.dim_order) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", SpecString(value.meta.dtype, value.meta.sizes), " here but ",
        SpecString(state->dtype, state->sizes), " in method \"", state->method,
        "\" (or in another layout); methods that share a state must declare it alike"));
  }
  dm.shared_state_bytes = SaturatingAdd(dm.shared_state_bytes, buf.bytes);
  reused_buffer_[b] = true;  // its content is the program's: no initial copy
  states_reused_.emplace_back(b, std::move(state));
  return absl::OkStatus();
}

std::optional<ReplicaKey> MethodLoader::ReplicaKeyOf(
    int32_t b, const std::vector<int32_t>& load_copy_into) const {
  const PlacementPlan& p = plan();
  if (replicas_ == nullptr || load_copy_into[b] < 0) return std::nullopt;
  const CopyStep& c = p.copies[load_copy_into[b]];
  // Only replicas of program data are shared: follow the source's views to the constant.
  const int32_t root = memory_root_[c.src_buffer];
  const int64_t offset = root_offset_[c.src_buffer];
  if (p.buffers[root].kind != BufferKind::kProgramData) return std::nullopt;
  const TensorRef& src = impl_.refs_[c.src_buffer];
  ReplicaKey key;
  key.source = m_.values[p.buffers[root].value].data.data() + offset;
  key.dtype = src.dtype;
  key.rank = src.rank;
  key.sizes = src.sizes;
  key.strides = src.strides;
  key.device = p.buffers[b].device;
  key.dim_order = p.buffers[b].dim_order;
  key.bytes = p.buffers[b].bytes;
  key.converts = c.converts_layout;
  return key;
}

absl::Status MethodLoader::PlanArenas() {
  const PlacementPlan& p = plan();
  const size_t nn = m_.nodes.size();
  // Schedule positions of nodes, for delegates' scratch: a method of host ops has none.
  const bool any_delegate = HasDelegates();
  std::vector<int32_t> node_position;
  if (any_delegate) {
    node_position.assign(nn, 0);
    for (size_t s = 0; s < p.schedule.size(); ++s) {
      if (p.schedule[s].kind == ScheduleStep::Kind::kNode) {
        node_position[p.schedule[s].index] = static_cast<int32_t>(s);
      }
    }
  }
  const int32_t end = static_cast<int32_t>(p.schedule.size());
  // The host, then the plan's other devices sorted (PlacementPlan::devices, gathered by
  // ResolveLayouts without another walk of the buffers and nodes).
  std::vector<Device> devices = {Device::Host()};
  std::vector<Device> others = devices_;
  others.erase(std::remove(others.begin(), others.end(), Device::Host()), others.end());
  std::sort(others.begin(), others.end());
  devices.insert(devices.end(), others.begin(), others.end());
  // The host side of every copy to a device that has pinned host memory lives there, so the
  // copies run asynchronously on the device's stream instead of being staged.
  DeviceRuntime* pinning = nullptr;
  for (const Device& d : devices) {
    DeviceRuntime* runtime = rt_.devices().Find(d);
    if (pinning == nullptr && runtime->has_pinned_host_memory()) pinning = runtime;
  }
  // The load-time copy that makes each replica, to tell what it is made from.
  std::vector<int32_t> load_copy_into;  // only replicas (made by load copies) look it up
  if (!p.load_copies.empty()) load_copy_into.assign(p.buffers.size(), -1);
  for (int32_t i : p.load_copies) load_copy_into[p.copies[i].dst_buffer] = i;
  reused_buffer_.assign(p.buffers.size(), false);
  for (const Device& device : devices) {
    const auto device_planning_start = Clock::now();
    DeviceMemory& dm = memory_.emplace_back();
    dm.device = device;
    dm.runtime = rt_.devices().Find(device);
    size_t shared_bytes = 0;  // replicas the program already holds here
    // At most every buffer of the device: ResolveLayouts counted them.
    const size_t device_buffers = BuffersOn(device);
    dm.requests.reserve(device_buffers);
    dm.owners.reserve(device_buffers);
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const PlannedBuffer& buf = p.buffers[b];
      if (buf.device != device || buf.bytes == 0) continue;
      if (buf.kind == BufferKind::kState && program_ != nullptr && m_.values[buf.value].shared) {
        FERRY_RETURN_IF_ERROR(PlanSharedState(static_cast<int32_t>(b), dm));
        continue;
      }
      if (buf.kind == BufferKind::kArena || buf.kind == BufferKind::kState) {
        BufferRequest req;
        req.size = buf.bytes;
        req.alignment = kArenaAlignment;
        req.first_use = buf.first_step >= 0 ? buf.first_step : 0;
        req.last_use = buf.last_step >= 0 ? buf.last_step : end;
        dm.requests.push_back(req);
        dm.owners.push_back(static_cast<int32_t>(b));
      } else if (buf.kind == BufferKind::kConstantReplica) {
        std::optional<ReplicaKey> key = ReplicaKeyOf(static_cast<int32_t>(b), load_copy_into);
        if (key.has_value()) {
          if (std::shared_ptr<void> replica = replicas_->Find(*key)) {
            reused_.emplace_back(static_cast<int32_t>(b), std::move(replica));
            reused_buffer_[b] = true;
            shared_bytes += buf.bytes;
            continue;
          }
          to_share_.emplace_back(static_cast<int32_t>(b), *std::move(key));
        }
        size_t offset = 0;
        if (!RoundUp(dm.constant_bytes, kArenaAlignment, &offset) ||
            __builtin_add_overflow(offset, buf.bytes, &dm.constant_bytes)) {
          return absl::ResourceExhaustedError(absl::StrCat(
              mctx_, ": the constant replicas on ", device.ToString(), " overflow size_t"));
        }
        dm.replicas.emplace_back(static_cast<int32_t>(b), offset);
      }
    }
    for (size_t n = 0; any_delegate && n < nn; ++n) {
      if (instance_of_node_[n] < 0 || p.nodes[n].device != device) continue;
      const size_t bytes = impl_.instances_[instance_of_node_[n]]->scratch_bytes();
      if (bytes == 0) continue;
      dm.requests.push_back({bytes, kArenaAlignment, node_position[n], node_position[n]});
      dm.owners.push_back(-(instance_of_node_[n] + 1));
    }
    FERRY_ASSIGN_OR_RETURN(dm.plan, PlanMemory(dm.requests));
    dm.pinned = device.is_host() && pinning != nullptr && dm.plan.arena_size > 0;
    planning_us_ += MicrosSince(device_planning_start);
    ArenaInfo info;
    info.device = device;
    info.device_label = DeviceLabel(device, label_map_);
    info.arena_bytes = dm.plan.arena_size;
    info.lower_bound = dm.plan.lower_bound;
    info.constant_bytes = dm.constant_bytes;
    info.shared_constant_bytes = shared_bytes;
    info.shared_state_bytes = dm.shared_state_bytes;
    impl_.plan_.arenas.push_back(info);
  }
  pinning_ = pinning;
  impl_.plan_.timings.planning_us = planning_us_;
  return absl::OkStatus();
}

absl::Status MethodLoader::BudgetError(const DeviceMemory& dm, size_t need, size_t have,
                                       absl::string_view what, bool host_memory) const {
  // The largest values planned there, so the caller knows what to shrink.
  std::vector<std::pair<size_t, int32_t>> largest;
  const PlacementPlan& p = plan();
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const PlannedBuffer& buf = p.buffers[b];
    if (buf.bytes == 0) continue;
    const bool there = host_memory ? rt_.devices().Find(buf.device)->uses_host_memory()
                                   : buf.device == dm.device;
    if (there) largest.emplace_back(buf.bytes, static_cast<int32_t>(b));
  }
  const size_t shown = std::min<size_t>(largest.size(), 3);
  std::partial_sort(largest.begin(), largest.begin() + shown, largest.end(),
                    [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::string> names;
  for (size_t i = 0; i < shown; ++i) {
    const PlannedBuffer& buf = p.buffers[largest[i].second];
    names.push_back(absl::StrCat("\"", m_.values[buf.value].name, "\" (",
                                 BufferKindName(buf.kind), " on ", buf.device.ToString(), ") ",
                                 FormatBytes(largest[i].first)));
  }
  const std::string where =
      host_memory ? "host memory (the host and the devices whose memory is host memory, together)"
                  : DeviceLabel(dm.device, label_map_);
  std::string parts;
  if (!host_memory) {
    parts = absl::StrCat(" (arena ", FormatBytes(dm.plan.arena_size), ", constant replicas ",
                         FormatBytes(dm.constant_bytes), ")");
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      mctx_, " does not fit in ", where, ": it needs ", FormatBytes(need), parts, ", but ", what,
      " ", FormatBytes(have), "; the largest values: ", absl::StrJoin(names, ", "),
      ". Nothing was allocated."));
}

absl::Status MethodLoader::CheckBudgets() {
  size_t host_memory_need = 0;  // the host's and sim devices' totals: all of it host RAM
  for (size_t d = 0; d < memory_.size(); ++d) {
    const DeviceMemory& dm = memory_[d];
    ArenaInfo& info = impl_.plan_.arenas[d];
    const size_t need = dm.total();
    info.available_bytes = dm.runtime->available_bytes();
    if (auto it = options_.memory_limits.find(dm.device); it != options_.memory_limits.end()) {
      info.limit_bytes = it->second;
    }
    if (need == 0) continue;
    if (need > info.limit_bytes) {
      return BudgetError(dm, need, info.limit_bytes, "LoadOptions::memory_limits allows", false);
    }
    const size_t available = info.available_bytes;
    if (need > available) {
      return BudgetError(dm, need, available, "the device has available", false);
    }
    // Near the limit: loading works, but the next method or a neighbour's growth may not.
    const size_t bound = std::min(info.limit_bytes, available);
    if (need > bound / 10 * 8) {
      Diagnostic diag;
      diag.severity = Diagnostic::Severity::kWarning;
      diag.message = absl::StrFormat(
          "%s takes %s on %s, %.0f%% of the %s %s", mctx_, FormatBytes(need),
          DeviceLabel(dm.device, label_map_), 100.0 * static_cast<double>(need) / bound,
          FormatBytes(bound), bound == available ? "available there" : "its memory limit allows");
      diag.devices = {dm.device};
      diag.bytes = need;
      impl_.plan_.placement.diagnostics.push_back(std::move(diag));
    }
    if (dm.runtime->uses_host_memory() || dm.pinned) {
      host_memory_need = SaturatingAdd(host_memory_need, need);
    }
  }
  // The host's entry (the first) asked the host already.
  const size_t available = !memory_.empty() && memory_.front().device.is_host()
                               ? impl_.plan_.arenas.front().available_bytes
                               : rt_.devices().Find(Device::Host())->available_bytes();
  if (host_memory_need > available) {
    return BudgetError(memory_.front(), host_memory_need, available, "the host has available",
                       true);
  }
  return absl::OkStatus();
}

absl::Status MethodLoader::Allocate() {
  scratch_.assign(impl_.instances_.size(), nullptr);
  for (const DeviceMemory& dm : memory_) {
    char* base = nullptr;
    if (dm.pinned) {
      FERRY_ASSIGN_OR_RETURN(void* pinned, pinning_->AllocatePinnedHost(dm.plan.arena_size));
      impl_.pinned_arenas_.emplace_back(pinning_, pinned);
      std::memset(pinned, 0, dm.plan.arena_size);
      base = static_cast<char*>(pinned);
    } else {
      FERRY_ASSIGN_OR_RETURN(
          DeviceBuffer arena, DeviceBuffer::Allocate(*dm.runtime, dm.plan.arena_size,
                                                     kArenaAlignment));
      FERRY_RETURN_IF_ERROR(arena.Touch());
      base = static_cast<char*>(arena.data());
      impl_.arenas_.push_back(std::move(arena));
    }
    for (size_t i = 0; i < dm.requests.size(); ++i) {
      if (dm.owners[i] >= 0) {
        impl_.refs_[dm.owners[i]].data = base + dm.plan.offsets[i];
      } else {
        scratch_[-dm.owners[i] - 1] = base + dm.plan.offsets[i];
      }
    }
    FERRY_ASSIGN_OR_RETURN(DeviceBuffer constants,
                           DeviceBuffer::Allocate(*dm.runtime, dm.constant_bytes,
                                                  kArenaAlignment));
    auto region = std::make_shared<DeviceBuffer>(std::move(constants));
    char* cbase = static_cast<char*>(region->data());
    for (const auto& [b, offset] : dm.replicas) {
      impl_.refs_[b].data = cbase + offset;
      region_of_buffer_[b] = region;
    }
    impl_.constant_regions_.push_back(std::move(region));
  }
  for (auto& [b, replica] : reused_) {
    impl_.refs_[b].data = replica.get();
    impl_.shared_replicas_.push_back(std::move(replica));
  }
  for (auto& [b, state] : states_made_) {
    DeviceRuntime* runtime = impl_.buffer_runtime_[b];
    FERRY_ASSIGN_OR_RETURN(state->buffer,
                           DeviceBuffer::Allocate(*runtime, state->bytes, kArenaAlignment));
    impl_.refs_[b].data = state->buffer.data();
    impl_.shared_states_.push_back(state);
  }
  for (auto& [b, state] : states_reused_) {
    impl_.refs_[b].data = state->buffer.data();
    impl_.shared_states_.push_back(std::move(state));
  }
  const PlacementPlan& p = plan();
  for (const int32_t b : data_or_alias_buffers_) {  // in buffer order: bases before their views
    const PlannedBuffer& buf = p.buffers[b];
    if (buf.kind == BufferKind::kProgramData) {
      impl_.refs_[b].data = const_cast<uint8_t*>(m_.values[buf.value].data.data());
    } else if (buf.kind == BufferKind::kAlias && impl_.refs_[buf.alias_of].data != nullptr) {
      // Views of constants are needed at load (their replicas are made from them).
      impl_.refs_[b].data =
          static_cast<char*>(impl_.refs_[buf.alias_of].data) + impl_.alias_offset_[b];
    }
  }
  return absl::OkStatus();
}

absl::Status MethodLoader::ResolveCopies() {
  const PlacementPlan& p = plan();
  impl_.copies_.resize(p.copies.size());
  for (size_t i = 0; i < p.copies.size(); ++i) {
    const CopyStep& c = p.copies[i];
    CopyExec& e = impl_.copies_[i];
    e.direction = c.direction;
    e.src_runtime = impl_.buffer_runtime_[c.src_buffer];
    e.dst_runtime = impl_.buffer_runtime_[c.dst_buffer];
    e.src = &impl_.refs_[c.src_buffer];
    e.dst = &impl_.refs_[c.dst_buffer];
    e.bytes = c.bytes;
    e.copy = static_cast<int32_t>(i);
    const PlannedBuffer& src = p.buffers[c.src_buffer];
    const PlannedBuffer& dst = p.buffers[c.dst_buffer];
    const bool same_layout =
        src.kind != BufferKind::kAlias
            ? src.dim_order == dst.dim_order
            : (pin_.LayoutOf(src.value).dense &&
               CanonicalDimOrder(pin_.LayoutOf(src.value).dim_order) == dst.dim_order);
    e.strided = c.converts_layout || !same_layout;
    if (!e.strided) continue;
    const TensorRef& s = *e.src;
    std::vector<int32_t> order = dst.dim_order;
    if (order.empty()) {
      for (int32_t d = 0; d < s.rank; ++d) order.push_back(d);
    }
    e.rank = s.rank;
    for (int32_t d = 0; d < s.rank; ++d) {
      e.sizes[d] = s.sizes[order[d]];
      e.strides[d] = s.strides[order[d]];
    }
    if (c.direction != CopyDirection::kHostToDevice && c.direction != CopyDirection::kHostToHost) {
      return absl::InternalError(absl::StrCat(mctx_, ": copy ", i, " (", c.reason,
                                              ") needs a layout conversion off the host"));
    }
  }
  return absl::OkStatus();
}

absl::Status MethodLoader::Materialize() {
  const PlacementPlan& p = plan();
  // Program data that calls read on the host too (a constant some host op reads in place) keeps
  // its pages, so that no call faults them back in; the rest may be dropped once copied.
  std::vector<bool> read_per_call;
  if (m_.mapping != nullptr && !p.load_copies.empty()) {
    read_per_call.assign(p.buffers.size(), false);
    auto mark = [&](int32_t b) {
      if (b >= 0) read_per_call[memory_root_[b]] = true;
    };
    for (const NodePlacement& placed : p.nodes) {
      for (int32_t b : placed.arg_buffers) mark(b);
    }
    for (const CopyStep& c : p.copies) {
      if (c.timing == CopyTiming::kPerCall) mark(c.src_buffer);
    }
    for (int32_t b : p.output_buffers) mark(b);
  }
  for (int32_t i : p.load_copies) {
    // A replica the program already holds is made.
    if (reused_buffer_[p.copies[i].dst_buffer]) continue;
    const int32_t src = p.copies[i].src_buffer;
    const bool droppable = m_.mapping != nullptr &&
                           p.buffers[src].kind == BufferKind::kProgramData && !read_per_call[src];
    absl::Status s = RunLoadCopy(impl_.copies_[i], droppable ? m_.mapping : nullptr);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(mctx_, ": load-time copy ", i, " (",
                                                 p.copies[i].reason, "): ", s.message()));
    }
  }
  for (const DeviceMemory& dm : memory_) FERRY_RETURN_IF_ERROR(dm.runtime->Synchronize());
  // Made: later methods of the program may share them (each keeps its region alive).
  for (const auto& [b, key] : to_share_) {
    auto region = region_of_buffer_.find(b);
    if (region == region_of_buffer_.end()) {
      return absl::InternalError(
          absl::StrCat(mctx_, ": replica buffer ", b, " to share has no constant region"));
    }
    replicas_->Add(key, std::shared_ptr<void>(region->second, impl_.refs_[b].data));
  }
  for (const auto& [b, state] : states_made_) {
    program_->states.Add(m_.values[plan().buffers[b].value].name, state);
  }
  return absl::OkStatus();
}

void MethodLoader::BuildSteps() {
  const PlacementPlan& p = plan();
  std::vector<DeviceRuntime*> pending;
  auto add_pending = [&](DeviceRuntime* r) {
    if (r != nullptr && !r->device().is_host() &&
        std::find(pending.begin(), pending.end(), r) == pending.end()) {
      pending.push_back(r);
    }
  };
  auto sync_all = [&](auto& out, int32_t node) {
    for (DeviceRuntime* r : pending) {
      Step s;
      s.kind = Step::Kind::kSync;
      s.runtime = r;
      s.node = node;
      out.push_back(s);
    }
    pending.clear();
  };
  std::vector<OpArg> args;           // scratch, reused per node
  std::vector<ViewFixup> views;      // scratch
  std::vector<TensorRef*> results;  // scratch
  impl_.steps_.reserve(p.schedule.size());
  impl_.host_tables_.Reserve(host_steps_, host_args_, host_results_);
  for (const ScheduleStep& ss : p.schedule) {
    if (ss.kind == ScheduleStep::Kind::kCopy) {
      const CopyExec& e = impl_.copies_[ss.index];
      if (e.direction == CopyDirection::kDeviceToDevice && e.src_runtime != e.dst_runtime &&
          std::find(pending.begin(), pending.end(), e.src_runtime) != pending.end()) {
        Step s;
        s.kind = Step::Kind::kSync;
        s.runtime = e.src_runtime;
        impl_.steps_.push_back(s);
      }
      Step s;
      s.kind = Step::Kind::kCopy;
      s.index = ss.index;
      s.node = p.copies[ss.index].node;
      impl_.steps_.push_back(s);
      add_pending(e.src_runtime);
      add_pending(e.dst_runtime);
      continue;
    }
    const int32_t n = ss.index;
    const NodeDef& node = m_.nodes[n];  // for scalar arguments and delegates only
    const NodePlacement& placed = p.nodes[n];
    if (placed.device.is_host()) sync_all(impl_.steps_, n);
    Step::Kind kind;
    int32_t index;
    if (schemas_[n] != nullptr) {
      // The placement has a buffer (or -1, a scalar) per argument and per result, so that the
      // node itself is read only for scalars: on a large method its table is out of cache.
      const size_t num_args = placed.arg_buffers.size();
      args.assign(num_args, OpArg{});
      for (size_t a = 0; a < num_args; ++a) {
        if (placed.arg_buffers[a] >= 0) {
          args[a].tensor = &impl_.refs_[placed.arg_buffers[a]];
        } else {
          args[a].scalar = &m_.values[node.args[a]].scalar;
        }
      }
      results.clear();
      views.clear();
      for (const int32_t b : placed.result_buffers) {
        results.push_back(&impl_.refs_[b]);
        if (memory_root_[b] != b) {  // an alias (its memory is its base's)
          views.push_back({&impl_.refs_[b], &impl_.refs_[p.buffers[b].alias_of],
                           impl_.alias_offset_[b]});
        }
      }
      kind = Step::Kind::kHost;
      index = static_cast<int32_t>(impl_.host_tables_.Add(*schemas_[n], args, results, views));
    } else {
      DelegateExec d;
      d.instance = impl_.instances_[instance_of_node_[n]].get();
      d.scope = placed.device.is_host() ? nullptr : rt_.devices().Find(placed.device);
      d.args_begin = impl_.delegate_refs_.size();
      for (size_t a = 0; a < node.args.size(); ++a) {
        impl_.delegate_refs_.push_back(
            placed.arg_buffers[a] >= 0 ? &impl_.refs_[placed.arg_buffers[a]] : nullptr);
      }
      d.num_args = node.args.size();
      d.results_begin = impl_.delegate_refs_.size();
      for (int32_t b : placed.result_buffers) impl_.delegate_refs_.push_back(&impl_.refs_[b]);
      d.num_results = placed.result_buffers.size();
      d.scratch = scratch_[instance_of_node_[n]];
      kind = Step::Kind::kDelegate;
      index = static_cast<int32_t>(impl_.delegates_.size());
      impl_.delegates_.push_back(d);
      add_pending(d.scope);
    }
    // Filled in place (see HostStepTables::Add).
    Step& s = impl_.steps_.emplace_back();
    s.kind = kind;
    s.node = n;
    s.index = index;
  }
  sync_all(impl_.final_syncs_, -1);
  impl_.host_tables_.Finalize();
}

void MethodLoader::DescribeIo() {
  const PlacementPlan& p = plan();
  auto describe = [&](ValueId v, const Device& device) {
    const ValueDef& value = m_.values[v];
    return IoInfo{value.name,
                  value.meta.dtype,
                  {value.meta.sizes.begin(), value.meta.sizes.end()},
                  value.meta.ByteSize().value_or(0),
                  device,
                  DeviceLabel(device, label_map_)};
  };
  for (size_t i = 0; i < m_.inputs.size(); ++i) {
    impl_.plan_.inputs.push_back(describe(m_.inputs[i], p.input_device(i)));
  }
  for (size_t i = 0; i < m_.outputs.size(); ++i) {
    impl_.plan_.outputs.push_back(describe(m_.outputs[i], p.output_device(i)));
  }
  // An in-place result returned as an output shares its base's memory and layout: a caller's
  // buffer bound to the output replaces the base's memory. Found here, not per SetOutputBuffer.
  impl_.output_targets_.reserve(m_.outputs.size());
  for (int32_t b : p.output_buffers) impl_.output_targets_.push_back(same_layout_root_[b]);
}

absl::StatusOr<std::unique_ptr<MethodImpl>> MethodImpl::Load(const Runtime& rt,
                                                             const MethodDef& m,
                                                             const LoadOptions& options,
                                                             ProgramResidency* program) {
  std::unique_ptr<MethodImpl> impl(new MethodImpl());
  impl->runtime_ = &rt;
  impl->def_ = &m;
  MethodLoader loader(rt, m, options, program, *impl);
  FERRY_RETURN_IF_ERROR(loader.Run());
  return impl;
}

}  // namespace internal
}  // namespace ferry
