#include "ferry/runtime/verify.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"

namespace ferry {
namespace {

std::string Shape(absl::Span<const int64_t> sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

// "an int", "a double".
std::string WithArticle(Scalar::Kind kind) {
  const bool vowel = kind == Scalar::Kind::kInt || kind == Scalar::Kind::kIntList;
  return absl::StrCat(vowel ? "an " : "a ", ScalarKindName(kind));
}

std::string KindName(const TestValue& v) {
  return v.is_tensor ? "a tensor" : WithArticle(v.scalar.kind);
}

// A test tensor's layout: dense, in its dim order.
TensorMeta MetaOf(const TestValue& v) {
  TensorMeta meta;
  meta.dtype = v.dtype;
  meta.sizes.assign(v.sizes.begin(), v.sizes.end());
  meta.dim_order.assign(v.dim_order.begin(), v.dim_order.end());
  return meta;
}

// An integer or bool element as int64, exactly.
int64_t ElementAsInt(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
    case DType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
    case DType::kUInt16: {
      uint16_t v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
    case DType::kInt8:
      return static_cast<int8_t>(*p);
    case DType::kUInt8:
    case DType::kBool:
      return *p;
    default:
      return static_cast<int64_t>(ElementAsDouble(dtype, p));
  }
}

class Comparison {
 public:
  Comparison(const VerifyTolerance& tolerance, CaseResult& result)
      : tolerance_(tolerance), result_(result) {}

  // A float pair: ExecuTorch's closeness, and the error figures.
  bool Floats(double actual, double expected) {
    if (std::isnan(actual) || std::isnan(expected))
      return std::isnan(actual) && std::isnan(expected);
    if (std::isinf(actual) || std::isinf(expected)) return actual == expected;
    const double diff = std::fabs(actual - expected);
    result_.max_abs_error = std::max(result_.max_abs_error, diff);
    if (expected != 0)
      result_.max_rel_error = std::max(result_.max_rel_error, diff / std::fabs(expected));
    if (tolerance_.rtol == 0 && tolerance_.atol == 0) return actual == expected;
    return diff <= tolerance_.atol + tolerance_.rtol * std::fabs(expected);
  }

  void Differs(size_t output, int64_t element, std::vector<int64_t> index, double actual,
               double expected, std::string detail = "") {
    ++result_.mismatched_elements;
    if (result_.first_mismatch.has_value()) return;
    Mismatch m;
    m.output = output;
    m.element = element;
    m.index = std::move(index);
    m.actual = actual;
    m.expected = expected;
    m.detail = std::move(detail);
    result_.first_mismatch = std::move(m);
  }

 private:
  const VerifyTolerance& tolerance_;
  CaseResult& result_;
};

// Output `o` of `method` against `expected`.
absl::Status CompareOutput(const Runtime& runtime, const Method& method, size_t o,
                           const TestValue& expected, Comparison& cmp) {
  const IoInfo& io = method.plan().outputs[o];
  if (!io.is_tensor()) {
    FERRY_ASSIGN_OR_RETURN(const Scalar* actual, method.OutputValue(o));
    const bool same_kind = !expected.is_tensor && actual->kind == expected.scalar.kind;
    if (!same_kind) {
      cmp.Differs(o, -1, {}, 0, 0,
                  absl::StrCat(WithArticle(actual->kind), ", expected ", KindName(expected)));
      return absl::OkStatus();
    }
    switch (actual->kind) {
      case Scalar::Kind::kInt:
        if (actual->i != expected.scalar.i) {
          cmp.Differs(o, -1, {}, static_cast<double>(actual->i),
                      static_cast<double>(expected.scalar.i));
        }
        break;
      case Scalar::Kind::kBool:
        if (actual->b != expected.scalar.b) cmp.Differs(o, -1, {}, actual->b, expected.scalar.b);
        break;
      default:  // kDouble: the kinds a test case holds are int, bool and double
        if (!cmp.Floats(actual->d, expected.scalar.d)) {
          cmp.Differs(o, -1, {}, actual->d, expected.scalar.d);
        }
        break;
    }
    return absl::OkStatus();
  }
  if (!expected.is_tensor) {
    cmp.Differs(o, -1, {}, 0, 0, absl::StrCat("a tensor, expected ", KindName(expected)));
    return absl::OkStatus();
  }
  const TensorView view = method.Output(o);
  if (view.dtype() != expected.dtype) {
    cmp.Differs(
        o, -1, {}, 0, 0,
        absl::StrCat("dtype ", DTypeName(view.dtype()), ", expected ", DTypeName(expected.dtype)));
    return absl::OkStatus();
  }
  if (!std::equal(view.sizes().begin(), view.sizes().end(), expected.sizes.begin(),
                  expected.sizes.end())) {
    cmp.Differs(o, -1, {}, 0, 0,
                absl::StrCat("shape ", Shape(view.sizes()), ", expected ", Shape(expected.sizes)));
    return absl::OkStatus();
  }
  const DType dtype = view.dtype();
  const size_t element = DTypeSize(dtype);
  const int rank = view.ref().rank;
  // The output's span of memory: from its lowest to its highest element (strides are
  // non-negative in Ferry's views).
  int64_t span_elements = 1;
  for (int d = 0; d < rank; ++d) {
    if (view.sizes()[d] == 0) span_elements = 0;
  }
  for (int d = 0; d < rank && span_elements > 0; ++d) {
    span_elements += (view.sizes()[d] - 1) * view.strides()[d];
  }
  const uint8_t* actual_base = static_cast<const uint8_t*>(view.data());
  std::vector<uint8_t> staging;
  if (!view.device().is_host() && span_elements > 0) {
    DeviceRuntime* device = runtime.devices().Find(view.device());
    if (device == nullptr) {
      return absl::NotFoundError(absl::StrCat("output ", o, " is on ", view.device().ToString(),
                                              ", which is not present"));
    }
    staging.resize(static_cast<size_t>(span_elements) * element);
    FERRY_RETURN_IF_ERROR(device->CopyDeviceToHost(staging.data(), actual_base, staging.size()));
    FERRY_RETURN_IF_ERROR(device->Synchronize());
    actual_base = staging.data();
  }
  const std::vector<int64_t> expected_strides = MetaOf(expected).DenseStrides();
  const int64_t numel = view.numel();
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  for (int64_t e = 0; e < numel; ++e) {
    int64_t a_off = 0, x_off = 0;
    for (int d = 0; d < rank; ++d) {
      a_off += index[d] * view.strides()[d];
      x_off += index[d] * expected_strides[d];
    }
    const uint8_t* a = actual_base + a_off * element;
    const uint8_t* x = expected.data.data() + x_off * element;
    if (IsFloatDType(dtype)) {
      const double av = ElementAsDouble(dtype, a), xv = ElementAsDouble(dtype, x);
      if (!cmp.Floats(av, xv)) cmp.Differs(o, e, index, av, xv);
    } else {
      const int64_t av = ElementAsInt(dtype, a), xv = ElementAsInt(dtype, x);
      if (av != xv) {
        cmp.Differs(o, e, index, static_cast<double>(av), static_cast<double>(xv));
      }
    }
    for (int d = rank; d-- > 0;) {  // the next index, row-major
      if (++index[d] < view.sizes()[d]) break;
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BindTestInputs(const Runtime& runtime, Method& method, const TestCase& test,
                            TestInputBuffers& buffers) {
  const std::vector<IoInfo>& inputs = method.plan().inputs;
  const std::string& name = method.def().name;
  if (test.inputs.size() != inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the test case has ", test.inputs.size(),
                                                   " inputs, but method \"", name, "\" takes ",
                                                   inputs.size()));
  }
  buffers.host.assign(inputs.size(), {});
  buffers.device.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TestValue& v = test.inputs[i];
    const IoInfo& io = inputs[i];
    if (!v.is_tensor) {
      FERRY_RETURN_IF_ERROR(method.SetInput(i, v.scalar));
      continue;
    }
    if (v.sizes.size() > static_cast<size_t>(kMaxRank)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "method \"", name, "\": input ", i, " (\"", io.name,
          "\"): the test case's tensor has rank ", v.sizes.size(), ", above Ferry's ", kMaxRank));
    }
    // An aligned copy: the bundle aligns its data to 16 bytes in the file, which a reader of
    // the file's bytes cannot count on.
    std::vector<uint64_t>& host = buffers.host[i];
    host.resize((v.data.size() + 7) / 8);
    if (!v.data.empty()) std::memcpy(host.data(), v.data.data(), v.data.size());
    TensorRef ref = MetaOf(v).ToRef(host.data());
    Device device = Device::Host();
    if (io.is_tensor() && !io.device.is_host()) {
      DeviceRuntime* runtime_device = runtime.devices().Find(io.device);
      if (runtime_device == nullptr) {
        return absl::NotFoundError(absl::StrCat("method \"", name, "\": input ", i, " is taken on ",
                                                io.device.ToString(), ", which is not present"));
      }
      FERRY_ASSIGN_OR_RETURN(
          DeviceBuffer buffer,
          DeviceBuffer::Allocate(*runtime_device, std::max<size_t>(v.data.size(), 1), 64));
      FERRY_RETURN_IF_ERROR(
          runtime_device->CopyHostToDevice(buffer.data(), host.data(), v.data.size()));
      FERRY_RETURN_IF_ERROR(runtime_device->Synchronize());
      ref.data = buffer.data();
      device = io.device;
      buffers.device.push_back(std::move(buffer));
    }
    FERRY_RETURN_IF_ERROR(method.SetInput(i, TensorView(ref, device)));
  }
  return absl::OkStatus();
}

CaseResult RunTestCase(const Runtime& runtime, Method& method, const TestCase& test,
                       const VerifyTolerance& tolerance) {
  CaseResult result;
  result.method = method.def().name;
  const size_t num_outputs = method.plan().outputs.size();
  if (test.expected_outputs.size() != num_outputs) {
    result.status = absl::InvalidArgumentError(
        absl::StrCat("the test case expects ", test.expected_outputs.size(),
                     " outputs, but method \"", result.method, "\" returns ", num_outputs));
    return result;
  }
  TestInputBuffers buffers;
  result.status = BindTestInputs(runtime, method, test, buffers);
  if (result.status.ok()) result.status = method.Execute();
  if (!result.status.ok()) return result;
  Comparison cmp(tolerance, result);
  for (size_t o = 0; o < num_outputs && result.status.ok(); ++o) {
    result.status = CompareOutput(runtime, method, o, test.expected_outputs[o], cmp);
  }
  result.passed = result.status.ok() && result.mismatched_elements == 0;
  return result;
}

absl::StatusOr<std::vector<CaseResult>> VerifyTestSuites(const Runtime& runtime,
                                                         const Program& program,
                                                         const VerifyOptions& options) {
  const absl::Span<const TestSuite> suites = program.test_suites();
  if (suites.empty()) {
    return absl::FailedPreconditionError(
        "the program carries no test cases (only a bundled program, .bpte, does)");
  }
  std::vector<const TestSuite*> chosen;
  for (const TestSuite& s : suites) {
    if (options.method.empty() || s.method_name == options.method) chosen.push_back(&s);
  }
  if (chosen.empty()) {
    std::vector<std::string> names;
    for (const TestSuite& s : suites) names.push_back(absl::StrCat("\"", s.method_name, "\""));
    return absl::NotFoundError(absl::StrCat("the bundle has no test cases for method \"",
                                            options.method, "\"; it has them for ",
                                            absl::StrJoin(names, ", ")));
  }
  std::unique_ptr<LoadedProgram> loaded = runtime.LoadProgram(program);
  std::vector<CaseResult> results;
  for (const TestSuite* suite : chosen) {
    absl::StatusOr<std::unique_ptr<Method>> method =
        loaded->LoadMethod(suite->method_name, options.load);
    for (size_t c = 0; c < suite->cases.size(); ++c) {
      CaseResult r;
      if (method.ok()) {
        r = RunTestCase(runtime, **method, suite->cases[c], options.tolerance);
      } else {
        r.method = suite->method_name;
        r.status = method.status();
      }
      r.case_index = c;
      results.push_back(std::move(r));
    }
  }
  return results;
}

std::string FormatCaseResult(const CaseResult& r) {
  std::string s = absl::StrCat(r.method, " case ", r.case_index, ": ");
  if (!r.status.ok()) return absl::StrCat(s, "ERROR: ", r.status.message());
  absl::StrAppendFormat(&s, "%s (max abs error %.3g, max rel error %.3g",
                        r.passed ? "PASS" : "FAIL", r.max_abs_error, r.max_rel_error);
  if (r.first_mismatch.has_value()) {
    const Mismatch& m = *r.first_mismatch;
    absl::StrAppend(&s, "; ", r.mismatched_elements,
                    r.mismatched_elements == 1 ? " element differs" : " elements differ",
                    "; first: output ", m.output);
    if (!m.detail.empty()) {
      absl::StrAppend(&s, " is ", m.detail);
    } else {
      if (m.element >= 0) absl::StrAppend(&s, " ", Shape(m.index));
      absl::StrAppendFormat(&s, ": %.9g, expected %.9g", m.actual, m.expected);
    }
  }
  absl::StrAppend(&s, ")");
  return s;
}

}  // namespace ferry
