// `ferry verify`: a bundled program's test cases, run and compared (runtime/verify.h).
#include "ferry/runtime/verify.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/runtime/cli/internal.h"

namespace ferry::cli {
namespace {

const char* Outcome(const CaseResult& r) {
  if (!r.status.ok()) return "error";
  return r.passed ? "pass" : "fail";
}

std::string CaseJson(const CaseResult& r) {
  std::string s = absl::StrCat("{\"method\": ", JsonString(r.method), ", \"case\": ", r.case_index,
                               ", \"result\": \"", Outcome(r), "\"");
  if (!r.status.ok()) {
    absl::StrAppend(&s, ", \"error\": ", JsonString(r.status.message()), "}");
    return s;
  }
  absl::StrAppend(&s, ", \"max_abs_error\": ", JsonNumber(r.max_abs_error, 9),
                  ", \"max_rel_error\": ", JsonNumber(r.max_rel_error, 9),
                  ", \"mismatched_elements\": ", r.mismatched_elements);
  if (r.first_mismatch.has_value()) {
    const Mismatch& m = *r.first_mismatch;
    absl::StrAppend(&s, ", \"first_mismatch\": {\"output\": ", m.output);
    if (!m.detail.empty()) {
      absl::StrAppend(&s, ", \"detail\": ", JsonString(m.detail));
    } else {
      if (m.element >= 0) {
        absl::StrAppend(&s, ", \"element\": ", m.element, ", \"index\": [",
                        absl::StrJoin(m.index, ", "), "]");
      }
      absl::StrAppend(&s, ", \"actual\": ", JsonNumber(m.actual, 17),
                      ", \"expected\": ", JsonNumber(m.expected, 17));
    }
    absl::StrAppend(&s, "}");
  }
  absl::StrAppend(&s, "}");
  return s;
}

}  // namespace

int Verify(const Options& options, Runtime& rt, const Program& program, std::FILE* out,
           std::FILE* err) {
  VerifyOptions verify;
  verify.tolerance = options.tolerance;
  verify.load = options.load;
  if (options.method_given) verify.method = options.method;
  absl::StatusOr<std::vector<CaseResult>> results = VerifyTestSuites(rt, program, verify);
  if (!results.ok()) return Fail(err, results.status());
  size_t passed = 0, failed = 0, errors = 0;
  for (const CaseResult& r : *results) {
    if (!r.status.ok()) {
      ++errors;
    } else if (r.passed) {
      ++passed;
    } else {
      ++failed;
    }
  }
  if (options.json) {
    std::vector<std::string> cases;
    for (const CaseResult& r : *results) cases.push_back(CaseJson(r));
    absl::FPrintF(out,
                  "{\"program\": %s, \"rtol\": %s, \"atol\": %s, \"cases\": [\n  %s\n], "
                  "\"summary\": {\"cases\": %d, \"passed\": %d, \"failed\": %d, \"errors\": %d}}\n",
                  JsonString(options.program), JsonNumber(options.tolerance.rtol, 9),
                  JsonNumber(options.tolerance.atol, 9), absl::StrJoin(cases, ",\n  "),
                  results->size(), passed, failed, errors);
  } else {
    for (const CaseResult& r : *results) absl::FPrintF(out, "%s\n", FormatCaseResult(r));
    absl::FPrintF(out,
                  "verify: %d case%s, %d passed, %d failed, %d could not run (rtol %g, atol %g)\n",
                  results->size(), results->size() == 1 ? "" : "s", passed, failed, errors,
                  options.tolerance.rtol, options.tolerance.atol);
  }
  return passed == results->size() ? kExitOk : kExitError;
}

}  // namespace ferry::cli
