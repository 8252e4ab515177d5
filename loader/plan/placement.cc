#include "ferry/loader/plan/placement.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"

namespace ferry {

const char* CopyDirectionName(CopyDirection direction) {
  switch (direction) {
    case CopyDirection::kHostToDevice:
      return "h2d";
    case CopyDirection::kDeviceToHost:
      return "d2h";
    case CopyDirection::kDeviceToDevice:
      return "d2d";
    case CopyDirection::kHostToHost:
      return "h2h";
  }
  return "?";
}

const char* CopyTimingName(CopyTiming timing) {
  return timing == CopyTiming::kOnce ? "once" : "per call";
}

const char* BufferKindName(BufferKind kind) {
  switch (kind) {
    case BufferKind::kArena:
      return "arena";
    case BufferKind::kInput:
      return "input";
    case BufferKind::kProgramData:
      return "program data";
    case BufferKind::kConstantReplica:
      return "constant replica";
    case BufferKind::kState:
      return "state";
    case BufferKind::kAlias:
      return "alias";
  }
  return "?";
}

const Device& PlacementPlan::DeviceOf(int32_t buffer) const {
  static const Device kHost = Device::Host();
  return buffer < 0 ? kHost : buffers[buffer].device;
}

int PlacementPlan::per_call_copies() const {
  int n = 0;
  for (const CopyStep& c : copies) n += c.timing == CopyTiming::kPerCall;
  return n;
}

size_t PlacementPlan::per_call_bytes() const {
  size_t n = 0;
  for (const CopyStep& c : copies) {
    if (c.timing == CopyTiming::kPerCall) n += c.bytes;
  }
  return n;
}

std::vector<Device> PlacementPlan::devices() const {
  std::set<Device> set;
  for (const PlannedBuffer& b : buffers) {
    if (!b.device.is_host()) set.insert(b.device);
  }
  for (const NodePlacement& n : nodes) {
    if (!n.device.is_host()) set.insert(n.device);
  }
  return std::vector<Device>(set.begin(), set.end());
}

std::string FormatDiagnostics(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const Diagnostic& d : diagnostics) {
    absl::StrAppend(&out, d.severity == Diagnostic::Severity::kError ? "error: " : "warning: ",
                    d.message, "\n");
  }
  return out;
}

std::vector<int32_t> CanonicalDimOrder(std::vector<int32_t> order) {
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != static_cast<int32_t>(i)) return order;
  }
  return {};
}

namespace {

// Entry `key` of a list of (key, entry) pairs in increasing key order, or nullptr.
template <typename Entry>
const Entry* FindSorted(const std::vector<std::pair<int32_t, Entry>>& list, int32_t key) {
  auto it = std::lower_bound(list.begin(), list.end(), key,
                             [](const auto& e, int32_t k) { return e.first < k; });
  return it != list.end() && it->first == key ? &it->second : nullptr;
}

// Whether a list of (key, entry) pairs has keys in [0, limit), increasing; else the position of
// the first that is not (list.size() when all are).
template <typename Entry>
size_t FirstUnsorted(const std::vector<std::pair<int32_t, Entry>>& list, size_t limit) {
  for (size_t i = 0; i < list.size(); ++i) {
    const int32_t k = list[i].first;
    if (k < 0 || static_cast<size_t>(k) >= limit || (i > 0 && k <= list[i - 1].first)) return i;
  }
  return list.size();
}

}  // namespace

const NodeEffects& PlacementInput::EffectsOf(int32_t n) const {
  static const NodeEffects kNone;
  const NodeEffects* e = FindSorted(effects, n);
  return e != nullptr ? *e : kNone;
}

const ValueLayout& PlacementInput::LayoutOf(ValueId v) const {
  static const ValueLayout kRowMajor;
  const ValueLayout* l = FindSorted(layouts, v);
  return l != nullptr ? *l : kRowMajor;
}

namespace {

std::string DimOrderString(const std::vector<int32_t>& order, int32_t rank) {
  if (order.empty()) {
    std::vector<int32_t> identity(rank);
    for (int32_t i = 0; i < rank; ++i) identity[i] = i;
    return absl::StrCat("(", absl::StrJoin(identity, ", "), ")");
  }
  return absl::StrCat("(", absl::StrJoin(order, ", "), ")");
}

std::vector<int32_t> CanonicalOrder(std::vector<int32_t> order) {
  return CanonicalDimOrder(std::move(order));
}

// Makes `list` n entries of -1 and returns them. InlinedVector's assign takes a general path
// (about 50 instructions a call, twice per node); lists of a few entries fill faster one by one.
template <typename List>
int32_t* FreshList(List& list, size_t n) {
  list.clear();
  for (size_t i = 0; i < n; ++i) list.push_back(-1);
  return list.data();
}

// The values of a method that share a name, per name in order of the first value (of those
// names), each group in value order. Values are added in order, each once.
//
// Most methods' names are all distinct, and a hash set of every name costs a random access into
// a table as large as the method per value. So each name's 64-bit hash is kept (8 bytes a value,
// written in order) and marked in a bitmap of at least 8 bits per value (in cache); a value whose
// bit was already set may share its name. Only when some did are the kept hashes walked again,
// and only the values whose bit was found twice sorted by hash, those of equal hashes grouped by
// name.
class SharedNameFinder {
 public:
  explicit SharedNameFinder(const MethodDef& m) : m_(m) {
    size_t bits = 4096;
    while (bits < 8 * m.values.size()) bits *= 2;
    mask_ = bits - 1;
    seen_.assign(bits / 64, 0);
    hashes_.reserve(m.values.size());
  }

  void Add(ValueId v) {
    const uint64_t h = absl::HashOf(absl::string_view(m_.values[v].name));
    hashes_.push_back(h);
    const size_t bit = h & mask_;
    uint64_t& word = seen_[bit >> 6];
    const uint64_t flag = uint64_t{1} << (bit & 63);
    if ((word & flag) != 0) {
      again_.insert(bit);
    } else {
      word |= flag;
    }
  }

  std::vector<std::vector<ValueId>> Take() {
    std::vector<std::vector<ValueId>> groups;
    if (again_.empty()) return groups;  // every name distinct
    // The values whose bit was set twice or more, by hash (then value order).
    std::vector<std::pair<uint64_t, ValueId>> candidates;
    for (size_t v = 0; v < hashes_.size(); ++v) {
      if (again_.contains(hashes_[v] & mask_)) {
        candidates.emplace_back(hashes_[v], static_cast<ValueId>(v));
      }
    }
    std::sort(candidates.begin(), candidates.end());
    for (size_t i = 0; i < candidates.size();) {
      size_t end = i + 1;
      while (end < candidates.size() && candidates[end].first == candidates[i].first) ++end;
      if (end - i > 1) {
        // Equal hashes almost always mean equal names; group by name to be exact.
        absl::flat_hash_map<absl::string_view, std::vector<ValueId>> by_name;
        for (size_t k = i; k < end; ++k) {
          by_name[m_.values[candidates[k].second].name].push_back(candidates[k].second);
        }
        for (auto& [name, same] : by_name) {
          if (same.size() > 1) groups.push_back(std::move(same));
        }
      }
      i = end;
    }
    std::sort(groups.begin(), groups.end(),
              [](const std::vector<ValueId>& a, const std::vector<ValueId>& b) {
                return a.front() < b.front();
              });
    return groups;
  }

 private:
  const MethodDef& m_;
  size_t mask_ = 0;
  std::vector<uint64_t> seen_;         // bitmap: a name hashed to this bit
  absl::flat_hash_set<size_t> again_;  // bits a later name hashed to as well
  std::vector<uint64_t> hashes_;       // per value, in order
};

class Placer {
 public:
  Placer(const PlacementInput& input, const PlacementOptions& options)
      : in_(input), m_(*input.method), opt_(options) {}

  absl::StatusOr<PlacementPlan> Run() {
    FERRY_RETURN_IF_ERROR(CheckInput());
    FERRY_RETURN_IF_ERROR(CheckOptions());
    ComputeValueTables();
    FERRY_RETURN_IF_ERROR(WalkNodes());
    FERRY_RETURN_IF_ERROR(ComputeHomes());
    CreateInitialBuffers();
    for (int32_t n = 0; n < static_cast<int32_t>(m_.nodes.size()); ++n) {
      FERRY_RETURN_IF_ERROR(PlaceNode(n));
    }
    FERRY_RETURN_IF_ERROR(PlaceOutputs());
    FERRY_RETURN_IF_ERROR(InputDiagnostics());
    FinishLifetimes();
    NameDiagnostics();
    FERRY_RETURN_IF_ERROR(ApplyStrictMode());
    for (const auto& [used, declared] : declared_) {
      if (used != declared) plan_.mapped_devices.emplace_back(declared, used);
    }
    return std::move(plan_);
  }

 private:
  // Who a read is for: a node (running on `device`) or a method output. The copy's reason text
  // is built from it only when a copy is made.
  struct Reader {
    int32_t node = -1;
    int32_t output = -1;
    Device device;
  };

  // ---- naming -------------------------------------------------------------------------------
  std::string Reason(const Reader& r) const {
    if (r.output >= 0) return absl::StrCat("method output ", r.output);
    return absl::StrCat("read by node ", r.node, " (", m_.nodes[r.node].name, ") on ",
                        DeviceLabel(r.device));
  }
  std::string NodeLabel(int32_t n) const {
    return absl::StrCat("node ", n, " (", m_.nodes[n].name, ")");
  }
  std::string ValueLabel(ValueId v) const { return absl::StrCat("\"", m_.values[v].name, "\""); }
  // The device as the program declared it, with the device used when they differ. Computed once
  // per device: every copy's reason names one.
  const std::string& DeviceLabel(const Device& d) const {
    for (const auto& [device, label] : device_labels_) {
      if (device == d) return label;
    }
    auto it = declared_.find(d);
    std::string label = it != declared_.end() && it->second != d
                            ? absl::StrCat(it->second.ToString(), " (as ", d.ToString(), ")")
                            : d.ToString();
    device_labels_.emplace_back(d, std::move(label));
    return device_labels_.back().second;
  }
  // Computed once per value in ComputeValueTables's walk of the values, so that making a buffer
  // does not reach back into the value table.
  size_t Bytes(ValueId v) const { return bytes_[v]; }

  // ---- checks -------------------------------------------------------------------------------
  absl::Status CheckInput() const {
    if (in_.method == nullptr) return absl::InvalidArgumentError("placement: no method given");
    if (size_t i = FirstUnsorted(in_.effects, m_.nodes.size()); i < in_.effects.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement: effects entry ", i, " is for node ", in_.effects[i].first,
                       "; entries must name nodes of the method (", m_.nodes.size(),
                       "), each once, in increasing order"));
    }
    if (size_t i = FirstUnsorted(in_.layouts, m_.values.size()); i < in_.layouts.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement: layouts entry ", i, " is for value ", in_.layouts[i].first,
                       "; entries must name values of the method (", m_.values.size(),
                       "), each once, in increasing order"));
    }
    return absl::OkStatus();
  }

  // Node n's effects: none unless WalkNodes found an entry with some.
  const NodeEffects& EffectsOf(int32_t n) const {
    static const NodeEffects kNone;
    return has_effects_[n] ? in_.EffectsOf(n) : kNone;
  }

  // The effects `e` of node n against the node (CheckInput's checks per node).
  absl::Status CheckEffects(size_t n, const NodeEffects& e) const {
    const NodeDef& node = m_.nodes[n];
    auto arg_ok = [&](int32_t a) { return a >= 0 && a < static_cast<int32_t>(node.args.size()); };
    for (int32_t a : e.written_args) {
      if (!arg_ok(a) || !IsTensor(node.args[a])) {
        return absl::InvalidArgumentError(absl::StrCat("method \"", m_.name, "\", ", NodeLabel(n),
                                                       ": written argument ", a,
                                                       " is not a tensor argument of the node"));
      }
    }
    for (int32_t a : e.shape_only_args) {
      if (!arg_ok(a)) {
        return absl::InvalidArgumentError(absl::StrCat("method \"", m_.name, "\", ", NodeLabel(n),
                                                       ": shape-only argument ", a,
                                                       " is out of range"));
      }
    }
    if (!e.view_of.empty() && e.view_of.size() != node.results.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("method \"", m_.name, "\", ", NodeLabel(n), ": view_of has ",
                       e.view_of.size(), " entries for ", node.results.size(), " results"));
    }
    for (int32_t a : e.view_of) {
      if (a == -1) continue;
      if (!arg_ok(a) || !IsTensor(node.args[a]) || node.kind != NodeKind::kHostOp) {
        return absl::InvalidArgumentError(absl::StrCat("method \"", m_.name, "\", ", NodeLabel(n),
                                                       ": a result aliases argument ", a,
                                                       ", which is not a tensor argument of a "
                                                       "host op"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckOptions() const {
    if (opt_.error_on_per_call_copies && !opt_.skip_h2d_for_method_inputs &&
        !opt_.skip_d2h_for_method_outputs) {
      return absl::FailedPreconditionError(
          "error_on_per_call_copies is set without skip_h2d_for_method_inputs or "
          "skip_d2h_for_method_outputs: without a skip flag every input and output crosses to the "
          "host by design, so there is nothing for it to check; set a skip flag or clear it");
    }
    return absl::OkStatus();
  }

  bool IsPresent(const Device& d) const {
    if (d.is_host()) return true;
    return std::find(opt_.present_devices.begin(), opt_.present_devices.end(), d) !=
           opt_.present_devices.end();
  }

  // One walk over the nodes: each node's effects checked (CheckEffects), its device resolved,
  // and the values its results alias joined to their argument's group.
  absl::Status WalkNodes() {
    node_device_.resize(m_.nodes.size());
    has_effects_.assign(m_.nodes.size(), 0);
    size_t next_effects = 0;  // into in_.effects, in node order (CheckInput)
    for (int32_t n = 0; n < static_cast<int32_t>(m_.nodes.size()); ++n) {
      const NodeDef& node = m_.nodes[n];
      if (next_effects < in_.effects.size() && in_.effects[next_effects].first == n) {
        const NodeEffects& e = in_.effects[next_effects++].second;
        FERRY_RETURN_IF_ERROR(CheckEffects(n, e));
        has_effects_[n] = !e.empty();
        for (size_t r = 0; r < e.view_of.size(); ++r) {
          if (e.view_of[r] >= 0) group_[node.results[r]] = group_[node.args[e.view_of[r]]];
        }
      }
      Device device = Device::Host();
      if (node.kind == NodeKind::kDelegate) {
        std::optional<absl::string_view> target = node.CompileSpec(kTargetDeviceSpec);
        if (target.has_value()) {
          absl::StatusOr<Device> parsed = ParseDevice(*target);
          if (!parsed.ok()) {
            return absl::InvalidArgumentError(absl::StrCat("method \"", m_.name, "\", ",
                                                           NodeLabel(n), ": target_device: ",
                                                           parsed.status().message()));
          }
          Device declared = *parsed;
          device = declared;
          if (auto it = opt_.device_map.find(declared); it != opt_.device_map.end()) {
            device = it->second;
          }
          if (!IsPresent(device)) {
            std::vector<std::string> present = {"host"};
            for (const Device& d : opt_.present_devices) present.push_back(d.ToString());
            std::string mapped =
                device == declared ? "" : absl::StrCat(", which is mapped to ", device.ToString());
            return absl::NotFoundError(absl::StrCat(
                "method \"", m_.name, "\", ", NodeLabel(n), ": device ", declared.ToString(),
                mapped, " is not present and not mapped to a present device (present: ",
                absl::StrJoin(present, ", "), ")"));
          }
          if (!device.is_host()) declared_.emplace(device, declared);
        }
      }
      node_device_[n] = device;
    }
    // Each node's placement is made by PlaceNode, in node order, while its lists are written.
    plan_.nodes.reserve(m_.nodes.size());
    return absl::OkStatus();
  }

  // The per-value tables, in one walk of the values: kinds and byte sizes, each value its own
  // group (values that share memory, a view or in-place result and the argument it aliases, are
  // joined into their root's group by WalkNodes), and the values that share a name.
  void ComputeValueTables() {
    const size_t nv = m_.values.size();
    group_.resize(nv);
    kind_.resize(nv);
    bytes_.resize(nv);
    order_index_.resize(nv);
    SharedNameFinder names(m_);
    size_t next_layout = 0;  // into in_.layouts, in value order (CheckInput)
    for (size_t v = 0; v < nv; ++v) {
      const ValueDef& value = m_.values[v];
      group_[v] = static_cast<ValueId>(v);
      kind_[v] = value.kind;
      bytes_[v] = value.meta.ByteSize().value_or(0);
      has_state_ = has_state_ || kind_[v] == ValueKind::kState;
      names.Add(static_cast<ValueId>(v));
      order_index_[v] = -1;
      if (next_layout == in_.layouts.size() ||
          in_.layouts[next_layout].first != static_cast<ValueId>(v)) {
        continue;  // dense row-major
      }
      if (const std::vector<int32_t>& order = in_.layouts[next_layout++].second.dim_order;
          !order.empty()) {
        std::vector<int32_t> canonical = CanonicalOrder(order);
        if (!canonical.empty()) {
          order_index_[v] = static_cast<int32_t>(orders_.size());
          orders_.push_back(std::move(canonical));
        }
      }
    }
    shared_names_ = names.Take();
  }

  bool IsTensor(ValueId v) const { return kind_[v] != ValueKind::kScalar; }

  bool IsShapeOnly(int32_t n, int32_t arg) const {
    const auto& s = EffectsOf(n).shape_only_args;
    return std::find(s.begin(), s.end(), arg) != s.end();
  }

  absl::Status ComputeHomes() {
    const size_t nv = m_.values.size();
    plan_.value_homes.assign(nv, Device::Host());
    // Only state buffers take their home from their readers and writers (P11); everything else is
    // decided per node below or in PlaceNode.
    struct StateUse {
      std::vector<Device> writers, readers;  // distinct devices
      std::vector<int32_t> writer_nodes;
    };
    std::map<ValueId, StateUse> state_use;  // ordered, so the first error is the lowest value
    auto add_device = [](std::vector<Device>& set, const Device& d) {
      if (std::find(set.begin(), set.end(), d) == set.end()) set.push_back(d);
    };
    // P9: an input passed on a device lives on the device of its first device reader.
    std::vector<bool> input_placed;
    if (opt_.skip_h2d_for_method_inputs) input_placed.assign(nv, false);
    if (!has_state_ && input_placed.empty()) return absl::OkStatus();  // every home is the host
    for (int32_t n = 0; n < static_cast<int32_t>(m_.nodes.size()); ++n) {
      const NodeDef& node = m_.nodes[n];
      const Device& d = node_device_[n];
      for (int32_t a = 0; a < static_cast<int32_t>(node.args.size()); ++a) {
        const ValueId v = node.args[a];
        if (!IsTensor(v) || IsShapeOnly(n, a)) continue;
        const ValueId g = group_[v];
        if (kind_[g] == ValueKind::kState) add_device(state_use[g].readers, d);
        if (!input_placed.empty() && !d.is_host() && kind_[v] == ValueKind::kInput &&
            !input_placed[v]) {
          input_placed[v] = true;
          plan_.value_homes[v] = d;
        }
      }
      for (int32_t a : EffectsOf(n).written_args) {
        const ValueId g = group_[node.args[a]];
        if (kind_[g] != ValueKind::kState) continue;
        StateUse& use = state_use[g];
        add_device(use.writers, d);
        use.writer_nodes.push_back(n);
      }
    }
    for (const auto& [v, use] : state_use) {
      if (use.writers.size() > 1) {
        std::vector<std::string> names;
        for (int32_t n : use.writer_nodes) {
          names.push_back(absl::StrCat(NodeLabel(n), " on ", DeviceLabel(node_device_[n])));
        }
        return absl::InvalidArgumentError(absl::StrCat(
            "method \"", m_.name, "\": state ", ValueLabel(v),
            " is written on more than one device (", absl::StrJoin(names, ", "),
            "); a state buffer has one home, so it may be written on one device only"));
      }
      const std::vector<Device>& deciding = use.writers.empty() ? use.readers : use.writers;
      if (deciding.size() == 1 && !deciding.front().is_host()) {
        plan_.value_homes[v] = deciding.front();
      }
    }
    return absl::OkStatus();
  }

  // ---- buffers --------------------------------------------------------------------------------
  // `order` is canonical (CanonicalDimOrder).
  int32_t NewBuffer(ValueId v, Device device, BufferKind kind, const std::vector<int32_t>& order,
                    int32_t alias_of = -1) {
    int32_t id = static_cast<int32_t>(plan_.buffers.size());
    PlannedBuffer& b = plan_.buffers.emplace_back();
    b.value = v;
    b.device = device;
    b.kind = kind;
    b.bytes = kind == BufferKind::kAlias ? 0 : Bytes(v);
    if (!order.empty()) b.dim_order = order;
    b.alias_of = alias_of;
    phys_.push_back(alias_of >= 0 ? phys_[alias_of] : id);
    version_.push_back(group_version_[group_[v]]);  // read only where it is its memory's root
    group_next_.push_back(-1);
    if (kind != BufferKind::kProgramData || kind_[v] == ValueKind::kConstant) {
      // Appended to the group's list, which keeps creation order.
      const ValueId g = group_[v];
      if (group_tail_[g] < 0) {
        group_head_[g] = id;
      } else {
        group_next_[group_tail_[g]] = id;
      }
      group_tail_[g] = id;
    }
    return id;
  }

  // The buffer registered for (v, d, order), or -1. `order` is canonical.
  int32_t FindInstance(ValueId v, const Device& d, const std::vector<int32_t>& order) const {
    for (int32_t i = instance_head_[v]; i >= 0; i = instances_[i].next) {
      const Instance& e = instances_[i];
      if (e.device == d && e.order == order) return e.buffer;
    }
    return -1;
  }

  // Makes `buffer` the instance of v on d in `order` (canonical).
  void Register(ValueId v, const Device& d, const std::vector<int32_t>& order, int32_t buffer) {
    bool found = false;
    for (int32_t i = instance_head_[v]; i >= 0 && !found; i = instances_[i].next) {
      Instance& e = instances_[i];
      if (e.device == d && e.order == order) {
        e.buffer = buffer;
        found = true;
      }
    }
    if (!found) {
      instances_.push_back({d, order, buffer, instance_head_[v]});
      instance_head_[v] = static_cast<int32_t>(instances_.size() - 1);
    }
    if (d.is_host() && order == NaturalOrder(v)) host_instance_[v] = buffer;
  }

  // Most values are row-major: an index per value into the few other orders, so that the
  // per-value table stays 4 bytes a value (NaturalOrder is read for every buffer made).
  const std::vector<int32_t>& NaturalOrder(ValueId v) const {
    const int32_t i = order_index_[v];
    return i < 0 ? RowMajor() : orders_[i];
  }
  // The canonical (empty) dim order of row-major layouts.
  static const std::vector<int32_t>& RowMajor() {
    static const std::vector<int32_t> kRowMajor;
    return kRowMajor;
  }

  void CreateInitialBuffers() {
    const size_t nv = m_.values.size();
    group_version_.assign(nv, 0);
    group_head_.assign(nv, -1);
    group_tail_.assign(nv, -1);
    instance_head_.assign(nv, -1);
    plan_.buffers.reserve(nv + nv / 4);
    phys_.reserve(nv + nv / 4);
    version_.reserve(nv + nv / 4);
    group_next_.reserve(nv + nv / 4);
    instances_.reserve(nv + nv / 4);
    // One step per node, plus the copies between them.
    plan_.schedule.reserve(m_.nodes.size() + m_.nodes.size() / 4);
    home_buffer_.assign(m_.values.size(), -1);
    host_instance_.assign(m_.values.size(), -1);
    for (ValueId v = 0; v < static_cast<ValueId>(m_.values.size()); ++v) {
      const Device home = plan_.value_homes[v];
      switch (kind_[v]) {  // kind_, not the value table: most values are intermediates
        case ValueKind::kInput: {
          int32_t b = NewBuffer(v, home, BufferKind::kInput, NaturalOrder(v));
          home_buffer_[v] = b;
          Register(v, home, NaturalOrder(v), b);
          break;
        }
        case ValueKind::kConstant: {
          int32_t b = NewBuffer(v, Device::Host(), BufferKind::kProgramData, NaturalOrder(v));
          home_buffer_[v] = b;
          Register(v, Device::Host(), NaturalOrder(v), b);
          break;
        }
        case ValueKind::kState: {
          int32_t data = NewBuffer(v, Device::Host(), BufferKind::kProgramData, NaturalOrder(v));
          int32_t b = NewBuffer(v, home, BufferKind::kState, NaturalOrder(v));
          home_buffer_[v] = b;
          Register(v, home, NaturalOrder(v), b);
          CopyStep c;
          c.value = v;
          c.src_buffer = data;
          c.dst_buffer = b;
          c.src_device = Device::Host();
          c.dst_device = home;
          c.direction = home.is_host() ? CopyDirection::kHostToHost : CopyDirection::kHostToDevice;
          c.timing = CopyTiming::kOnce;
          c.bytes = Bytes(v);
          c.reason = absl::StrCat("initial data of state ", ValueLabel(v));
          AddLoadCopy(std::move(c));
          break;
        }
        case ValueKind::kIntermediate:
        case ValueKind::kScalar:
          break;
      }
    }
    plan_.input_buffers.reserve(m_.inputs.size());
    for (ValueId v : m_.inputs) plan_.input_buffers.push_back(home_buffer_[v]);
  }

  void AddLoadCopy(CopyStep c) {
    plan_.load_copies.push_back(static_cast<int32_t>(plan_.copies.size()));
    plan_.copies.push_back(std::move(c));
  }

  void AddCallCopy(CopyStep c) {
    const auto pos = static_cast<int32_t>(plan_.schedule.size());
    plan_.schedule.push_back(
        {ScheduleStep::Kind::kCopy, static_cast<int32_t>(plan_.copies.size())});
    Touch(c.src_buffer, pos);
    Touch(c.dst_buffer, pos);
    plan_.copies.push_back(std::move(c));
  }

  // Lifetimes: buffer b (and the buffer whose memory it uses) is used at schedule position pos.
  // Each step touches its buffers as it is added (they do not change after), so that the
  // lifetimes need no walk of their own; outputs and states are done in FinishLifetimes.
  void TouchOne(int32_t x, int32_t pos) {
    PlannedBuffer& buf = plan_.buffers[x];
    if (buf.first_step < 0 || pos < buf.first_step) buf.first_step = pos;
    if (pos > buf.last_step) buf.last_step = pos;
  }
  void Touch(int32_t b, int32_t pos) {
    if (b < 0) return;
    TouchOne(b, pos);
    if (phys_[b] != b) TouchOne(phys_[b], pos);
  }

  // Buffers that share memory (an alias and its base) hold one version, kept at the memory's
  // root: they are all in one alias group, so marking one marks them all in O(1).
  bool Current(int32_t b) const { return CurrentFor(b, plan_.buffers[b].value); }
  // Current(b), where b is known to be a buffer of value v (no look-up of the buffer).
  bool CurrentFor(int32_t b, ValueId v) const {
    return version_[phys_[b]] == group_version_[group_[v]];
  }

  // Marks `b` and everything sharing its memory as holding the group's current version.
  void MarkCurrent(int32_t b) {
    version_[phys_[b]] = group_version_[group_[plan_.buffers[b].value]];
  }

  void Write(int32_t b) {
    ++group_version_[group_[plan_.buffers[b].value]];
    MarkCurrent(b);
  }

  bool IsConstantGroup(ValueId v) const { return kind_[group_[v]] == ValueKind::kConstant; }

  // The buffers holding value v (not the program data of a state's initial value).
  std::vector<int32_t> InstancesOf(ValueId v) const {
    std::vector<int32_t> out;
    for (int32_t b = group_head_[group_[v]]; b >= 0; b = group_next_[b]) {
      if (plan_.buffers[b].value == v && plan_.buffers[b].kind != BufferKind::kProgramData) {
        out.push_back(b);
      }
    }
    if (kind_[v] == ValueKind::kConstant) out.push_back(home_buffer_[v]);
    return out;
  }

  // A buffer holding the current version of v, to copy from: a host copy first (P4), then v's home,
  // then any other device.
  absl::StatusOr<int32_t> FindSource(ValueId v, const Device& reader_device,
                                     const Reader& reader) {
    int32_t host = host_instance_[v];
    if (host >= 0 && Current(host)) return host;
    int32_t home = home_buffer_[v];
    if (home >= 0 && Current(home)) return home;
    for (int32_t b : InstancesOf(v)) {
      if (Current(b) && plan_.buffers[b].dim_order == NaturalOrder(v)) return b;
    }
    // Nothing holds v's current version: v is a host view whose base was written elsewhere.
    // Refresh the base's host copy; the view sees it through shared memory.
    if (host >= 0 && plan_.buffers[host].kind == BufferKind::kAlias) {
      int32_t root = phys_[host];
      FERRY_RETURN_IF_ERROR(
          Read(plan_.buffers[root].value, Device::Host(), nullptr, reader).status());
      if (Current(host)) return host;
    }
    return absl::InternalError(absl::StrCat("placement: no current copy of value ",
                                            ValueLabel(v), " for ", Reason(reader), " on ",
                                            reader_device.ToString()));
  }

  static CopyDirection Direction(const Device& src, const Device& dst) {
    if (src.is_host()) return dst.is_host() ? CopyDirection::kHostToHost : CopyDirection::kHostToDevice;
    return dst.is_host() ? CopyDirection::kDeviceToHost : CopyDirection::kDeviceToDevice;
  }

  // Reads value v on device d (for `reader`) in dim order `*wanted` (canonical; nullptr: v's
  // natural layout). Returns the buffer to read, adding the copies needed.
  absl::StatusOr<int32_t> Read(ValueId v, const Device& d, const std::vector<int32_t>* wanted,
                               const Reader& reader) {
    if (IsConstantGroup(v)) return ReadConstant(v, d, wanted, reader.node);
    const ValueLayout& natural = in_.LayoutOf(v);
    const std::vector<int32_t>* order_ptr;
    if (d.is_host()) {
      // The host copy keeps the natural layout: host kernels were checked against it. A host
      // reader compiled for another layout reads a converted copy of it.
      order_ptr = &NaturalOrder(v);
      if (wanted != nullptr && *wanted != *order_ptr) return ReadConverted(v, *wanted, reader);
    } else if (wanted != nullptr) {
      order_ptr = wanted;
    } else {
      order_ptr = natural.dense ? &NaturalOrder(v) : &RowMajor();
    }
    const std::vector<int32_t>& order = *order_ptr;
    int32_t existing = d.is_host() ? host_instance_[v] : FindInstance(v, d, order);
    if (existing >= 0 && Current(existing)) return existing;
    FERRY_ASSIGN_OR_RETURN(int32_t src, FindSource(v, d, reader));
    // Refreshing the base of a view (see FindSource) may already have made `existing` current.
    if (existing >= 0 && Current(existing)) return existing;
    const PlannedBuffer& src_buffer = plan_.buffers[src];
    const bool src_dense = src_buffer.kind != BufferKind::kAlias || natural.dense;
    const std::vector<int32_t>& src_order =
        src_buffer.kind == BufferKind::kAlias ? NaturalOrder(v) : src_buffer.dim_order;
    const bool converts = !src_dense || src_order != order;
    if (converts && !src_buffer.device.is_host()) {
      return absl::UnimplementedError(absl::StrCat(
          "method \"", m_.name, "\", ", Reason(reader), ": value ", ValueLabel(v), " lives on ",
          DeviceLabel(src_buffer.device), " in dim order ",
          DimOrderString(src_order, m_.values[v].meta.rank()), " but is read on ", DeviceLabel(d),
          " in dim order ", DimOrderString(order, m_.values[v].meta.rank()),
          "; layout conversion is supported only for copies from the host"));
    }
    int32_t dst = existing;
    if (dst < 0) {
      dst = NewBuffer(v, d, BufferKind::kArena, order);
      Register(v, d, order, dst);
    }
    CopyStep c;
    c.value = v;
    c.src_buffer = src;
    c.dst_buffer = dst;
    c.src_device = plan_.buffers[src].device;
    c.dst_device = d;
    c.direction = Direction(c.src_device, d);
    c.timing = CopyTiming::kPerCall;
    c.bytes = Bytes(v);
    c.converts_layout = converts;
    c.node = reader.node;
    c.output = reader.output;
    c.reason = Reason(reader);
    AddCallCopy(std::move(c));
    MarkCurrent(dst);
    return dst;
  }

  // A host reader compiled for a dim order other than the value's: a host-to-host converting copy
  // of the current host copy, per call.
  absl::StatusOr<int32_t> ReadConverted(ValueId v, const std::vector<int32_t>& order,
                                        const Reader& reader) {
    FERRY_ASSIGN_OR_RETURN(int32_t src, Read(v, Device::Host(), nullptr, reader));
    int32_t dst = FindInstance(v, Device::Host(), order);
    if (dst >= 0 && dst != host_instance_[v]) {
      if (Current(dst)) return dst;
    } else {
      dst = NewBuffer(v, Device::Host(), BufferKind::kArena, order);
      Register(v, Device::Host(), order, dst);
    }
    CopyStep c;
    c.value = v;
    c.src_buffer = src;
    c.dst_buffer = dst;
    c.src_device = Device::Host();
    c.dst_device = Device::Host();
    c.direction = CopyDirection::kHostToHost;
    c.timing = CopyTiming::kPerCall;
    c.bytes = Bytes(v);
    c.converts_layout = true;
    c.node = reader.node;
    c.reason = Reason(reader);
    AddCallCopy(std::move(c));
    MarkCurrent(dst);
    return dst;
  }

  // Constants (and views of them) never change: host readers read the program's data in place,
  // each device gets one replica per layout, copied once at load (P7).
  absl::StatusOr<int32_t> ReadConstant(ValueId v, const Device& d,
                                       const std::vector<int32_t>* wanted, int32_t node) {
    int32_t host = host_instance_[v];
    const bool converts_on_host = d.is_host() && wanted != nullptr && *wanted != NaturalOrder(v);
    if (d.is_host() && !converts_on_host) return host;
    const ValueLayout& layout = in_.LayoutOf(v);
    const int32_t rank = m_.values[v].meta.rank();
    if (!layout.dense) {
      return absl::InvalidArgumentError(absl::StrCat(
          "method \"", m_.name, "\", ", NodeLabel(node), " on ", DeviceLabel(d),
          " reads constant ", ValueLabel(group_[v]),
          v == group_[v] ? "" : absl::StrCat(" through ", ValueLabel(v)), " with strides (",
          absl::StrJoin(layout.strides, ", "),
          "), which is not a dense layout (it has gaps, overlaps or zero strides); a device "
          "replica needs a dense layout"));
    }
    const std::vector<int32_t>& natural = NaturalOrder(v);
    const std::vector<int32_t>& order = wanted != nullptr ? *wanted : natural;
    if (int32_t existing = FindInstance(v, d, order); existing >= 0) return existing;
    int32_t dst = NewBuffer(v, d, BufferKind::kConstantReplica, order);
    Register(v, d, order, dst);
    CopyStep c;
    c.value = v;
    c.src_buffer = host;
    c.dst_buffer = dst;
    c.src_device = Device::Host();
    c.dst_device = d;
    c.direction = d.is_host() ? CopyDirection::kHostToHost : CopyDirection::kHostToDevice;
    c.timing = CopyTiming::kOnce;
    c.bytes = Bytes(v);
    c.converts_layout = order != natural;
    c.node = node;
    c.reason = absl::StrCat("replica of constant ", ValueLabel(v), " on ", DeviceLabel(d),
                            " for ", NodeLabel(node));
    if (c.converts_layout) {
      Diagnostic diag;
      diag.severity = Diagnostic::Severity::kWarning;
      // A view of a constant (a transpose of it, say) is converted from the constant's data:
      // the warning names the constant, and the view it is read through.
      const bool through_view = v != group_[v];
      diag.message = absl::StrCat(
          "constant ", ValueLabel(group_[v]),
          through_view ? absl::StrCat(", read through its view ", ValueLabel(v), ",") : "",
          " (", c.bytes, " bytes) is stored in dim order ", DimOrderString(natural, rank),
          through_view ? " as read" : "", " but ", NodeLabel(node), " on ", DeviceLabel(d),
          " was compiled for dim order ", DimOrderString(order, rank),
          "; it is converted once at load");
      diag.values = {v};
      if (through_view) diag.values = {group_[v], v};
      diag.nodes = {node};
      diag.devices = {d};
      diag.bytes = c.bytes;
      plan_.diagnostics.push_back(std::move(diag));
    }
    AddLoadCopy(std::move(c));
    return dst;
  }

  absl::Status PlaceNode(int32_t n) {
    const NodeDef& node = m_.nodes[n];
    const NodeEffects& effects = EffectsOf(n);           // most nodes have none
    NodePlacement& placed = plan_.nodes.emplace_back();  // nodes are placed in order
    const Device d = node_device_[n];
    placed.device = d;
    const Reader reader{n, -1, d};
    const int32_t num_args = static_cast<int32_t>(node.args.size());
    const ValueId* args = node.args.data();
    int32_t* arg_buffers = FreshList(placed.arg_buffers, num_args);
    // Reads (copies are made before the node runs).
    for (int32_t a = 0; a < num_args; ++a) {
      ValueId v = args[a];
      if (!IsTensor(v)) continue;
      if (!effects.shape_only_args.empty() && IsShapeOnly(n, a)) continue;
      // Only delegates have dim orders (host ops' are empty); the kind is on the node's first
      // cache line, the dim orders are not.
      if (node.kind == NodeKind::kDelegate &&
          a < static_cast<int32_t>(node.delegate().arg_dim_orders.size()) &&
          !node.delegate().arg_dim_orders[a].empty()) {
        const std::vector<int32_t> wanted = CanonicalOrder(node.delegate().arg_dim_orders[a]);
        FERRY_ASSIGN_OR_RETURN(arg_buffers[a], Read(v, d, &wanted, reader));
      } else if (const int32_t host = host_instance_[v];
                 d.is_host() && host >= 0 && (IsConstantGroup(v) || CurrentFor(host, v))) {
        // What Read gives a host reader of the value's own layout when the host copy is current
        // (constants always are): that copy, with no copy added. Most reads of a host op.
        arg_buffers[a] = host;
      } else {
        FERRY_ASSIGN_OR_RETURN(arg_buffers[a], Read(v, d, nullptr, reader));
      }
    }
    // Shape-only readers need no copy: any buffer of the value carries its shape.
    for (int32_t a : effects.shape_only_args) {
      ValueId v = args[a];
      if (!IsTensor(v) || arg_buffers[a] >= 0) continue;
      int32_t b = -1;
      b = FindInstance(v, d, NaturalOrder(v));
      if (b < 0) b = home_buffer_[v] >= 0 ? home_buffer_[v] : host_instance_[v];
      if (b < 0) {
        std::vector<int32_t> all = InstancesOf(v);
        if (!all.empty()) b = all.front();
      }
      arg_buffers[a] = b;
    }
    const auto pos = static_cast<int32_t>(plan_.schedule.size());
    plan_.schedule.push_back({ScheduleStep::Kind::kNode, n});
    for (int32_t a = 0; a < num_args; ++a) Touch(arg_buffers[a], pos);
    // Writes in place.
    for (int32_t a : effects.written_args) {
      FERRY_RETURN_IF_ERROR(CheckWrite(n, a));
      Write(arg_buffers[a]);
    }
    // Results.
    const size_t num_results = node.results.size();
    int32_t* result_buffers = FreshList(placed.result_buffers, num_results);
    for (size_t r = 0; r < num_results; ++r) {
      ValueId v = node.results[r];
      int32_t view_of = r < effects.view_of.size() ? effects.view_of[r] : -1;
      int32_t b;
      if (view_of >= 0) {
        int32_t base = arg_buffers[view_of];
        b = NewBuffer(v, d, BufferKind::kAlias, {}, base);
        plan_.buffers[b].alias_node = n;
        plan_.value_homes[v] = plan_.buffers[base].device;
      } else {
        plan_.value_homes[v] = d;
        b = NewBuffer(v, d, BufferKind::kArena, NaturalOrder(v));
        home_buffer_[v] = b;
      }
      Register(v, d, NaturalOrder(v), b);
      result_buffers[r] = b;
      Touch(b, pos);
    }
    return absl::OkStatus();
  }

  absl::Status CheckWrite(int32_t n, int32_t a) const {
    const NodeDef& node = m_.nodes[n];
    const Device& d = plan_.nodes[n].device;
    ValueId v = node.args[a];
    ValueId root = group_[v];
    std::string through = v == root ? "" : absl::StrCat(" through ", ValueLabel(v));
    if (IsConstantGroup(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("method \"", m_.name, "\", ", NodeLabel(n), " writes constant ",
                       ValueLabel(root), through, " in place; constants are read-only"));
    }
    if (!d.is_host()) {
      const Device& home = plan_.value_homes[v];
      if (home != d || plan_.nodes[n].arg_buffers[a] != home_buffer_[v]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "method \"", m_.name, "\", ", NodeLabel(n), " on ", DeviceLabel(d),
            " writes value ", ValueLabel(v), " in place, but ", ValueLabel(v), " lives on ",
            DeviceLabel(home),
            "; a delegate may write in place only values that live on its own device (state it "
            "owns, results of delegates on that device)"));
      }
    } else if (m_.values[root].kind == ValueKind::kInput && !plan_.value_homes[root].is_host()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "method \"", m_.name, "\": input ", ValueLabel(root), " is passed on ",
          DeviceLabel(plan_.value_homes[root]), " (skip_h2d_for_method_inputs), but ",
          NodeLabel(n), " writes it in place on the host", through,
          "; the write would reach only a host copy. Clear skip_h2d_for_method_inputs or make "
          "the op functional"));
    }
    return absl::OkStatus();
  }

  absl::Status PlaceOutputs() {
    plan_.output_buffers.assign(m_.outputs.size(), -1);
    for (int32_t i = 0; i < static_cast<int32_t>(m_.outputs.size()); ++i) {
      ValueId v = m_.outputs[i];
      if (!IsTensor(v)) continue;  // returned as it is: no buffer
      ValueId root = group_[v];
      const Device home = plan_.value_homes[v];
      const Device root_home = plan_.value_homes[root];
      if (opt_.skip_d2h_for_method_outputs && !IsConstantGroup(v)) {
        int32_t on_device = -1;
        for (int32_t b : InstancesOf(v)) {
          if (!plan_.buffers[b].device.is_host() && Current(b) &&
              plan_.buffers[b].dim_order == NaturalOrder(v) &&
              (on_device < 0 || b == home_buffer_[v])) {
            on_device = b;
          }
        }
        if (on_device >= 0) {
          plan_.output_buffers[i] = on_device;
          continue;
        }
        int32_t host = host_instance_[v];
        if (host >= 0 && Current(host) && (!home.is_host() || !root_home.is_host())) {
          const Device& device = home.is_host() ? root_home : home;
          Diagnostic diag;
          diag.severity = Diagnostic::Severity::kWarning;
          diag.message = absl::StrCat(
              "output ", i, " (", ValueLabel(v), ", ", Bytes(v),
              " bytes) is returned on the host, not on ", DeviceLabel(device),
              ", because a host op writes it in place (", LastHostWriter(root),
              "); with skip_d2h_for_method_outputs set, a caller-supplied buffer for output ", i,
              " must be host memory");
          diag.values = {v};
          diag.devices = {Device::Host(), device};
          diag.bytes = Bytes(v);
          diag.output = i;
          plan_.diagnostics.push_back(std::move(diag));
        }
      }
      FERRY_ASSIGN_OR_RETURN(
          plan_.output_buffers[i],
          Read(v, Device::Host(), nullptr, Reader{-1, i, Device::Host()}));
    }
    return absl::OkStatus();
  }

  std::string LastHostWriter(ValueId root) const {
    for (int32_t n = static_cast<int32_t>(m_.nodes.size()) - 1; n >= 0; --n) {
      if (!plan_.nodes[n].device.is_host()) continue;
      for (int32_t a : EffectsOf(n).written_args) {
        if (group_[m_.nodes[n].args[a]] == root) return NodeLabel(n);
      }
    }
    return "a host op";
  }

  // Values of a method that share a name warn, once per name: the copy manifest and diagnostics
  // name values, and "h2d norm1" must say which norm1. The values sharing a name are found in
  // ComputeValueTables's walk of the values (SharedNameFinder); the warnings are made here, after
  // the placement's other diagnostics.
  void NameDiagnostics() {
    // A name shared by many values (a generator that names every result after its op) lists a
    // few, so that the message stays short; the diagnostic's `values` holds them all.
    constexpr size_t kListed = 4;
    for (std::vector<ValueId>& values : shared_names_) {
      std::vector<std::string> parts;
      const size_t listed = values.size() <= kListed ? values.size() : kListed - 1;
      for (size_t i = 0; i < listed; ++i) {
        const ValueId v = values[i];
        parts.push_back(absl::StrCat(v, " (", ValueLabel(v), ", ",
                                     ValueKindName(m_.values[v].kind), ")"));
      }
      std::string last;
      if (listed < values.size()) {
        last = absl::StrCat(values.size() - listed, " more");
      } else {
        last = std::move(parts.back());
        parts.pop_back();
      }
      Diagnostic d;
      d.severity = Diagnostic::Severity::kWarning;
      d.message = absl::StrCat("method \"", m_.name, "\": values ", absl::StrJoin(parts, ", "),
                               " and ", last,
                               " share a name; copies and diagnostics that name it are ambiguous");
      d.values = std::move(values);
      plan_.diagnostics.push_back(std::move(d));
    }
  }

  // P9: an input passed on a device that something reads elsewhere warns, once per input.
  absl::Status InputDiagnostics() {
    if (!opt_.skip_h2d_for_method_inputs) return absl::OkStatus();
    for (int32_t i = 0; i < static_cast<int32_t>(m_.inputs.size()); ++i) {
      ValueId v = m_.inputs[i];
      const Device home = plan_.value_homes[v];
      if (home.is_host() || !IsTensor(v)) continue;
      std::vector<std::string> readers;
      std::vector<int32_t> nodes;
      std::vector<Device> devices = {home};
      std::vector<const CopyStep*> output_copies;
      for (const CopyStep& c : plan_.copies) {
        if (c.value != v || c.timing != CopyTiming::kPerCall) continue;
        if (c.output >= 0) {
          output_copies.push_back(&c);
          continue;
        }
        readers.push_back(absl::StrCat(NodeLabel(c.node), " reads it on ",
                                       DeviceLabel(c.dst_device), " (one ",
                                       CopyDirectionName(c.direction), " copy per call)"));
        nodes.push_back(c.node);
        devices.push_back(c.dst_device);
      }
      if (!readers.empty()) {
        Diagnostic diag;
        diag.severity = Diagnostic::Severity::kWarning;
        diag.message = absl::StrCat(
            "input ", i, " (", ValueLabel(v), ", ", Bytes(v), " bytes) is passed on ",
            DeviceLabel(home), " (skip_h2d_for_method_inputs), but ",
            absl::StrJoin(readers, "; "));
        diag.values = {v};
        diag.nodes = nodes;
        diag.devices = devices;
        diag.bytes = Bytes(v);
        diag.input = i;
        plan_.diagnostics.push_back(std::move(diag));
      }
      for (const CopyStep* c : output_copies) {
        Diagnostic diag;
        diag.severity = Diagnostic::Severity::kWarning;
        diag.message = absl::StrCat(
            "input ", i, " (", ValueLabel(v), ", ", Bytes(v), " bytes) is passed on ",
            DeviceLabel(home), " (skip_h2d_for_method_inputs) and returned as output ", c->output,
            ", which is copied to the host (one d2h copy per call); setting "
            "skip_d2h_for_method_outputs returns it on ",
            DeviceLabel(home), " with no copy");
        diag.values = {v};
        diag.devices = {home, Device::Host()};
        diag.bytes = Bytes(v);
        diag.input = i;
        diag.output = c->output;
        plan_.diagnostics.push_back(std::move(diag));
      }
    }
    return absl::OkStatus();
  }

  // The schedule's steps touched their buffers as they were added (Touch); outputs are read at
  // the end, and states live throughout.
  void FinishLifetimes() {
    const int32_t end = static_cast<int32_t>(plan_.schedule.size());
    for (int32_t b : plan_.output_buffers) Touch(b, end);
    if (!has_state_) return;
    for (PlannedBuffer& b : plan_.buffers) {
      if (b.kind == BufferKind::kState) {
        b.first_step = 0;
        b.last_step = end;
      }
    }
  }

  absl::Status ApplyStrictMode() {
    if (!opt_.error_on_per_call_copies) return absl::OkStatus();
    std::vector<std::string> messages;
    for (Diagnostic& d : plan_.diagnostics) {
      if (d.input < 0 && d.output < 0) continue;  // not a boundary copy warning
      d.severity = Diagnostic::Severity::kError;
      messages.push_back(d.message);
    }
    if (messages.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("method \"", m_.name, "\" (error_on_per_call_copies): ",
                     absl::StrJoin(messages, "; ")));
  }

  const PlacementInput& in_;
  const MethodDef& m_;
  const PlacementOptions& opt_;
  PlacementPlan plan_;
  std::map<Device, Device> declared_;                 // used device -> declared device
  // DeviceLabel's answers; a deque, so the references it returns stay valid as it grows.
  mutable std::deque<std::pair<Device, std::string>> device_labels_;
  LargeTable<ValueId> group_;          // per value: root of its alias group
  LargeTable<ValueKind> kind_;         // per value: m_.values[v].kind, compact for the passes
  LargeTable<size_t> bytes_;           // per value: meta.ByteSize() (0 on overflow)
  LargeTable<uint8_t> has_effects_;    // per node: it has effects (in_.effects lists it)
  LargeTable<Device> node_device_;     // per node: where it runs (WalkNodes)
  std::vector<std::vector<ValueId>> shared_names_;  // values that share a name, per name
  bool has_state_ = false;             // some value is a state
  LargeTable<int64_t> group_version_;  // per group root
  // Per group root, the buffers of the group in creation order (a list through group_next_).
  LargeTable<int32_t> group_head_, group_tail_;
  LargeTable<int32_t> group_next_;                  // per buffer
  LargeTable<int64_t> version_;                     // per memory root: version it holds
  LargeTable<int32_t> phys_;                        // per buffer: the buffer whose memory it uses
  LargeTable<int32_t> home_buffer_;                 // per value
  LargeTable<int32_t> host_instance_;               // per value
  LargeTable<int32_t> order_index_;           // per value: index into orders_, or -1 (row-major)
  std::vector<std::vector<int32_t>> orders_;  // natural orders other than row-major, canonical
  // The buffer of each (value, device, canonical dim order): per value a list through `next`.
  struct Instance {
    Device device;
    std::vector<int32_t> order;
    int32_t buffer;
    int32_t next;
  };
  LargeTable<Instance> instances_;
  LargeTable<int32_t> instance_head_;  // per value
};

}  // namespace

absl::StatusOr<PlacementPlan> PlaceMethod(const PlacementInput& input,
                                          const PlacementOptions& options) {
  return Placer(input, options).Run();
}

}  // namespace ferry
