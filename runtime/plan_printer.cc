#include "ferry/runtime/plan_printer.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "ferry/runtime/internal/load_util.h"

namespace ferry {
namespace {

std::string Bytes(size_t n) { return internal::FormatBytes(n); }

std::string Shape(DType dtype, const std::vector<int64_t>& sizes) {
  return absl::StrCat(DTypeName(dtype), "[", absl::StrJoin(sizes, ", "), "]");
}

// The device as the program declared it, with the device used when they differ:
// "cuda:0 (as sim:0)". The arenas list every device the plan uses.
std::string DeviceOf(const MethodPlan& plan, const Device& d) {
  for (const ArenaInfo& a : plan.arenas) {
    if (a.device == d) return a.device_label;
  }
  return d.ToString();
}

// A DOT string literal's content: names may hold quotes and backslashes.
std::string Escape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}});
}

// Fill colours of nodes: grey for the host, then one colour per device of the plan in order, so
// that every device in one picture has its own (up to eight devices).
constexpr const char* kHostColor = "#dddddd";
constexpr const char* kDeviceColors[] = {"#a6cee3", "#b2df8a", "#cab2d6", "#fdbf6f",
                                         "#8dd3c7", "#bebada", "#80b1d3", "#b3de69"};
// Copies, by timing, and the edge from a copy's source.
constexpr const char* kOnceCopyColor = "#fff5cc";
constexpr const char* kPerCallCopyColor = "#fbb4ae";
constexpr const char* kCopySourceEdgeColor = "#e41a1c";

// What FormatPlanDot drew, so that its legend explains exactly that.
struct DotUsed {
  bool inputs = false;
  bool constants = false;
  bool states = false;
  bool once_copies = false;
  bool per_call_copies = false;
  bool outputs = false;
  bool copy_edges = false;
  bool read_edges = false;
  bool shared = false;  // values drawn once for several methods (FormatProgramDot)
};

// The legend: every device with its colour, then every vertex shape and edge style used.
void AppendDotLegend(const std::vector<Device>& devices, const std::vector<std::string>& colors,
                     const MethodPlan& plan, const DotUsed& used, std::string* out) {
  absl::StrAppend(out, "  subgraph cluster_legend { label=\"legend\"; fontsize=10;\n");
  for (size_t i = 0; i < devices.size(); ++i) {
    absl::StrAppendFormat(
        out,
        "    \"legend_%s\" [label=\"node on %s\", shape=box, style=filled, fillcolor=\"%s\"];\n",
        devices[i].ToString(), Escape(DeviceOf(plan, devices[i])), colors[i]);
  }
  auto vertex = [&](bool use, const char* id, const char* label, const char* attributes) {
    if (use) absl::StrAppendFormat(out, "    %s [label=\"%s\", %s];\n", id, label, attributes);
  };
  vertex(used.inputs, "legend_input", "method input (the caller's memory)", "shape=invhouse");
  vertex(used.constants, "legend_constant", "constant (data in the program)", "shape=note");
  vertex(used.states, "legend_state", "state: initial data in the program", "shape=cylinder");
  vertex(used.once_copies, "legend_once", "copy once, at load",
         absl::StrFormat("shape=cds, style=filled, fillcolor=\"%s\"", kOnceCopyColor).c_str());
  vertex(used.per_call_copies, "legend_per_call", "copy on every call",
         absl::StrFormat("shape=cds, style=filled, fillcolor=\"%s\"", kPerCallCopyColor).c_str());
  vertex(used.outputs, "legend_output", "method output (device: where the caller gets it)",
         "shape=house");
  vertex(used.shared, "legend_shared", "bold: shared by the methods, drawn once",
         "shape=note, style=bold");
  auto edge = [&](bool use, const char* id, const char* label, const std::string& attributes) {
    if (!use) return;
    absl::StrAppendFormat(out,
                          "    %s_from [label=\"\", shape=point];\n"
                          "    %s_to [label=\"%s\", shape=plaintext];\n"
                          "    %s_from -> %s_to%s;\n",
                          id, id, label, id, id, attributes);
  };
  edge(used.copy_edges, "legend_copy_edge", "a copy reads its source",
       absl::StrFormat(" [color=\"%s\"]", kCopySourceEdgeColor));
  edge(used.read_edges, "legend_read_edge", "read by a node, or returned as an output", "");
  absl::StrAppend(out, "  }\n");
}

}  // namespace

std::string FormatPlanText(const Method& method) {
  const MethodDef& m = method.def();
  const MethodPlan& plan = method.plan();
  const PlacementPlan& p = plan.placement;
  std::string out;
  absl::StrAppend(&out, "method \"", m.name, "\": ", m.nodes.size(), " nodes, ", m.values.size(),
                  " values\n");
  // A tensor with its shape, bytes and device; a non-tensor value with its kind and value (an
  // input's is the traced value, the only one a call may pass).
  auto io_line = [&](size_t i, const IoInfo& io, const char* value_role) {
    if (io.is_tensor()) {
      absl::StrAppendFormat(&out, "  %-3d %-16s %-20s %10s  on %s\n", i, io.name,
                            Shape(io.dtype, io.sizes), Bytes(io.bytes), io.device_label);
      return;
    }
    std::string value = io.value->ToString();
    if (value.size() > 64) value = absl::StrCat(value.substr(0, 60), " ...");
    absl::StrAppendFormat(&out, "  %-3d %-16s %-20s %s %s\n", i, io.name,
                          ScalarKindName(io.value->kind), value_role, value);
  };
  absl::StrAppend(&out, "inputs:\n");
  for (size_t i = 0; i < plan.inputs.size(); ++i) io_line(i, plan.inputs[i], "traced as");
  absl::StrAppend(&out, "outputs:\n");
  for (size_t i = 0; i < plan.outputs.size(); ++i) io_line(i, plan.outputs[i], "=");
  absl::StrAppend(&out, "nodes:\n");
  for (size_t n = 0; n < m.nodes.size(); ++n) {
    const NodeDef& node = m.nodes[n];
    std::string what = node.kind == NodeKind::kHostOp
                           ? node.op
                           : absl::StrCat("delegate:", node.delegate().backend);
    const std::vector<std::string>& built_in = plan.built_in_backends;
    if (node.kind == NodeKind::kDelegate &&
        std::find(built_in.begin(), built_in.end(), node.delegate().backend) != built_in.end()) {
      absl::StrAppend(&what, " (built-in)");
    }
    absl::StrAppendFormat(&out, "  %-3d %-20s %-20s on %s\n", n, node.name, what,
                          DeviceOf(plan, p.nodes[n].device));
  }
  int once = 0, per_call = 0;
  size_t once_bytes = 0, per_call_bytes = 0;
  for (const CopyStep& c : p.copies) {
    if (c.timing == CopyTiming::kOnce) {
      ++once;
      once_bytes += c.bytes;
    } else {
      ++per_call;
      per_call_bytes += c.bytes;
    }
  }
  absl::StrAppend(&out, "copies: ", once, " once at load (", Bytes(once_bytes), "), ", per_call,
                  " per call (", Bytes(per_call_bytes), " per call)\n");
  for (const CopyStep& c : p.copies) {
    absl::StrAppendFormat(&out, "  %-8s %-3s %-16s %-8s -> %-8s %10s%s  %s\n",
                          CopyTimingName(c.timing), CopyDirectionName(c.direction),
                          m.values[c.value].name, c.src_device.ToString(), c.dst_device.ToString(),
                          Bytes(c.bytes), c.converts_layout ? " (converts layout)" : "", c.reason);
  }
  absl::StrAppend(&out, "arenas:\n");
  for (const ArenaInfo& a : plan.arenas) {
    double ratio = a.lower_bound == 0 ? 1.0 : static_cast<double>(a.arena_bytes) / a.lower_bound;
    absl::StrAppendFormat(&out, "  %-8s arena %10s (lower bound %s, %.2fx)  constants %s\n",
                          a.device.ToString(), Bytes(a.arena_bytes), Bytes(a.lower_bound), ratio,
                          Bytes(a.constant_bytes));
  }
  if (!m.exporter_arenas.empty()) {
    // The exporter's own plan, beside Ferry's: what the program would take where it came from.
    size_t ferry_bytes = 0;
    for (const ArenaInfo& a : plan.arenas) ferry_bytes += a.arena_bytes;
    int64_t declared = 0;
    for (const ExporterArena& e : m.exporter_arenas) declared += e.declared_bytes;
    absl::StrAppendFormat(&out,
                          "exporter's memory plan (ExecuTorch buffers, not used): %s declared in "
                          "%d buffer%s, Ferry's arenas %s\n",
                          Bytes(static_cast<size_t>(declared)), m.exporter_arenas.size(),
                          m.exporter_arenas.size() == 1 ? "" : "s", Bytes(ferry_bytes));
    for (const ExporterArena& e : m.exporter_arenas) {
      absl::StrAppendFormat(
          &out, "  buffer %-3d on %-8s %10s declared, %s used by %d tensor%s%s\n", e.memory_id,
          e.device.ToString(), Bytes(static_cast<size_t>(e.declared_bytes)),
          Bytes(static_cast<size_t>(e.used_bytes)), e.tensors, e.tensors == 1 ? "" : "s",
          e.tensors == 0 && e.declared_bytes > 0 ? " (nothing placed in it)" : "");
    }
  }
  absl::StrAppend(&out, "memory (arena and constants, per device):\n");
  for (const ArenaInfo& a : plan.arenas) {
    const size_t total = a.arena_bytes + a.constant_bytes;
    std::string of;
    if (a.available_bytes != SIZE_MAX) {
      of = absl::StrFormat(" of %s available (%.1f%%)", Bytes(a.available_bytes),
                           a.available_bytes == 0 ? 100.0 : 100.0 * total / a.available_bytes);
    }
    if (a.limit_bytes != SIZE_MAX) absl::StrAppend(&of, ", limit ", Bytes(a.limit_bytes));
    absl::StrAppendFormat(&out, "  %-8s %10s%s\n", a.device.ToString(), Bytes(total), of);
  }
  if (!p.diagnostics.empty()) {
    absl::StrAppend(&out, "diagnostics:\n");
    for (const Diagnostic& d : p.diagnostics) {
      absl::StrAppend(
          &out, "  ",
          d.severity == Diagnostic::Severity::kError ? "error: " : "warning: ", d.message, "\n");
    }
  }
  return out;
}

namespace {

// Devices of the graph (host first) and their fill colours.
struct DotDevices {
  std::vector<Device> devices = {Device::Host()};
  std::vector<std::string> colors = {kHostColor};
  const MethodPlan* label_plan = nullptr;  // names devices as declared (the first method's)

  void Add(const PlacementPlan& p) {
    for (const Device& d : p.devices()) {
      if (std::find(devices.begin(), devices.end(), d) != devices.end()) continue;
      devices.push_back(d);
      colors.push_back(kDeviceColors[(devices.size() - 2) % std::size(kDeviceColors)]);
    }
  }
  const std::string& ColorOf(const Device& d) const {
    size_t i = 0;
    while (i + 1 < devices.size() && devices[i] != d) ++i;
    return colors[i];
  }
};

// Appends the vertices and edges of `method`, their ids prefixed with `prefix`. A value with an
// entry in `shared` (a vertex drawn outside, for values several methods share) is not drawn
// again: its edges start at that vertex.
void AppendMethodDot(const Method& method, const std::string& prefix,
                     const absl::flat_hash_map<ValueId, std::string>& shared,
                     const DotDevices& devices, DotUsed* used, std::string* body) {
  const MethodDef& m = method.def();
  const MethodPlan& plan = method.plan();
  const PlacementPlan& p = plan.placement;
  std::vector<std::string> writer(p.buffers.size());
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const PlannedBuffer& buf = p.buffers[b];
    if (buf.kind == BufferKind::kInput || buf.kind == BufferKind::kProgramData) {
      if (auto it = shared.find(buf.value); it != shared.end()) {
        writer[b] = it->second;
        continue;
      }
      std::string id = absl::StrCat(prefix, "v", buf.value);
      writer[b] = id;
      const ValueDef& v = m.values[buf.value];
      const char* shape = "note";
      if (buf.kind == BufferKind::kInput) {
        shape = "invhouse";
        used->inputs = true;
      } else if (v.kind == ValueKind::kState) {
        shape = "cylinder";
        used->states = true;
      } else {
        used->constants = true;
      }
      absl::StrAppendFormat(body, "  %s [label=\"%s\\n%s %s\", shape=%s];\n", id, Escape(v.name),
                            ValueKindName(v.kind), v.meta.ToString(), shape);
    }
  }
  auto copy_vertex = [&](size_t i) {
    const CopyStep& c = p.copies[i];
    std::string id = absl::StrCat(prefix, "c", i);
    const bool once = c.timing == CopyTiming::kOnce;
    (once ? used->once_copies : used->per_call_copies) = true;
    absl::StrAppendFormat(
        body, "  %s [label=\"%s %s\\n%s\\n%s\", shape=cds, style=filled, fillcolor=\"%s\"];\n", id,
        CopyDirectionName(c.direction), Escape(m.values[c.value].name), Bytes(c.bytes),
        CopyTimingName(c.timing), once ? kOnceCopyColor : kPerCallCopyColor);
    if (!writer[c.src_buffer].empty()) {
      absl::StrAppendFormat(body, "  %s -> %s [color=\"%s\"];\n", writer[c.src_buffer], id,
                            kCopySourceEdgeColor);
      used->copy_edges = true;
    }
    writer[c.dst_buffer] = id;
    return id;
  };
  for (int32_t i : p.load_copies) copy_vertex(i);
  for (const ScheduleStep& s : p.schedule) {
    if (s.kind == ScheduleStep::Kind::kCopy) {
      copy_vertex(s.index);
      continue;
    }
    const NodeDef& node = m.nodes[s.index];
    const NodePlacement& placed = p.nodes[s.index];
    std::string id = absl::StrCat(prefix, "n", s.index);
    absl::StrAppendFormat(
        body, "  %s [label=\"%d: %s\\n%s\", shape=box, style=filled, fillcolor=\"%s\"];\n", id,
        s.index, Escape(node.name),
        node.kind == NodeKind::kHostOp ? node.op : node.delegate().backend,
        devices.ColorOf(placed.device));
    for (int32_t b : placed.arg_buffers) {
      if (b >= 0 && !writer[b].empty()) {
        absl::StrAppendFormat(body, "  %s -> %s;\n", writer[b], id);
        used->read_edges = true;
      }
    }
    for (int32_t b : placed.result_buffers) writer[b] = id;
  }
  for (size_t i = 0; i < p.output_buffers.size(); ++i) {
    int32_t b = p.output_buffers[i];
    if (b < 0) continue;  // not a tensor
    std::string id = absl::StrCat(prefix, "out", i);
    used->outputs = true;
    absl::StrAppendFormat(body, "  %s [label=\"output %d\\n%s\\non %s\", shape=house];\n", id, i,
                          Escape(plan.outputs[i].name), Escape(plan.outputs[i].device_label));
    if (!writer[b].empty()) {
      absl::StrAppendFormat(body, "  %s -> %s;\n", writer[b], id);
      used->read_edges = true;
    }
  }
}

std::string DotGraph(const std::string& name, const DotDevices& devices, const DotUsed& used,
                     const std::string& body) {
  std::string out;
  absl::StrAppend(&out, "digraph \"", Escape(name), "\" {\n  rankdir=TB;\n",
                  "  node [fontname=\"Helvetica\", fontsize=10];\n");
  AppendDotLegend(devices.devices, devices.colors, *devices.label_plan, used, &out);
  absl::StrAppend(&out, body, "}\n");
  return out;
}

}  // namespace

std::string FormatPlanDot(const Method& method) {
  DotDevices devices;
  devices.Add(method.plan().placement);
  devices.label_plan = &method.plan();
  DotUsed used;
  std::string body;
  AppendMethodDot(method, "", {}, devices, &used, &body);
  return DotGraph(method.def().name, devices, used, body);
}

std::string FormatProgramDot(absl::Span<const Method* const> methods) {
  DotDevices devices;
  for (const Method* method : methods) devices.Add(method->plan().placement);
  if (methods.empty()) return "digraph \"program\" {\n}\n";
  devices.label_plan = &methods[0]->plan();
  // Values several methods share: constants with the same data in the program (one replica per
  // device), and shared states of one name.
  struct Shared {
    std::string label;
    bool state = false;
    std::vector<std::pair<size_t, ValueId>> uses;  // (method, value)
  };
  std::vector<Shared> shared;
  absl::flat_hash_map<std::string, size_t> index;
  for (size_t i = 0; i < methods.size(); ++i) {
    const MethodDef& m = methods[i]->def();
    for (size_t v = 0; v < m.values.size(); ++v) {
      const ValueDef& value = m.values[v];
      std::string key;
      if (value.kind == ValueKind::kState && value.shared) {
        key = absl::StrCat("state ", value.name);
      } else if (value.kind == ValueKind::kConstant && !value.data.empty()) {
        key = absl::StrCat("constant ", reinterpret_cast<uintptr_t>(value.data.data()), " ",
                           value.meta.ToString());
      } else {
        continue;
      }
      auto [it, added] = index.try_emplace(key, shared.size());
      if (added) {
        shared.push_back({absl::StrCat(Escape(value.name), "\\nshared ", ValueKindName(value.kind), " ",
                                       value.meta.ToString()),
                          value.kind == ValueKind::kState, {}});
      }
      shared[it->second].uses.push_back({i, static_cast<ValueId>(v)});
    }
  }
  DotUsed used;
  std::string body;
  std::vector<absl::flat_hash_map<ValueId, std::string>> drawn(methods.size());
  int n = 0;
  for (const Shared& s : shared) {
    absl::flat_hash_set<size_t> readers;
    for (const auto& [i, v] : s.uses) readers.insert(i);
    if (readers.size() < 2) continue;
    const std::string id = absl::StrCat("s", n++);
    absl::StrAppendFormat(&body, "  %s [label=\"%s\", shape=%s, style=bold];\n", id, s.label,
                          s.state ? "cylinder" : "note");
    (s.state ? used.states : used.constants) = true;
    used.shared = true;
    for (const auto& [i, v] : s.uses) drawn[i][v] = id;
  }
  for (size_t i = 0; i < methods.size(); ++i) {
    absl::StrAppendFormat(&body, "  subgraph cluster_m%d {\n  label=\"method \\\"%s\\\"\";\n", i,
                          Escape(methods[i]->def().name));
    AppendMethodDot(*methods[i], absl::StrCat("m", i, "_"), drawn[i], devices, &used, &body);
    absl::StrAppend(&body, "  }\n");
  }
  return DotGraph("program", devices, used, body);
}

}  // namespace ferry
