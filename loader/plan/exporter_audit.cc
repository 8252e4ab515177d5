#include "ferry/loader/plan/exporter_audit.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace ferry {

const char* AuditFindingKindName(AuditFinding::Kind kind) {
  switch (kind) {
    case AuditFinding::Kind::kUnneededCopy:
      return "unneeded copy";
    case AuditFinding::Kind::kCopyAroundHostDelegate:
      return "copy around a cpu delegate";
    case AuditFinding::Kind::kMissingCopy:
      return "missing copy";
    case AuditFinding::Kind::kHostConstantToDevice:
      return "host constant to a device delegate";
    case AuditFinding::Kind::kMissingResultCopy:
      return "missing result copy";
    case AuditFinding::Kind::kDeviceMismatch:
      return "device mismatch";
    case AuditFinding::Kind::kArenaDeviceMismatch:
      return "arena device mismatch";
  }
  return "unknown";
}

namespace {

class Auditor {
 public:
  Auditor(const MethodDef& m, const PlacementPlan& plan,
          const absl::flat_hash_map<Device, Device>& device_map)
      : m_(m), plan_(plan), device_map_(device_map), producer_(m.values.size(), -1) {
    // Each pass below looks things up through these indexes, built once: the audit is linear in
    // the method's size, not in the product of its copies, annotations and nodes.
    const size_t nv = m_.values.size();
    reader_begin_.assign(nv + 1, 0);
    for (size_t n = 0; n < m_.nodes.size(); ++n) {
      for (ValueId r : m_.nodes[n].results) {
        if (InRange(r) && producer_[r] < 0) producer_[r] = static_cast<int32_t>(n);
      }
      ForEachRead(static_cast<int32_t>(n), [&](ValueId a) { ++reader_begin_[a + 1]; });
    }
    for (size_t v = 0; v < nv; ++v) reader_begin_[v + 1] += reader_begin_[v];
    readers_.resize(reader_begin_[nv]);
    std::vector<size_t> next(reader_begin_.begin(), reader_begin_.end() - 1);
    for (size_t n = 0; n < m_.nodes.size(); ++n) {
      ForEachRead(static_cast<int32_t>(n),
                  [&](ValueId a) { readers_[next[a]++] = static_cast<int32_t>(n); });
    }
    for (const ExporterCopy& e : m_.exporter_copies) {
      exporter_copied_.insert(e.value);
      exporter_copies_.insert({e.value, e.to_device});
    }
    for (const CopyStep& c : plan_.copies) {
      if (IsCrossing(c)) {
        plan_crossings_.insert({c.value, c.direction == CopyDirection::kHostToDevice});
      }
    }
    for (size_t i = 0; i < m_.exporter_arenas.size(); ++i) {
      arena_index_.try_emplace(m_.exporter_arenas[i].memory_id, i);
    }
    for (size_t i = 0; i < m_.inputs.size(); ++i) input_index_.try_emplace(m_.inputs[i], i);
  }

  std::vector<AuditFinding> Run() {
    ExporterCopies();
    FerryCopies();
    Annotations();
    ArenaDevices();
    return std::move(findings_);
  }

 private:
  static bool IsCrossing(const CopyStep& c) {
    return c.direction == CopyDirection::kHostToDevice ||
           c.direction == CopyDirection::kDeviceToHost;
  }

  int32_t InstructionOf(int32_t node) const {
    if (node < 0 || static_cast<size_t>(node) >= m_.node_instructions.size()) return -1;
    return m_.node_instructions[node];
  }
  std::string Method() const { return absl::StrCat("method \"", m_.name, "\""); }
  std::string Value(ValueId v) const { return absl::StrCat("value \"", m_.values[v].name, "\""); }
  // "cuda:0", or "cuda:0 (as sim:0)" when the plan uses another device for it.
  std::string Declared(const Device& declared) const {
    const Device used = Used(declared);
    return used == declared ? declared.ToString()
                            : absl::StrCat(declared.ToString(), " (as ", used.ToString(), ")");
  }
  std::string Node(int32_t n) const {
    return absl::StrCat("node ", n, " (", m_.nodes[n].name, ") on ",
                        plan_.nodes[n].device.ToString());
  }
  // The device the plan uses for a device the program declared (the device map's result).
  Device Used(const Device& declared) const {
    for (const auto& [from, to] : plan_.mapped_devices) {
      if (from == declared) return to;
    }
    if (auto it = device_map_.find(declared); it != device_map_.end()) return it->second;
    return declared;
  }
  bool IsCpuDelegate(int32_t n) const {
    const NodeDef& node = m_.nodes[n];
    if (node.kind != NodeKind::kDelegate) return false;
    const std::optional<absl::string_view> target = node.CompileSpec(kTargetDeviceSpec);
    return target.has_value() && *target == "cpu";
  }
  // The first node whose result `v` is, or -1.
  int32_t Producer(ValueId v) const {
    return v >= 0 && static_cast<size_t>(v) < producer_.size() ? producer_[v] : -1;
  }
  bool InRange(ValueId v) const { return v >= 0 && static_cast<size_t>(v) < m_.values.size(); }
  // Calls `f` once per distinct value node `n` reads.
  template <typename F>
  void ForEachRead(int32_t n, F f) const {
    const ValueIds& args = m_.nodes[n].args;
    for (size_t i = 0; i < args.size(); ++i) {
      if (InRange(args[i]) &&
          std::find(args.begin(), args.begin() + i, args[i]) == args.begin() + i) {
        f(args[i]);
      }
    }
  }
  // The nodes that read `v`, in node order.
  absl::Span<const int32_t> Readers(ValueId v) const {
    if (!InRange(v)) return {};
    return absl::MakeConstSpan(readers_).subspan(reader_begin_[v],
                                                 reader_begin_[v + 1] - reader_begin_[v]);
  }

  void Add(AuditFinding::Kind kind, int32_t instruction, ValueId value, std::string what) {
    std::string where = Method();
    if (instruction >= 0) absl::StrAppend(&where, ", instruction ", instruction);
    findings_.push_back({kind, instruction, value, absl::StrCat(where, ": ", what)});
  }

  // Copies the exporter made: each must be one Ferry's plan makes too.
  void ExporterCopies() {
    for (const ExporterCopy& e : m_.exporter_copies) {
      if (plan_crossings_.contains({e.value, e.to_device})) continue;
      const char* op = e.to_device ? "et_copy::_h2d_copy.out" : "et_copy::_d2h_copy.out";
      const std::string copy = absl::StrCat("(", op, ") the exporter copies ", Value(e.value),
                                            e.to_device ? " to a device" : " to the host");
      // A copy into (h2d) or out of (d2h) a delegate whose target is the host itself.
      int32_t cpu_delegate = -1;
      if (e.to_device) {
        for (int32_t n : Readers(e.value)) {
          if (IsCpuDelegate(n)) {
            cpu_delegate = n;
            break;
          }
        }
      } else {
        const int32_t p = Producer(e.value);
        if (p >= 0 && IsCpuDelegate(p)) cpu_delegate = p;
      }
      if (cpu_delegate >= 0) {
        Add(AuditFinding::Kind::kCopyAroundHostDelegate, e.instruction, e.value,
            absl::StrCat(copy, e.to_device ? " for " : " from ", Node(cpu_delegate),
                         ", a delegate whose target_device is cpu; Ferry copies nothing"));
      } else {
        Add(AuditFinding::Kind::kUnneededCopy, e.instruction, e.value,
            absl::StrCat(copy, "; Ferry's plan does not copy it"));
      }
    }
  }

  // Host-device copies of Ferry's plan: each should be one the exporter made.
  void FerryCopies() {
    for (const CopyStep& c : plan_.copies) {
      if (!IsCrossing(c)) continue;
      if (exporter_copies_.contains({c.value, c.direction == CopyDirection::kHostToDevice})) {
        continue;
      }
      const bool h2d = c.direction == CopyDirection::kHostToDevice;
      const std::string ferry_copies =
          absl::StrCat("Ferry copies ", Value(c.value), " from ", c.src_device.ToString(), " to ",
                       c.dst_device.ToString(), " (", CopyTimingName(c.timing), ", ", c.reason,
                       ")");
      // The node the copy is for: the one it feeds, or (a copy made once at load) the first
      // node on its destination that reads the value.
      int32_t reader = c.node;
      if (reader < 0) {
        for (int32_t n : Readers(c.value)) {
          if (plan_.nodes[n].device == c.dst_device) {
            reader = n;
            break;
          }
        }
      }
      if (h2d && reader >= 0 && m_.values[c.value].kind == ValueKind::kConstant &&
          m_.nodes[reader].kind == NodeKind::kDelegate) {
        Add(AuditFinding::Kind::kHostConstantToDevice, InstructionOf(reader), c.value,
            absl::StrCat("the constant ", Value(c.value), " is handed to ", Node(reader),
                         " as host memory; ", ferry_copies));
        continue;
      }
      const int32_t producer = Producer(c.value);
      if (!h2d && producer >= 0 && m_.nodes[producer].kind == NodeKind::kDelegate &&
          m_.nodes[producer].results.size() == 1) {
        Add(AuditFinding::Kind::kMissingResultCopy, InstructionOf(producer), c.value,
            absl::StrCat("the only result ", Value(c.value), " of ", Node(producer),
                         " has no device-to-host copy in the program; ", ferry_copies));
        continue;
      }
      Add(AuditFinding::Kind::kMissingCopy,
          reader >= 0 ? InstructionOf(reader) : InstructionOf(producer), c.value,
          absl::StrCat(ferry_copies, "; the exporter left this copy out"));
    }
  }

  // Tensors annotated on a device, read on another.
  void Annotations() {
    for (const ExporterDevice& a : m_.exporter_devices) {
      // A value the exporter copies: its readers may read the copy, which the copies' findings
      // cover.
      if (exporter_copied_.contains(a.value)) continue;
      const Device annotated = Used(a.device);
      for (int32_t node : Readers(a.value)) {
        if (plan_.nodes[node].device == annotated) continue;
        Add(AuditFinding::Kind::kDeviceMismatch, InstructionOf(node), a.value,
            absl::StrCat(Value(a.value), " is annotated on ", Declared(a.device), " but read by ",
                         Node(node)));
      }
    }
  }

  // Planned values whose exporter arena is on another device than Ferry's home of the value.
  void ArenaDevices() {
    for (const ExporterAllocation& a : m_.exporter_allocations) {
      if (a.value < 0 || static_cast<size_t>(a.value) >= plan_.value_homes.size()) continue;
      const auto found = arena_index_.find(a.memory_id);
      if (found == arena_index_.end()) continue;
      const ExporterArena* arena = &m_.exporter_arenas[found->second];
      const Device& home = plan_.value_homes[a.value];
      if (Used(arena->device) == home) continue;
      // The instruction that writes the value names it; an input says which one it is.
      const int32_t producer = Producer(a.value);
      std::string input;
      if (const auto it = input_index_.find(a.value); producer < 0 && it != input_index_.end()) {
        input = absl::StrCat(" (method input ", it->second, ")");
      }
      Add(AuditFinding::Kind::kArenaDeviceMismatch, InstructionOf(producer), a.value,
          absl::StrCat(Value(a.value), input, " is planned in the exporter's arena ", a.memory_id,
                       " on ", Declared(arena->device), ", but Ferry places it on ",
                       home.ToString()));
    }
  }

  const MethodDef& m_;
  const PlacementPlan& plan_;
  const absl::flat_hash_map<Device, Device>& device_map_;
  std::vector<int32_t> producer_;  // per value, the first node that writes it as a result, or -1
  std::vector<size_t> reader_begin_;              // per value: where its readers start in readers_
  std::vector<int32_t> readers_;                  // the nodes reading each value, in node order
  absl::flat_hash_set<ValueId> exporter_copied_;  // values the exporter copies
  absl::flat_hash_set<std::pair<ValueId, bool>> exporter_copies_;  // (value, to a device)
  absl::flat_hash_set<std::pair<ValueId, bool>> plan_crossings_;   // (value, to a device)
  absl::flat_hash_map<uint32_t, size_t> arena_index_;  // memory_id -> its first exporter arena
  absl::flat_hash_map<ValueId, size_t> input_index_;   // value -> its first input position
  std::vector<AuditFinding> findings_;
};

}  // namespace

std::vector<AuditFinding> AuditExporterPlacement(
    const MethodDef& method, const PlacementPlan& plan,
    const absl::flat_hash_map<Device, Device>& device_map) {
  return Auditor(method, plan, device_map).Run();
}

}  // namespace ferry
