#include "runtime/method.h"

#include <algorithm>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "memory/memory_planner.h"
#include "memory/status_macros.h"
#include "runtime/internal/method_impl.h"

namespace ferry {
namespace internal {
namespace {

constexpr size_t kArenaAlignment = 64;

using Clock = std::chrono::steady_clock;
double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

std::string ShapeString(const TensorRef& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes.begin(), t.sizes.begin() + t.rank, ", "), "]");
}
std::string StridesString(const TensorRef& t) {
  return absl::StrCat("(", absl::StrJoin(t.strides.begin(), t.strides.begin() + t.rank, ", "),
                      ")");
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

std::string DeviceLabel(const Device& device, const absl::flat_hash_map<Device, Device>& map) {
  std::vector<Device> declared;
  for (const auto& [from, to] : map) {
    if (to == device && from != device) declared.push_back(from);
  }
  if (declared.empty()) return device.ToString();
  std::sort(declared.begin(), declared.end());
  return absl::StrCat(declared.front().ToString(), " (as ", device.ToString(), ")");
}

// Load-time copies of program data run in pieces of this size, so that the program's pages
// resident in the process stay bounded however large a constant is.
constexpr size_t kLoadChunkBytes = size_t{16} << 20;

// madvise over the whole pages inside [data, data + bytes); a hint, never an error.
void AdvisePages(const void* data, size_t bytes, int advice) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(page - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

// Maps the source pages of a piece in one call instead of one fault per page.
void PrefetchPages(const void* data, size_t bytes) {
#ifdef MADV_POPULATE_READ
  AdvisePages(data, bytes, MADV_POPULATE_READ);
#else
  AdvisePages(data, bytes, MADV_WILLNEED);
#endif
}

// A load-time copy (constant replica or state initial data) from the program's data. Runs in
// pieces of kLoadChunkBytes when the copy is dense: each piece's source pages are mapped ahead of
// the copy and, when the program is a read-only file mapping, dropped from the process after it
// (the file keeps them; dropping never changes what the memory reads). A copy of more than one
// piece is therefore issued, and counted by the device, as one copy per piece.
absl::Status RunLoadCopy(const CopyExec& c, bool mapped_file) {
  const char* src = static_cast<const char*>(c.src->data);
  char* dst = static_cast<char*>(c.dst->data);
  const bool dense = !c.strided && (c.direction == CopyDirection::kHostToDevice ||
                                    c.direction == CopyDirection::kHostToHost);
  if (!dense || c.bytes <= kLoadChunkBytes) {
    if (mapped_file) PrefetchPages(src, c.bytes);
    FERRY_RETURN_IF_ERROR(RunCopy(c));
    FERRY_RETURN_IF_ERROR(c.dst_runtime->Synchronize());
    if (mapped_file) AdvisePages(src, c.bytes, MADV_DONTNEED);
    return absl::OkStatus();
  }
  for (size_t done = 0; done < c.bytes; done += kLoadChunkBytes) {
    const size_t n = std::min(kLoadChunkBytes, c.bytes - done);
    if (mapped_file) PrefetchPages(src + done, n);
    if (c.direction == CopyDirection::kHostToHost) {
      std::memcpy(dst + done, src + done, n);
    } else {
      FERRY_RETURN_IF_ERROR(c.dst_runtime->CopyHostToDevice(dst + done, src + done, n));
      // The source must have been read before its pages are dropped.
      FERRY_RETURN_IF_ERROR(c.dst_runtime->Synchronize());
    }
    if (mapped_file) AdvisePages(src + done, n, MADV_DONTNEED);
  }
  return absl::OkStatus();
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

absl::StatusOr<std::unique_ptr<MethodImpl>> MethodImpl::Load(const Runtime& rt,
                                                             const MethodDef& m,
                                                             const LoadOptions& options) {
  std::unique_ptr<MethodImpl> impl(new MethodImpl());
  impl->runtime_ = &rt;
  impl->def_ = &m;
  const size_t nv = m.values.size();
  const size_t nn = m.nodes.size();
  const std::string mctx = absl::StrCat("method \"", m.name, "\"");
  auto node_ctx = [&](size_t n) {
    return absl::StrCat(mctx, ", node ", n, " (", m.nodes[n].name, ")");
  };
  auto start = Clock::now();

  // 1. Ops, backends and the layout of every value in an all-host run.
  std::vector<const Backend*> backends(nn, nullptr);
  std::vector<TensorRef> natural(nv);
  for (size_t v = 0; v < nv; ++v) {
    const ValueDef& value = m.values[v];
    if (value.is_tensor() && value.kind != ValueKind::kIntermediate) natural[v] = value.meta.ToRef();
  }
  // Per value: the offset in elements of a view from the data of the value it aliases.
  std::vector<int64_t> view_offset(nv, 0);
  std::vector<OpArg> args;                   // scratch, reused per node
  std::vector<const TensorMeta*> declared;   // scratch
  std::vector<InferredResult> inferred;      // scratch
  PlacementInput pin;
  pin.method = &m;
  pin.effects.resize(nn);
  pin.layouts.resize(nv);
  std::vector<const OpSchema*> schemas(nn, nullptr);
  for (size_t n = 0; n < nn; ++n) {
    const NodeDef& node = m.nodes[n];
    NodeEffects& effects = pin.effects[n];
    if (node.kind == NodeKind::kHostOp) {
      const OpSchema* schema = rt.ops().Find(node.op);
      if (schema == nullptr) {
        return absl::UnimplementedError(absl::StrCat(
            node_ctx(n), ": unknown op \"", node.op,
            "\"; register it with Runtime::ops().Register before loading"));
      }
      schemas[n] = schema;
      args.assign(node.args.size(), OpArg{});
      for (size_t a = 0; a < node.args.size(); ++a) {
        const ValueDef& value = m.values[node.args[a]];
        if (value.is_tensor()) {
          args[a].tensor = &natural[node.args[a]];
        } else {
          args[a].scalar = &value.scalar;
        }
      }
      declared.clear();
      for (ValueId r : node.results) declared.push_back(&m.values[r].meta);
      FERRY_RETURN_IF_ERROR(
          InferAndCheck(*schema, args, declared, &inferred, [&] { return node_ctx(n); }));
      bool any_view = false;
      for (size_t r = 0; r < node.results.size(); ++r) {
        natural[node.results[r]] = inferred[r].layout;
        natural[node.results[r]].data = nullptr;
        view_offset[node.results[r]] = inferred[r].view_offset;
        any_view = any_view || schema->ViewOf(static_cast<int>(r)) >= 0;
      }
      effects.written_args.assign(schema->written_args.begin(), schema->written_args.end());
      effects.shape_only_args.assign(schema->shape_only_args.begin(),
                                     schema->shape_only_args.end());
      if (any_view) {  // empty view_of: no result is a view
        effects.view_of.assign(node.results.size(), -1);
        for (size_t r = 0; r < node.results.size(); ++r) {
          effects.view_of[r] = schema->ViewOf(static_cast<int>(r));
        }
      }
    } else {
      const Backend* backend = rt.FindBackend(node.backend);
      if (backend == nullptr) {
        return absl::NotFoundError(absl::StrCat(node_ctx(n), ": no backend named \"",
                                                node.backend, "\" is registered"));
      }
      backends[n] = backend;
      for (ValueId r : node.results) natural[r] = m.values[r].meta.ToRef();
      effects.written_args.assign(node.written_args.begin(), node.written_args.end());
    }
  }
  for (size_t v = 0; v < nv; ++v) {
    if (m.values[v].is_tensor()) pin.layouts[v] = LayoutOf(natural[v]);
  }

  // 2. Placement.
  PlacementOptions popt;
  popt.skip_h2d_for_method_inputs = options.skip_h2d_for_method_inputs;
  popt.skip_d2h_for_method_outputs = options.skip_d2h_for_method_outputs;
  popt.error_on_per_call_copies = options.error_on_per_call_copies;
  popt.device_map = options.device_map.value_or(rt.default_device_map());
  for (const Device& d : rt.devices().devices()) {
    if (!d.is_host()) popt.present_devices.push_back(d);
  }
  FERRY_ASSIGN_OR_RETURN(impl->plan_.placement, PlaceMethod(pin, popt));
  impl->plan_.timings.placement_us = MicrosSince(start);
  const PlacementPlan& plan = impl->plan_.placement;
  auto materialize_start = Clock::now();

  for (size_t n = 0; n < nn; ++n) {
    if (backends[n] != nullptr && !backends[n]->SupportsDevice(plan.nodes[n].device.type)) {
      return absl::UnimplementedError(absl::StrCat(
          node_ctx(n), ": backend \"", m.nodes[n].backend, "\" does not run on ",
          DeviceLabel(plan.nodes[n].device, popt.device_map)));
    }
  }

  // 3. One TensorRef per buffer, in the buffer's own layout.
  const size_t nb = plan.buffers.size();
  impl->refs_.resize(nb);
  impl->buffer_runtime_.assign(nb, nullptr);
  impl->alias_offset_.assign(nb, 0);
  for (size_t b = 0; b < nb; ++b) {
    const PlannedBuffer& buf = plan.buffers[b];
    DeviceRuntime* runtime = rt.devices().Find(buf.device);
    if (runtime == nullptr) {
      return absl::InternalError(absl::StrCat(mctx, ": device ", buf.device.ToString(),
                                              " has no runtime"));
    }
    impl->buffer_runtime_[b] = runtime;
    if (buf.kind == BufferKind::kAlias) {
      impl->refs_[b] = natural[buf.value];
      impl->alias_offset_[b] =
          view_offset[buf.value] * static_cast<int64_t>(natural[buf.value].element_size());
    } else if (buf.dim_order.empty() && m.values[buf.value].meta.dim_order.empty()) {
      impl->refs_[b] = m.values[buf.value].meta.ToRef();
    } else {
      TensorMeta meta = m.values[buf.value].meta;
      meta.dim_order = buf.dim_order;
      impl->refs_[b] = meta.ToRef();
    }
  }

  // 4. Delegate backends, initialized with the layouts their arguments have on their device.
  std::vector<int32_t> instance_of_node(nn, -1);
  for (size_t n = 0; n < nn; ++n) {
    if (backends[n] == nullptr) continue;
    const NodeDef& node = m.nodes[n];
    const NodePlacement& placed = plan.nodes[n];
    DelegateInit init;
    init.node_name = node.name;
    init.payload = node.payload;
    init.compile_specs = &node.compile_specs;
    init.device = placed.device;
    init.device_runtime = rt.devices().Find(placed.device);
    init.written_args = node.written_args;
    init.ops = &rt.ops();
    for (size_t a = 0; a < node.args.size(); ++a) {
      const ValueDef& value = m.values[node.args[a]];
      if (value.is_tensor()) {
        init.args.push_back(impl->refs_[placed.arg_buffers[a]]);
        init.scalar_args.push_back(nullptr);
      } else {
        TensorRef none;
        none.rank = -1;
        init.args.push_back(none);
        init.scalar_args.push_back(&value.scalar);
      }
    }
    for (int32_t b : placed.result_buffers) init.results.push_back(impl->refs_[b]);
    absl::StatusOr<std::unique_ptr<DelegateInstance>> instance = backends[n]->Init(init);
    if (!instance.ok()) {
      return absl::Status(instance.status().code(),
                          absl::StrCat(node_ctx(n), ": backend \"", node.backend,
                                       "\" init failed: ", instance.status().message()));
    }
    instance_of_node[n] = static_cast<int32_t>(impl->instances_.size());
    impl->instances_.push_back(*std::move(instance));
  }

  // 5. Arenas and constant regions, one of each per device, sized exactly from the plan.
  std::vector<int32_t> node_position(nn, 0);
  for (size_t p = 0; p < plan.schedule.size(); ++p) {
    if (plan.schedule[p].kind == ScheduleStep::Kind::kNode) {
      node_position[plan.schedule[p].index] = static_cast<int32_t>(p);
    }
  }
  const int32_t end = static_cast<int32_t>(plan.schedule.size());
  std::vector<Device> devices = {Device::Host()};
  for (const Device& d : plan.devices()) devices.push_back(d);
  std::vector<void*> scratch(impl->instances_.size(), nullptr);
  DeviceRuntime* pinning = nullptr;  // a CUDA device whose pinned memory holds the host arena
  for (const Device& d : devices) {
    if (d.type == DeviceType::kCuda && pinning == nullptr) pinning = rt.devices().Find(d);
  }
  double planning_us = 0;
  for (const Device& device : devices) {
    auto device_planning_start = Clock::now();
    DeviceRuntime* runtime = rt.devices().Find(device);
    std::vector<BufferRequest> requests;
    std::vector<int32_t> owners;  // buffer index, or -(instance + 1) for scratch
    size_t constant_bytes = 0;
    std::vector<std::pair<int32_t, size_t>> replicas;
    for (size_t b = 0; b < nb; ++b) {
      const PlannedBuffer& buf = plan.buffers[b];
      if (buf.device != device || buf.bytes == 0) continue;
      if (buf.kind == BufferKind::kArena || buf.kind == BufferKind::kState) {
        BufferRequest req;
        req.size = buf.bytes;
        req.alignment = kArenaAlignment;
        req.first_use = buf.first_step >= 0 ? buf.first_step : 0;
        req.last_use = buf.last_step >= 0 ? buf.last_step : end;
        requests.push_back(req);
        owners.push_back(static_cast<int32_t>(b));
      } else if (buf.kind == BufferKind::kConstantReplica) {
        constant_bytes = (constant_bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
        replicas.emplace_back(static_cast<int32_t>(b), constant_bytes);
        constant_bytes += buf.bytes;
      }
    }
    for (size_t n = 0; n < nn; ++n) {
      if (instance_of_node[n] < 0 || plan.nodes[n].device != device) continue;
      size_t bytes = impl->instances_[instance_of_node[n]]->scratch_bytes();
      if (bytes == 0) continue;
      requests.push_back({bytes, kArenaAlignment, node_position[n], node_position[n]});
      owners.push_back(-(instance_of_node[n] + 1));
    }
    FERRY_ASSIGN_OR_RETURN(MemoryPlan mplan, PlanMemory(requests));
    planning_us += MicrosSince(device_planning_start);
    ArenaInfo info;
    info.device = device;
    info.arena_bytes = mplan.arena_size;
    info.lower_bound = mplan.lower_bound;
    info.constant_bytes = constant_bytes;
    impl->plan_.arenas.push_back(info);
    char* base = nullptr;
    if (device.is_host() && pinning != nullptr && mplan.arena_size > 0) {
      // The host side of every copy to a CUDA device lives in pinned memory, so copies are
      // asynchronous on the device's stream instead of staged.
      FERRY_ASSIGN_OR_RETURN(void* pinned, pinning->AllocatePinnedHost(mplan.arena_size));
      impl->pinned_arenas_.emplace_back(pinning, pinned);
      std::memset(pinned, 0, mplan.arena_size);
      base = static_cast<char*>(pinned);
    } else {
      FERRY_ASSIGN_OR_RETURN(DeviceBuffer arena,
                             DeviceBuffer::Allocate(*runtime, mplan.arena_size, kArenaAlignment));
      FERRY_RETURN_IF_ERROR(arena.Touch());
      base = static_cast<char*>(arena.data());
      impl->arenas_.push_back(std::move(arena));
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      if (owners[i] >= 0) {
        impl->refs_[owners[i]].data = base + mplan.offsets[i];
      } else {
        scratch[-owners[i] - 1] = base + mplan.offsets[i];
      }
    }
    FERRY_ASSIGN_OR_RETURN(DeviceBuffer constants,
                           DeviceBuffer::Allocate(*runtime, constant_bytes, kArenaAlignment));
    char* cbase = static_cast<char*>(constants.data());
    for (const auto& [b, offset] : replicas) impl->refs_[b].data = cbase + offset;
    impl->constant_regions_.push_back(std::move(constants));
  }
  impl->plan_.timings.planning_us = planning_us;
  for (size_t b = 0; b < nb; ++b) {
    const PlannedBuffer& buf = plan.buffers[b];
    if (buf.kind == BufferKind::kProgramData) {
      impl->refs_[b].data = const_cast<uint8_t*>(m.values[buf.value].data.data());
    } else if (buf.kind == BufferKind::kAlias && impl->refs_[buf.alias_of].data != nullptr) {
      // Views of constants are needed at load (their replicas are made from them).
      impl->refs_[b].data =
          static_cast<char*>(impl->refs_[buf.alias_of].data) + impl->alias_offset_[b];
    }
  }

  // 6. The copies of the manifest, resolved.
  impl->copies_.resize(plan.copies.size());
  for (size_t i = 0; i < plan.copies.size(); ++i) {
    const CopyStep& c = plan.copies[i];
    CopyExec& e = impl->copies_[i];
    e.direction = c.direction;
    e.src_runtime = impl->buffer_runtime_[c.src_buffer];
    e.dst_runtime = impl->buffer_runtime_[c.dst_buffer];
    e.src = &impl->refs_[c.src_buffer];
    e.dst = &impl->refs_[c.dst_buffer];
    e.bytes = c.bytes;
    e.copy = static_cast<int32_t>(i);
    const PlannedBuffer& src = plan.buffers[c.src_buffer];
    const PlannedBuffer& dst = plan.buffers[c.dst_buffer];
    bool same_layout = src.kind != BufferKind::kAlias
                           ? src.dim_order == dst.dim_order
                           : (pin.layouts[src.value].dense &&
                              CanonicalDimOrder(pin.layouts[src.value].dim_order) == dst.dim_order);
    e.strided = c.converts_layout || !same_layout;
    if (e.strided) {
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
        return absl::InternalError(absl::StrCat(mctx, ": copy ", i, " (", c.reason,
                                                ") needs a layout conversion off the host"));
      }
    }
  }

  // 7. Load-time copies: state initial data and constant replicas, streamed from the program
  // (see RunLoadCopy), so materializing large constants keeps host memory bounded. Program data
  // that calls read on the host too (a constant some host op reads in place) keeps its pages,
  // so that no call faults them back in.
  std::vector<bool> read_per_call;
  if (m.data_in_mapped_file && !plan.load_copies.empty()) {
    read_per_call.assign(nb, false);
    auto mark = [&](int32_t b) {
      while (b >= 0 && plan.buffers[b].kind == BufferKind::kAlias) b = plan.buffers[b].alias_of;
      if (b >= 0) read_per_call[b] = true;
    };
    for (const NodePlacement& placed : plan.nodes) {
      for (int32_t b : placed.arg_buffers) mark(b);
    }
    for (const CopyStep& c : plan.copies) {
      if (c.timing == CopyTiming::kPerCall) mark(c.src_buffer);
    }
    for (int32_t b : plan.output_buffers) mark(b);
  }
  for (int32_t i : plan.load_copies) {
    const int32_t src = plan.copies[i].src_buffer;
    const bool mapped = m.data_in_mapped_file &&
                        plan.buffers[src].kind == BufferKind::kProgramData && !read_per_call[src];
    absl::Status s = RunLoadCopy(impl->copies_[i], mapped);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(mctx, ": load-time copy ", i, " (",
                                                 plan.copies[i].reason, "): ", s.message()));
    }
  }
  for (const Device& device : devices) {
    FERRY_RETURN_IF_ERROR(rt.devices().Find(device)->Synchronize());
  }

  // 8. The step list, with synchronization wherever the host needs device work finished.
  std::vector<DeviceRuntime*> pending;
  auto add_pending = [&](DeviceRuntime* r) {
    if (r != nullptr && !r->device().is_host() &&
        std::find(pending.begin(), pending.end(), r) == pending.end()) {
      pending.push_back(r);
    }
  };
  auto sync_all = [&](std::vector<Step>& out, int32_t node) {
    for (DeviceRuntime* r : pending) {
      Step s;
      s.kind = Step::Kind::kSync;
      s.runtime = r;
      s.node = node;
      out.push_back(s);
    }
    pending.clear();
  };
  std::vector<ViewFixup> views;      // scratch, reused per node
  std::vector<TensorRef*> results;  // scratch
  impl->steps_.reserve(plan.schedule.size());
  for (const ScheduleStep& ss : plan.schedule) {
    if (ss.kind == ScheduleStep::Kind::kCopy) {
      const CopyExec& e = impl->copies_[ss.index];
      if (e.direction == CopyDirection::kDeviceToDevice && e.src_runtime != e.dst_runtime &&
          std::find(pending.begin(), pending.end(), e.src_runtime) != pending.end()) {
        Step s;
        s.kind = Step::Kind::kSync;
        s.runtime = e.src_runtime;
        impl->steps_.push_back(s);
      }
      Step s;
      s.kind = Step::Kind::kCopy;
      s.index = ss.index;
      s.node = plan.copies[ss.index].node;
      impl->steps_.push_back(s);
      add_pending(e.src_runtime);
      add_pending(e.dst_runtime);
      continue;
    }
    const int32_t n = ss.index;
    const NodeDef& node = m.nodes[n];
    const NodePlacement& placed = plan.nodes[n];
    if (placed.device.is_host()) sync_all(impl->steps_, n);
    Step s;
    s.node = n;
    if (schemas[n] != nullptr) {
      args.assign(node.args.size(), OpArg{});
      for (size_t a = 0; a < node.args.size(); ++a) {
        if (placed.arg_buffers[a] >= 0) {
          args[a].tensor = &impl->refs_[placed.arg_buffers[a]];
        } else {
          args[a].scalar = &m.values[node.args[a]].scalar;
        }
      }
      results.clear();
      views.clear();
      for (size_t r = 0; r < node.results.size(); ++r) {
        int32_t b = placed.result_buffers[r];
        results.push_back(&impl->refs_[b]);
        if (plan.buffers[b].kind == BufferKind::kAlias) {
          views.push_back({&impl->refs_[b], &impl->refs_[plan.buffers[b].alias_of],
                           impl->alias_offset_[b]});
        }
      }
      s.kind = Step::Kind::kHost;
      s.index = static_cast<int32_t>(impl->host_tables_.Add(*schemas[n], args, results, views));
    } else {
      DelegateExec d;
      d.instance = impl->instances_[instance_of_node[n]].get();
      d.scope = placed.device.is_host() ? nullptr : rt.devices().Find(placed.device);
      d.args_begin = impl->delegate_refs_.size();
      for (size_t a = 0; a < node.args.size(); ++a) {
        impl->delegate_refs_.push_back(
            placed.arg_buffers[a] >= 0 ? &impl->refs_[placed.arg_buffers[a]] : nullptr);
      }
      d.num_args = node.args.size();
      d.results_begin = impl->delegate_refs_.size();
      for (int32_t b : placed.result_buffers) impl->delegate_refs_.push_back(&impl->refs_[b]);
      d.num_results = placed.result_buffers.size();
      d.scratch = scratch[instance_of_node[n]];
      s.kind = Step::Kind::kDelegate;
      s.index = static_cast<int32_t>(impl->delegates_.size());
      impl->delegates_.push_back(d);
      add_pending(d.scope);
    }
    impl->steps_.push_back(s);
  }
  sync_all(impl->final_syncs_, -1);
  impl->host_tables_.Finalize();

  // Caller-facing metadata.
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const ValueDef& value = m.values[m.inputs[i]];
    const Device& device = plan.input_device(i);
    impl->plan_.inputs.push_back({value.name, value.meta.dtype,
                                  {value.meta.sizes.begin(), value.meta.sizes.end()},
                                  value.meta.ByteSize().value_or(0), device,
                                  DeviceLabel(device, popt.device_map)});
  }
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    const ValueDef& value = m.values[m.outputs[i]];
    const Device& device = plan.output_device(i);
    impl->plan_.outputs.push_back({value.name, value.meta.dtype,
                                   {value.meta.sizes.begin(), value.meta.sizes.end()},
                                   value.meta.ByteSize().value_or(0), device,
                                   DeviceLabel(device, popt.device_map)});
  }
  impl->input_set_.assign(m.inputs.size(), false);
  impl->plan_.timings.materialization_us = MicrosSince(materialize_start) - planning_us;
  return impl;
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

absl::Status MethodImpl::Execute() {
  for (size_t i = 0; i < input_set_.size(); ++i) {
    if (!input_set_[i]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "method \"", def_->name, "\": input ", i, " (\"", plan_.inputs[i].name,
          "\") is not set; call SetInput(", i, ", ...) before Execute"));
    }
  }
  const std::vector<HostStep>& host_steps = host_tables_.steps();
  for (const Step& step : steps_) {
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
    if (!s.ok()) {
      // Leave no device work referring to caller memory behind.
      for (const Step& sync : final_syncs_) sync.runtime->Synchronize().IgnoreError();
      return StepError(step, s);
    }
  }
  for (const Step& sync : final_syncs_) {
    absl::Status s = sync.runtime->Synchronize();
    if (!s.ok()) return StepError(sync, s);
  }
  return absl::OkStatus();
}

absl::Status MethodImpl::CheckCallerTensor(const char* what, size_t index, const IoInfo& io,
                                           const TensorRef& expected,
                                           const TensorView& given) const {
  const std::string label = absl::StrCat(what, " ", index, " (\"", io.name, "\")");
  const TensorRef& ref = given.ref();
  if (ref.dtype != expected.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": expected dtype ",
                                                   DTypeName(expected.dtype), ", given ",
                                                   DTypeName(ref.dtype)));
  }
  bool same_shape = ref.rank == expected.rank &&
                    std::equal(ref.sizes.begin(), ref.sizes.begin() + ref.rank,
                               expected.sizes.begin());
  if (!same_shape) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": expected shape ",
                                                   ShapeString(expected), ", given ",
                                                   ShapeString(ref)));
  }
  for (int d = 0; d < ref.rank; ++d) {
    if (ref.sizes[d] != 1 && ref.strides[d] != expected.strides[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": expected a dense tensor with strides ", StridesString(expected), ", given ",
          StridesString(ref)));
    }
  }
  if (given.device() != io.device) {
    return absl::InvalidArgumentError(absl::StrCat(label, " must be on ", io.device_label,
                                                   ", but the given tensor is on ",
                                                   given.device().ToString()));
  }
  const size_t bytes = expected.nbytes();
  if (ref.data == nullptr && bytes > 0) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": the given data pointer is null"));
  }
  if (!io.device.is_host()) {
    const DeviceRuntime* runtime = runtime_->devices().Find(io.device);
    if (runtime == nullptr || !runtime->Owns(ref.data, bytes)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the given pointer %p (%d bytes) claims to be %s memory, but it is not memory of "
          "that device",
          label, ref.data, bytes, io.device_label));
    }
  } else {
    for (const Device& d : runtime_->devices().devices()) {
      if (d.is_host()) continue;
      const DeviceRuntime* runtime = runtime_->devices().Find(d);
      if (runtime != nullptr && runtime->Owns(ref.data, 1)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s must be host memory, but the given pointer %p is memory of %s",
                            label, ref.data, d.ToString()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status MethodImpl::SetInput(size_t index, const TensorView& tensor) {
  if (index >= input_set_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("method \"", def_->name, "\": input ", index,
                                                   " is out of range; the method has ",
                                                   input_set_.size(), " inputs"));
  }
  const int32_t b = plan_.placement.input_buffers[index];
  FERRY_RETURN_IF_ERROR(CheckCallerTensor("input", index, plan_.inputs[index], refs_[b], tensor));
  refs_[b].data = tensor.data();
  input_set_[index] = true;
  return absl::OkStatus();
}

absl::Status MethodImpl::SetOutputBuffer(size_t index, const TensorView& tensor) {
  if (index >= plan_.outputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("method \"", def_->name, "\": output ", index,
                                                   " is out of range; the method has ",
                                                   plan_.outputs.size(), " outputs"));
  }
  const std::vector<PlannedBuffer>& buffers = plan_.placement.buffers;
  const int32_t b = plan_.placement.output_buffers[index];
  // An in-place result returned as the output shares its base's memory: redirect the base.
  int32_t target = b;
  while (buffers[target].kind == BufferKind::kAlias && alias_offset_[target] == 0 &&
         refs_[target].strides == refs_[buffers[target].alias_of].strides &&
         refs_[target].sizes == refs_[buffers[target].alias_of].sizes) {
    target = buffers[target].alias_of;
  }
  const std::string label =
      absl::StrCat("output ", index, " (\"", plan_.outputs[index].name, "\")");
  if (buffers[target].kind != BufferKind::kArena) {
    return absl::FailedPreconditionError(absl::StrCat(
        label, " is ", BufferKindName(buffers[target].kind), " memory of value \"",
        def_->values[buffers[target].value].name,
        "\" (not planned per-call storage), so it cannot be written into a caller buffer; read it "
        "with Output(", index, ")"));
  }
  FERRY_RETURN_IF_ERROR(
      CheckCallerTensor("output", index, plan_.outputs[index], refs_[b], tensor));
  refs_[target].data = tensor.data();
  if (target != b) refs_[b].data = tensor.data();
  return absl::OkStatus();
}

TensorView MethodImpl::Output(size_t index) const {
  const int32_t b = plan_.placement.output_buffers[index];
  return TensorView(refs_[b], plan_.outputs[index].device);
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

absl::Status Method::Execute() { return impl_->Execute(); }
TensorView Method::Output(size_t index) const { return impl_->Output(index); }
const void* Method::buffer_data(int32_t buffer) const { return impl_->buffer_data(buffer); }

}  // namespace ferry
