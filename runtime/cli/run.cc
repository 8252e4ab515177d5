// `ferry run`: a method's inputs filled (given values or a fixed pattern), its calls, and its
// outputs as text or JSON.
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/base/float16.h"
#include "ferry/base/status_macros.h"
#include "ferry/runtime/cli/internal.h"

namespace ferry::cli {
namespace {

// That `v` is a whole number in [lo, hi] (hi excluded when `hi_excluded`: int64's maximum is not
// a double; every double in range converts exactly when it is whole). `range` names the integer
// type, `kind` the input's dtype or kind.
absl::Status CheckWhole(const IoInfo& io, double v, double lo, double hi, bool hi_excluded,
                        absl::string_view range, absl::string_view kind) {
  const bool in_range = v >= lo && (hi_excluded ? v < hi : v <= hi);
  if (in_range && v == std::trunc(v)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--input %s: %g is not a whole number in the range of %s, and input \"%s\" is %s", io.name, v,
      range, io.name, kind));
}

// That `v` is 0 or 1.
absl::Status CheckBool(const IoInfo& io, double v, absl::string_view kind) {
  if (v == 0.0 || v == 1.0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--input %s: %g is not 0 or 1, and input \"%s\" is %s", io.name, v, io.name, kind));
}

// Stores `v` as one element of input `io`, refusing what the dtype cannot hold: a float beyond
// its finite range, an integer that is not a whole number in range (NaN included), a bool other
// than 0 or 1.
absl::Status StoreElement(const IoInfo& io, double v, uint8_t* out) {
  auto store = [&](auto x) {
    std::memcpy(out, &x, sizeof(x));
    return absl::OkStatus();
  };
  auto finite_within = [&](double max, const char* name) -> absl::Status {
    if (std::isfinite(v) && std::fabs(v) > max) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--input %s: %g is out of the range of %s", io.name, v, name));
    }
    return absl::OkStatus();
  };
  auto whole_within = [&](double lo, double hi) {
    return CheckWhole(io, v, lo, hi, io.dtype == DType::kInt64, DTypeName(io.dtype),
                      DTypeName(io.dtype));
  };
  switch (io.dtype) {
    case DType::kFloat32:
      FERRY_RETURN_IF_ERROR(finite_within(FLT_MAX, "float32"));
      return store(static_cast<float>(v));
    case DType::kFloat64:
      return store(v);
    case DType::kFloat16:
      FERRY_RETURN_IF_ERROR(finite_within(65504.0, "float16"));
      return store(FloatToFloat16(static_cast<float>(v)));
    case DType::kBFloat16:
      FERRY_RETURN_IF_ERROR(finite_within(3.3895313892515355e38, "bfloat16"));
      return store(FloatToBFloat16(static_cast<float>(v)));
    case DType::kInt64:
      FERRY_RETURN_IF_ERROR(whole_within(-9223372036854775808.0, 9223372036854775808.0));
      return store(static_cast<int64_t>(v));
    case DType::kInt32:
      FERRY_RETURN_IF_ERROR(whole_within(-2147483648.0, 2147483647.0));
      return store(static_cast<int32_t>(v));
    case DType::kInt16:
      FERRY_RETURN_IF_ERROR(whole_within(-32768.0, 32767.0));
      return store(static_cast<int16_t>(v));
    case DType::kUInt16:
      FERRY_RETURN_IF_ERROR(whole_within(0.0, 65535.0));
      return store(static_cast<uint16_t>(v));
    case DType::kInt8:
      FERRY_RETURN_IF_ERROR(whole_within(-128.0, 127.0));
      return store(static_cast<int8_t>(v));
    case DType::kUInt8:
      FERRY_RETURN_IF_ERROR(whole_within(0.0, 255.0));
      return store(static_cast<uint8_t>(v));
    case DType::kBool:
      FERRY_RETURN_IF_ERROR(CheckBool(io, v, "bool"));
      return store(static_cast<uint8_t>(v == 1.0 ? 1 : 0));
  }
  return absl::UnimplementedError(absl::StrCat("--input ", io.name, ": inputs of dtype ",
                                               DTypeName(io.dtype),
                                               " cannot be given on the command line"));
}

// What `--input NAME=V,...` gives a non-tensor input, as a value of the input's kind; the
// method then checks it against the traced value.
absl::StatusOr<Scalar> GivenScalar(const IoInfo& io, const std::vector<double>& values) {
  const Scalar::Kind kind = io.value->kind;
  auto whole = [&](double v) -> absl::StatusOr<int64_t> {
    FERRY_RETURN_IF_ERROR(CheckWhole(io, v, -9223372036854775808.0, 9223372036854775808.0,
                                     /*hi_excluded=*/true, "int64", ScalarKindName(kind)));
    return static_cast<int64_t>(v);
  };
  auto boolean = [&](double v) -> absl::StatusOr<bool> {
    FERRY_RETURN_IF_ERROR(CheckBool(io, v, ScalarKindName(kind)));
    return v == 1.0;
  };
  const bool single =
      kind == Scalar::Kind::kInt || kind == Scalar::Kind::kDouble || kind == Scalar::Kind::kBool;
  if (single && values.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--input %s: input \"%s\" is one %s, but %d values are given", io.name,
                        io.name, ScalarKindName(kind), values.size()));
  }
  switch (kind) {
    case Scalar::Kind::kInt: {
      FERRY_ASSIGN_OR_RETURN(int64_t v, whole(values[0]));
      return Scalar::Int(v);
    }
    case Scalar::Kind::kDouble:
      return Scalar::Double(values[0]);
    case Scalar::Kind::kBool: {
      FERRY_ASSIGN_OR_RETURN(bool v, boolean(values[0]));
      return Scalar::Bool(v);
    }
    case Scalar::Kind::kIntList: {
      std::vector<int64_t> list;
      for (double v : values) {
        FERRY_ASSIGN_OR_RETURN(int64_t n, whole(v));
        list.push_back(n);
      }
      return Scalar::IntList(std::move(list));
    }
    case Scalar::Kind::kDoubleList:
      return Scalar::DoubleList(values);
    case Scalar::Kind::kBoolList: {
      std::vector<bool> list;
      for (double v : values) {
        FERRY_ASSIGN_OR_RETURN(bool b, boolean(v));
        list.push_back(b);
      }
      return Scalar::BoolList(list);
    }
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "--input %s: input \"%s\" is %s, which --input does not give (it holds %s, the "
          "value the program was traced with, without one)",
          io.name, io.name, kind == Scalar::Kind::kNone ? "None" : "a string",
          io.value->ToString()));
  }
}

// A non-tensor value as JSON: a number, true/false, null (None and non-finite doubles), a
// string, or an array.
std::string ScalarJson(const Scalar& s) {
  auto bools = [](const std::vector<int64_t>& list) {
    return absl::StrJoin(
        list, ", ", [](std::string* out, int64_t v) { out->append(v != 0 ? "true" : "false"); });
  };
  auto doubles = [](absl::Span<const double> list) {
    return absl::StrJoin(list, ", ",
                         [](std::string* out, double v) { out->append(JsonNumber(v, 17)); });
  };
  switch (s.kind) {
    case Scalar::Kind::kInt:
      return absl::StrCat(s.i);
    case Scalar::Kind::kDouble:
      return JsonNumber(s.d, 17);
    case Scalar::Kind::kBool:
      return s.b ? "true" : "false";
    case Scalar::Kind::kIntList:
      return absl::StrCat("[", absl::StrJoin(s.list, ", "), "]");
    case Scalar::Kind::kNone:
      return "null";
    case Scalar::Kind::kString:
      return JsonString(s.str());
    case Scalar::Kind::kDoubleList:
      return absl::StrCat("[", doubles(s.doubles()), "]");
    case Scalar::Kind::kBoolList:
      return absl::StrCat("[", bools(s.list), "]");
  }
  return "null";
}

// A non-tensor value for the terminal: escaped, with long strings and lists cut short.
std::string ScalarText(const Scalar& s) {
  constexpr size_t kMaxItems = 6;
  constexpr size_t kMaxBytes = 200;
  if (s.kind == Scalar::Kind::kString && s.str().size() > kMaxBytes) {
    return absl::StrCat("\"", absl::CHexEscape(s.str().substr(0, kMaxBytes)), "\"... (",
                        s.str().size(), " bytes)");
  }
  const size_t items = s.kind == Scalar::Kind::kDoubleList ? s.doubles().size() : s.list.size();
  if ((s.kind == Scalar::Kind::kIntList || s.kind == Scalar::Kind::kBoolList ||
       s.kind == Scalar::Kind::kDoubleList) &&
      items > kMaxItems) {
    Scalar head = s;
    if (s.kind == Scalar::Kind::kDoubleList) {
      head = Scalar::DoubleList({s.doubles().begin(), s.doubles().begin() + kMaxItems});
    } else {
      head.list.resize(kMaxItems);
    }
    std::string text = head.ToString();
    text.pop_back();  // the closing bracket
    return absl::StrCat(text, ", ...] (", items, " items)");
  }
  return s.ToString();
}

// `ferry run --json`: the method's outputs with all their values, written as they are read.
int PrintOutputsJson(const Options& options, const Runtime& rt, Method& method,
                     const std::vector<double>& times, std::FILE* out, std::FILE* err) {
  const MethodPlan& plan = method.plan();
  std::string text =
      absl::StrCat("{\"program\": ", JsonString(options.program),
                   ", \"method\": ", JsonString(method.def().name), ", \"calls\": ", times.size(),
                   ",\n \"latency_us\": {\"first\": ", JsonNumber(times.front(), 6),
                   ", \"last\": ", JsonNumber(times.back(), 6), "},\n \"outputs\": [");
  for (size_t i = 0; i < method.num_outputs(); ++i) {
    const IoInfo& io = plan.outputs[i];
    if (!io.is_tensor()) {
      absl::StrAppend(&text, i == 0 ? "\n  " : ",\n  ", "{\"index\": ", i,
                      ", \"name\": ", JsonString(io.name),
                      ", \"kind\": ", JsonString(ScalarKindName(io.value->kind)),
                      ", \"value\": ", ScalarJson(*io.value), "}");
      continue;
    }
    absl::StrAppend(&text, i == 0 ? "\n  " : ",\n  ", "{\"index\": ", i,
                    ", \"name\": ", JsonString(io.name), ", \"kind\": \"tensor\"",
                    ", \"dtype\": ", JsonString(DTypeName(io.dtype)), ", \"sizes\": [",
                    absl::StrJoin(io.sizes, ", "), "], \"device\": ", JsonString(io.device_label),
                    ", \"values\": [");
    std::fputs(text.c_str(), out);
    text.clear();
    // Enough digits to read the value back: 9 for float32 and narrower floats, 17 otherwise.
    const int digits = IsFloatDType(io.dtype) && io.dtype != DType::kFloat64 ? 9 : 17;
    bool first = true;
    absl::Status s = ForEachValueChunk(rt, method.Output(i), [&](absl::Span<const double> values) {
      std::string chunk;
      for (double v : values) {
        absl::StrAppend(&chunk, first ? "" : ", ", JsonNumber(v, digits));
        first = false;
      }
      std::fputs(chunk.c_str(), out);
      return absl::OkStatus();
    });
    if (!s.ok()) return Fail(err, s);
    text = "]}";
  }
  absl::StrAppend(&text, method.num_outputs() == 0 ? "]}\n" : "\n ]}\n");
  std::fputs(text.c_str(), out);
  return 0;
}

}  // namespace

absl::Status FillInputs(const Options& options, const Runtime& rt, Method& method,
                        InputBuffers& buffers) {
  const MethodPlan& plan = method.plan();
  buffers.host.resize(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const IoInfo& io = plan.inputs[i];
    // By name, or by position for inputs without a name of their own (ExecuTorch's).
    auto given = options.inputs.find(io.name);
    if (given == options.inputs.end()) given = options.inputs.find(std::to_string(i));
    if (!io.is_tensor()) {
      // Holds its traced value from load on; a given value is checked against it.
      if (given == options.inputs.end()) continue;
      FERRY_ASSIGN_OR_RETURN(Scalar value, GivenScalar(io, given->second));
      FERRY_RETURN_IF_ERROR(method.SetInput(i, value));
      continue;
    }
    std::vector<uint8_t>& bytes = buffers.host[i];
    bytes.assign(io.bytes, 0);
    const size_t count = io.bytes / DTypeSize(io.dtype);
    // Given values repeat to fill the input: a number of them that does not divide its
    // elements would drop some or fill it unevenly.
    if (given != options.inputs.end() && count > 0 &&
        (given->second.size() > count || count % given->second.size() != 0)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--input %s: %d values given for input \"%s\" (%s[%s], %d elements); give its %d "
          "values, or fewer that repeat to fill it (a number that divides %d)",
          given->first, given->second.size(), io.name, DTypeName(io.dtype),
          absl::StrJoin(io.sizes, ", "), count, count, count));
    }
    for (size_t j = 0; j < count; ++j) {
      double v;
      if (given != options.inputs.end()) {
        v = given->second[j % given->second.size()];
      } else {
        // Deterministic values; integer and bool inputs are zero so that index inputs stay in
        // range.
        v = IsFloatDType(io.dtype) ? 0.5 * std::sin(0.1 * j + i) : 0.0;
      }
      FERRY_RETURN_IF_ERROR(StoreElement(io, v, bytes.data() + j * DTypeSize(io.dtype)));
    }
    void* data = bytes.data();
    if (!io.device.is_host()) {
      DeviceRuntime* device = rt.devices().Find(io.device);
      FERRY_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(*device, io.bytes, 64));
      FERRY_RETURN_IF_ERROR(device->CopyHostToDevice(buffer.data(), bytes.data(), io.bytes));
      FERRY_RETURN_IF_ERROR(device->Synchronize());
      data = buffer.data();
      buffers.device.push_back(std::move(buffer));
    }
    FERRY_RETURN_IF_ERROR(method.SetInput(i, TensorView(io.dtype, io.sizes, data, io.device)));
  }
  for (const auto& [name, values] : options.inputs) {
    bool found = false;
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      found = found || plan.inputs[i].name == name || std::to_string(i) == name;
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat("--input: the method has no input \"", name,
                                                     "\" (name one, or give its position, 0 to ",
                                                     plan.inputs.size() - 1, ")"));
    }
  }
  return absl::OkStatus();
}

void PrintDiagnostics(const Method& method, std::FILE* err) {
  for (const Diagnostic& d : method.plan().placement.diagnostics) {
    std::fprintf(err, "ferry: %s: %s\n",
                 d.severity == Diagnostic::Severity::kError ? "error" : "warning",
                 d.message.c_str());
  }
}

int RunMethod(const Options& options, const Runtime& rt, Method& method,
              const TestCase* test_inputs, std::FILE* out, std::FILE* err) {
  PrintDiagnostics(method, err);
  InputBuffers buffers;
  TestInputBuffers test_buffers;
  if (test_inputs != nullptr) {
    absl::Status s = BindTestInputs(rt, method, *test_inputs, test_buffers);
    if (!s.ok()) {
      return Fail(err,
                  absl::Status(s.code(), absl::StrCat("the bundle's test case 0: ", s.message())));
    }
  } else if (absl::Status s = FillInputs(options, rt, method, buffers); !s.ok()) {
    return Fail(err, s);
  }
  const int calls = std::max(options.calls, 1);
  std::vector<double> times;
  TraceRecorder trace;
  trace.AddLoad(method);
  for (int c = 0; c < calls; ++c) {
    auto start = Clock::now();
    absl::Status s = method.Execute();
    times.push_back(MicrosSince(start));
    trace.AddCall(method);  // a failed call too: up to the step that failed
    if (!s.ok()) {
      if (!options.trace_path.empty()) WriteTrace(options, trace, err).IgnoreError();
      return Fail(err, s);
    }
  }
  if (!options.trace_path.empty()) {
    if (absl::Status s = WriteTrace(options, trace, err); !s.ok()) return Fail(err, s);
  }
  const MethodPlan& plan = method.plan();
  if (options.json) return PrintOutputsJson(options, rt, method, times, out, err);
  absl::FPrintF(out, "method \"%s\": %d call%s, first %.1f us, last %.1f us\n", method.def().name,
                calls, calls == 1 ? "" : "s", times.front(), times.back());
  for (size_t i = 0; i < method.num_outputs(); ++i) {
    if (const IoInfo& io = plan.outputs[i]; !io.is_tensor()) {
      absl::FPrintF(out, "output %d \"%s\" %s: %s\n", i, absl::CHexEscape(io.name),
                    ScalarKindName(io.value->kind), ScalarText(*io.value));
      continue;
    }
    // A summary, read a chunk at a time: sum, minimum, maximum and the first values.
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    std::vector<std::string> head;
    size_t count = 0;
    absl::Status s = ForEachValueChunk(rt, method.Output(i), [&](absl::Span<const double> values) {
      for (double v : values) {
        sum += v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        if (head.size() < 6) head.push_back(absl::StrFormat("%.6g", v));
      }
      count += values.size();
      return absl::OkStatus();
    });
    if (!s.ok()) return Fail(err, s);
    const IoInfo& io = plan.outputs[i];
    absl::FPrintF(out, "output %d \"%s\" %s[%s] on %s: sum %.6g min %.6g max %.6g  [%s%s]\n", i,
                  io.name, DTypeName(io.dtype), absl::StrJoin(io.sizes, ", "), io.device_label, sum,
                  lo, hi, absl::StrJoin(head, ", "), count > 6 ? ", ..." : "");
  }
  return 0;
}

}  // namespace ferry::cli
