// `ferry plan`: the placement plan of one method, or of every method loaded together, as text or
// Graphviz dot, with the exporter audit on request.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/loader/plan/exporter_audit.h"
#include "ferry/runtime/cli/internal.h"
#include "ferry/runtime/plan_printer.h"

namespace ferry::cli {
namespace {

void PrintPlannedOnly(const std::vector<std::string>& missing, std::FILE* out) {
  for (const std::string& backend : missing) {
    absl::FPrintF(out,
                  "note: backend \"%s\" is not registered: planned from what the program "
                  "declares; running the method needs it registered (Runtime::RegisterBackend)\n",
                  backend);
  }
}

// `ferry plan --audit`: one line per difference between the exporter's placement and Ferry's.
void PrintAudit(const Options& options, const Runtime& rt, const Method& method, std::FILE* out) {
  const std::vector<AuditFinding> findings =
      AuditExporterPlacement(method.def(), method.plan().placement,
                             options.load.device_map.value_or(rt.default_device_map()));
  absl::FPrintF(out, "audit: %d difference%s between the exporter's placement and Ferry's\n",
                findings.size(), findings.size() == 1 ? "" : "s");
  for (const AuditFinding& f : findings) {
    absl::FPrintF(out, "  %s: %s\n", AuditFindingKindName(f.kind), f.message);
  }
}

// `ferry plan` of a program with several methods and no --method: every method, loaded together
// (Runtime::LoadProgram), then what they share, once; with --dot, one graph of them side by side.
// A method that does not load is listed with its reason in its place, the others still planned;
// the exit status is kExitOk only when every method loads.
int PlanAllMethods(const Options& options, const Runtime& rt, const Program& program,
                   std::FILE* out, std::FILE* err) {
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(program);
  const std::vector<std::string> names = program.method_names();
  std::vector<std::unique_ptr<Method>> methods;  // per name; null for one that did not load
  std::vector<absl::Status> refused(names.size());
  size_t failures = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StatusOr<std::unique_ptr<Method>> method = loaded->LoadMethod(names[i], options.load);
    if (!method.ok()) {
      refused[i] = method.status();
      ++failures;
    }
    methods.push_back(method.ok() ? *std::move(method) : nullptr);
  }
  if (options.dot) {
    std::vector<const Method*> views;
    for (const auto& m : methods) {
      if (m != nullptr) views.push_back(m.get());
    }
    if (!views.empty()) std::fputs(FormatProgramDot(views).c_str(), out);
  } else {
    for (size_t i = 0; i < names.size(); ++i) {
      if (methods[i] == nullptr) {
        absl::FPrintF(out, "== method \"%s\" ==\nnot loaded: %s\n\n", names[i],
                      refused[i].message());
        continue;
      }
      absl::FPrintF(out, "== method \"%s\" ==\n%s\n", names[i], FormatPlanText(*methods[i]));
      if (options.audit) PrintAudit(options, rt, *methods[i], out);
    }
    if (failures == 0) {
      absl::FPrintF(out, "== program: %d methods loaded together ==\n", names.size());
    } else {
      absl::FPrintF(out, "== program: %d of %d methods loaded together ==\n",
                    names.size() - failures, names.size());
    }
    absl::FPrintF(out, "constant replicas, made once and shared by the methods: %s\n",
                  DeviceBytes(loaded->replica_bytes()));
    absl::FPrintF(out, "shared states: %s\n", DeviceBytes(loaded->shared_state_bytes()));
    for (size_t i = 0; i < names.size(); ++i) {
      if (methods[i] == nullptr) continue;
      std::vector<std::string> parts;
      for (const ArenaInfo& a : methods[i]->plan().arenas) {
        parts.push_back(absl::StrCat(a.device_label, ": arena ", a.arena_bytes,
                                     " B, replicas made ", a.constant_bytes, " B, shared ",
                                     a.shared_constant_bytes, " B, shared states ",
                                     a.shared_state_bytes, " B"));
      }
      absl::FPrintF(out, "method \"%s\": %s\n", names[i], absl::StrJoin(parts, "; "));
    }
  }
  if (failures == 0) return kExitOk;
  std::vector<std::string> failed;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!refused[i].ok()) failed.push_back(absl::StrCat("\"", names[i], "\""));
  }
  absl::FPrintF(err, "ferry: %d of %d methods did not load: %s%s\n", failures, names.size(),
                absl::StrJoin(failed, ", "),
                options.dot ? "" : " (each one's reason is in its place above)");
  if (options.dot) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (!refused[i].ok()) absl::FPrintF(err, "ferry: %s\n", refused[i].message());
    }
  }
  return kExitError;
}

}  // namespace

int Plan(const Options& options, const Runtime& rt, const Program& program,
         const std::vector<std::string>& planned_only, std::FILE* out, std::FILE* err) {
  if (!options.method_given && program.method_names().size() > 1) {
    const int code = PlanAllMethods(options, rt, program, out, err);
    if (!options.dot) PrintPlannedOnly(planned_only, out);
    return code;
  }
  absl::StatusOr<std::unique_ptr<Method>> method =
      rt.LoadMethod(program, options.method, options.load);
  if (!method.ok()) return Fail(err, method.status());
  std::string text = options.dot ? FormatPlanDot(**method) : FormatPlanText(**method);
  std::fputs(text.c_str(), out);
  if (!options.dot) PrintPlannedOnly(planned_only, out);
  if (options.audit && !options.dot) PrintAudit(options, rt, **method, out);
  return kExitOk;
}

}  // namespace ferry::cli
