// Running the test cases a bundled program carries (Program::test_suites(),
// loader/model/test_cases.h), as ExecuTorch's bundled-program check does.
//
//   FERRY_ASSIGN_OR_RETURN(auto program, Program::Load("model.bpte"));
//   FERRY_ASSIGN_OR_RETURN(std::vector<CaseResult> results, VerifyTestSuites(rt, *program, {}));
//   for (const CaseResult& r : results) EXPECT_TRUE(r.passed) << FormatCaseResult(r);
//
// A case binds its inputs (a tensor is copied to aligned memory on the device the method takes
// it on; an int, bool or double is set as a non-tensor input, which must equal the value the
// program was traced with), executes the method once and compares every output with the
// expected one:
//  - float outputs (float16, bfloat16, float32, float64) element by element as ExecuTorch's
//    check does: equal when both are NaN, when both are the same infinity, or when
//    |actual - expected| <= atol + rtol * |expected|; with rtol = atol = 0, exactly;
//  - integer and bool outputs, and int and bool values, exactly; doubles as float elements;
//  - dtypes, ranks and sizes must be equal; a tensor is compared in logical (row-major) order,
//    whatever the memory order (dim order) of either side.
// A case that cannot run (the method does not load, an input does not bind, Execute fails, the
// case has the wrong number of inputs or outputs) is reported with `status` naming why; it never
// counts as passed.
//
// Thread safety: as the Method and Runtime used; the functions keep no state.
#ifndef FERRY_RUNTIME_VERIFY_H_
#define FERRY_RUNTIME_VERIFY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/loader/model/test_cases.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/runtime/method.h"
#include "ferry/runtime/runtime.h"

namespace ferry {

// ExecuTorch's defaults for its bundled-program check (verify_method_outputs).
struct VerifyTolerance {
  double rtol = 1e-5;
  double atol = 1e-8;
};

// Where an output first differs from its expected value.
struct Mismatch {
  size_t output = 0;
  // The element, in logical row-major order, with its index per dimension; -1 when the whole
  // output differs (its kind, dtype or shape: see `detail`) or it is not a tensor.
  int64_t element = -1;
  std::vector<int64_t> index;
  double actual = 0;
  double expected = 0;
  std::string detail;  // for a whole-output difference, e.g. "dtype int64, expected float32"
};

struct CaseResult {
  std::string method;
  size_t case_index = 0;  // in its suite (set by VerifyTestSuites; RunTestCase leaves 0)
  absl::Status status;    // why the case could not run; OK when it ran
  bool passed = false;    // it ran and every output matched
  // Over the float elements and doubles compared: the largest |actual - expected|, and the
  // largest |actual - expected| / |expected| where expected is not 0; NaN and infinity pairs
  // that match count 0.
  double max_abs_error = 0;
  double max_rel_error = 0;
  size_t mismatched_elements = 0;  // over all outputs; a whole-output difference counts 1
  std::optional<Mismatch> first_mismatch;
};

// Memory for a case's inputs, valid while the method may read them.
struct TestInputBuffers {
  std::vector<std::vector<uint64_t>> host;  // 8-byte aligned copies of tensor inputs
  std::vector<DeviceBuffer> device;
};

// Binds `test`'s inputs to `method`: InvalidArgument naming the input when the number of inputs,
// a kind, dtype, shape or dim order differs from the method's, or a non-tensor input differs
// from its traced value; `buffers` holds the tensors' memory from then on.
absl::Status BindTestInputs(const Runtime& runtime, Method& method, const TestCase& test,
                            TestInputBuffers& buffers);

// Binds, executes once and compares (see above). `method_name` is recorded in the result.
CaseResult RunTestCase(const Runtime& runtime, Method& method, const TestCase& test,
                       const VerifyTolerance& tolerance);

struct VerifyOptions {
  VerifyTolerance tolerance;
  std::string method;  // only this method's suite; empty: every suite
  LoadOptions load;
};

// Loads the method of each suite (as one LoadedProgram, so device constants are made once) and
// runs every case, in the file's order. A method that does not load gives each of its cases
// that status. FailedPrecondition when the program carries no test cases; NotFound naming the
// suites when `options.method` has none.
absl::StatusOr<std::vector<CaseResult>> VerifyTestSuites(const Runtime& runtime,
                                                         const Program& program,
                                                         const VerifyOptions& options);

// One line for a result: "forward case 1: FAIL (max abs error 0.5, max rel error 0.25, 3
// elements differ; first: output 0 [0, 2]: 1.5, expected 1)", "... PASS (...)", or
// "... ERROR: <status>".
std::string FormatCaseResult(const CaseResult& result);

}  // namespace ferry

#endif  // FERRY_RUNTIME_VERIFY_H_
