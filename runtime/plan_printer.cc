#include "ferry/runtime/plan_printer.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

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

std::string DeviceOf(const MethodPlan& plan, const Device& d) {
  for (const IoInfo& io : plan.inputs) {
    if (io.device == d) return io.device_label;
  }
  for (const IoInfo& io : plan.outputs) {
    if (io.device == d) return io.device_label;
  }
  return d.ToString();
}

std::string Escape(const std::string& s) { return absl::StrReplaceAll(s, {{"\"", "\\\""}}); }

const char* DeviceColor(const Device& d) {
  switch (d.type) {
    case DeviceType::kHost:
      return "#dddddd";
    case DeviceType::kSim:
      return d.index == 0 ? "#a6cee3" : "#b2df8a";
    case DeviceType::kCuda:
      return d.index == 0 ? "#76b900" : "#fdbf6f";
  }
  return "white";
}

}  // namespace

std::string FormatPlanText(const Method& method) {
  const MethodDef& m = method.def();
  const MethodPlan& plan = method.plan();
  const PlacementPlan& p = plan.placement;
  std::string out;
  absl::StrAppend(&out, "method \"", m.name, "\": ", m.nodes.size(), " nodes, ", m.values.size(),
                  " values\n");
  absl::StrAppend(&out, "inputs:\n");
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const IoInfo& io = plan.inputs[i];
    absl::StrAppendFormat(&out, "  %-3d %-16s %-20s %10s  on %s\n", i, io.name,
                          Shape(io.dtype, io.sizes), Bytes(io.bytes), io.device_label);
  }
  absl::StrAppend(&out, "outputs:\n");
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const IoInfo& io = plan.outputs[i];
    absl::StrAppendFormat(&out, "  %-3d %-16s %-20s %10s  on %s\n", i, io.name,
                          Shape(io.dtype, io.sizes), Bytes(io.bytes), io.device_label);
  }
  absl::StrAppend(&out, "nodes:\n");
  for (size_t n = 0; n < m.nodes.size(); ++n) {
    const NodeDef& node = m.nodes[n];
    std::string what = node.kind == NodeKind::kHostOp ? node.op : absl::StrCat("delegate:", node.backend);
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
                          m.values[c.value].name, c.src_device.ToString(),
                          c.dst_device.ToString(), Bytes(c.bytes),
                          c.converts_layout ? " (converts layout)" : "", c.reason);
  }
  absl::StrAppend(&out, "arenas:\n");
  for (const ArenaInfo& a : plan.arenas) {
    double ratio = a.lower_bound == 0 ? 1.0 : static_cast<double>(a.arena_bytes) / a.lower_bound;
    absl::StrAppendFormat(&out, "  %-8s arena %10s (lower bound %s, %.2fx)  constants %s\n",
                          a.device.ToString(), Bytes(a.arena_bytes), Bytes(a.lower_bound), ratio,
                          Bytes(a.constant_bytes));
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
      absl::StrAppend(&out, "  ", d.severity == Diagnostic::Severity::kError ? "error: " : "warning: ",
                      d.message, "\n");
    }
  }
  return out;
}

std::string FormatPlanDot(const Method& method) {
  const MethodDef& m = method.def();
  const MethodPlan& plan = method.plan();
  const PlacementPlan& p = plan.placement;
  std::string out;
  absl::StrAppend(&out, "digraph \"", Escape(m.name), "\" {\n  rankdir=TB;\n",
                  "  node [fontname=\"Helvetica\", fontsize=10];\n");
  // Legend: one cluster entry per device.
  std::vector<Device> devices = {Device::Host()};
  for (const Device& d : p.devices()) devices.push_back(d);
  absl::StrAppend(&out, "  subgraph cluster_legend { label=\"devices\"; fontsize=10;\n");
  for (const Device& d : devices) {
    absl::StrAppendFormat(&out, "    \"legend_%s\" [label=\"%s\", shape=box, style=filled, fillcolor=\"%s\"];\n",
                          d.ToString(), Escape(DeviceOf(plan, d)), DeviceColor(d));
  }
  absl::StrAppend(&out, "  }\n");
  std::vector<std::string> writer(p.buffers.size());
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const PlannedBuffer& buf = p.buffers[b];
    if (buf.kind == BufferKind::kInput || buf.kind == BufferKind::kProgramData) {
      std::string id = absl::StrCat("v", buf.value);
      writer[b] = id;
      const ValueDef& v = m.values[buf.value];
      absl::StrAppendFormat(&out, "  %s [label=\"%s\\n%s %s\", shape=%s];\n", id, Escape(v.name),
                            ValueKindName(v.kind), v.meta.ToString(),
                            buf.kind == BufferKind::kInput ? "invhouse" : "note");
    }
  }
  auto copy_vertex = [&](size_t i) {
    const CopyStep& c = p.copies[i];
    std::string id = absl::StrCat("c", i);
    absl::StrAppendFormat(
        &out, "  %s [label=\"%s %s\\n%s\\n%s\", shape=cds, style=filled, fillcolor=\"%s\"];\n", id,
        CopyDirectionName(c.direction), Escape(m.values[c.value].name), Bytes(c.bytes),
        CopyTimingName(c.timing),
        c.timing == CopyTiming::kOnce ? "#fff5cc" : "#fbb4ae");
    if (!writer[c.src_buffer].empty()) {
      absl::StrAppendFormat(&out, "  %s -> %s [color=\"#e41a1c\"];\n", writer[c.src_buffer], id);
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
    std::string id = absl::StrCat("n", s.index);
    absl::StrAppendFormat(&out, "  %s [label=\"%d: %s\\n%s\", shape=box, style=filled, fillcolor=\"%s\"];\n",
                          id, s.index, Escape(node.name),
                          node.kind == NodeKind::kHostOp ? node.op : node.backend,
                          DeviceColor(placed.device));
    for (int32_t b : placed.arg_buffers) {
      if (b >= 0 && !writer[b].empty()) absl::StrAppendFormat(&out, "  %s -> %s;\n", writer[b], id);
    }
    for (int32_t b : placed.result_buffers) writer[b] = id;
  }
  for (size_t i = 0; i < p.output_buffers.size(); ++i) {
    int32_t b = p.output_buffers[i];
    std::string id = absl::StrCat("out", i);
    absl::StrAppendFormat(&out, "  %s [label=\"output %d\\n%s\\non %s\", shape=house];\n", id, i,
                          Escape(plan.outputs[i].name), Escape(plan.outputs[i].device_label));
    if (!writer[b].empty()) absl::StrAppendFormat(&out, "  %s -> %s;\n", writer[b], id);
  }
  absl::StrAppend(&out, "}\n");
  return out;
}

}  // namespace ferry
