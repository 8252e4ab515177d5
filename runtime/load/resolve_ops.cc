// Load phases 0 and 1 (runtime/method_loader.cc lists them all): the load's own tables
// against host memory, then ops and backends by name and every value's layout in an all-host run.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "ferry/base/status_macros.h"
#include "ferry/base/text.h"
#include "ferry/runtime/internal/method_loader.h"

namespace ferry {
namespace internal {

namespace {

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

}  // namespace

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
    return absl::UnimplementedError(
        absl::StrCat(NodeContext(n), ": unknown op \"", EscapeUntrusted(node.op),
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
    effects.shape_only_args.assign(schema->shape_only_args.begin(), schema->shape_only_args.end());
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
        NodeContext(n), ": no backend named \"", EscapeUntrusted(node.delegate().backend),
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

}  // namespace internal
}  // namespace ferry
