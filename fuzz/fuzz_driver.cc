#include "ferry/fuzz/fuzz_driver.h"

#include <memory>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ferry/loader/ferry/internal/table_verifier.h"
#include "ferry/loader/model/checks.h"
#include "ferry/runtime/method.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/ferry/schema/program_generated.h"

namespace ferry::fuzz {
namespace {

// Binds zero-filled host memory to every input, or says why the method cannot be executed.
// `storage` keeps the memory alive across Execute.
absl::Status BindInputs(Method& method, std::vector<std::vector<uint8_t>>& storage,
                        std::string& skip_reason) {
  const std::vector<IoInfo>& inputs = method.plan().inputs;
  size_t total = 0;
  for (const IoInfo& io : inputs) {
    if (!io.device.is_host()) {
      skip_reason = absl::StrCat("input \"", io.name, "\" is expected on ", io.device_label);
      return absl::OkStatus();
    }
    if (io.bytes > kMaxBoundInputBytes || io.bytes > kMaxTotalInputBytes - total) {
      skip_reason = absl::StrCat("input \"", io.name, "\" is ", io.bytes, " bytes");
      return absl::OkStatus();
    }
    total += io.bytes;
  }
  storage.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_tensor()) {
      // Holds its traced value; passing that value again must be accepted.
      storage.emplace_back();
      absl::Status s = method.SetInput(i, *inputs[i].value);
      if (!s.ok()) return s;
      continue;
    }
    // Exactly the planned size: a kernel that reads past the input is an ASan report.
    std::vector<uint8_t>& bytes = storage.emplace_back(inputs[i].bytes, uint8_t{0});
    absl::Status s = method.SetInput(i, bytes.data(), bytes.size(), inputs[i].device);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

MethodOutcome DriveMethod(const Runtime& runtime, const Program& program, std::string name) {
  MethodOutcome outcome;
  outcome.name = std::move(name);
  absl::StatusOr<std::unique_ptr<Method>> method =
      runtime.LoadMethod(program, outcome.name, FuzzLoadOptions());
  outcome.load = method.status();
  if (!method.ok()) return outcome;
  std::vector<std::vector<uint8_t>> storage;
  outcome.execute = BindInputs(**method, storage, outcome.skip_reason);
  if (!outcome.execute.ok() || !outcome.skip_reason.empty()) return outcome;
  outcome.executed = true;
  outcome.execute = (*method)->Execute();
  // Non-tensor outputs are readable after a successful call.
  for (size_t o = 0; outcome.execute.ok() && o < (*method)->num_outputs(); ++o) {
    if (!(*method)->plan().outputs[o].is_tensor()) {
      outcome.execute = (*method)->OutputValue(o).status();
    }
  }
  return outcome;
}

DriveResult Drive(const Runtime& runtime, size_t size,
                  absl::FunctionRef<absl::StatusOr<std::unique_ptr<Program>>()> parse) {
  DriveResult result;
  if (size > kMaxProgramBytes) {
    result.parse = absl::InvalidArgumentError(
        absl::StrCat("fuzz input of ", size, " bytes is over the limit of ", kMaxProgramBytes));
    return result;
  }
  absl::StatusOr<std::unique_ptr<Program>> program = parse();
  result.parse = program.status();
  if (!program.ok()) {
    // Loading verifies the model itself where FERRY_VERIFY_METHODS is set (the test suite).
    if (absl::IsInternal(program.status())) result.model = program.status();
    return result;
  }
  for (const std::string& name : (*program)->method_names()) {
    // A method the import refused has no model to check; loading it fails with the reason.
    absl::StatusOr<const MethodDef*> method = (*program)->method(name);
    if (!method.ok()) continue;
    result.model = VerifyMethodDef(**method);
    if (!result.model.ok()) return result;
  }
  result.methods = DriveProgram(runtime, **program);
  return result;
}

}  // namespace

RuntimeOptions FuzzRuntimeOptions() {
  RuntimeOptions options;
  options.sim.count = 4;
  options.sim.guard = true;
  options.cuda.enabled = false;
  return options;
}

const Runtime& FuzzRuntime() {
  static const Runtime* runtime = new Runtime(FuzzRuntimeOptions());
  return *runtime;
}

LoadOptions FuzzLoadOptions() {
  LoadOptions options;
  options.memory_limits[Device::Host()] = kMaxDeviceBytes;
  for (int i = 0; i < FuzzRuntimeOptions().sim.count; ++i) {
    options.memory_limits[Device::Sim(i)] = kMaxDeviceBytes;
  }
  options.table_memory_limit_bytes = kMaxTableBytes;
  return options;
}

DriveResult DriveBytes(const Runtime& runtime, absl::Span<const uint8_t> bytes) {
  return Drive(runtime, bytes.size(), [&] { return Program::FromBytes(bytes); });
}

DriveResult DriveJson(const Runtime& runtime, absl::string_view json) {
  return Drive(runtime, json.size(), [&] { return Program::FromJson(json); });
}

std::vector<MethodOutcome> DriveProgram(const Runtime& runtime, const Program& program) {
  std::vector<MethodOutcome> outcomes;
  for (std::string& name : program.method_names()) {
    outcomes.push_back(DriveMethod(runtime, program, std::move(name)));
  }
  return outcomes;
}

bool TableVerifiersAgree(absl::Span<const uint8_t> bytes) {
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) return true;  // neither verifier reads those
  const std::vector<uint8_t> copy(bytes.begin(), bytes.end());   // aligned, as reading copies
  const size_t max_tables = internal::MaxTablesFor(copy.size());
  flatbuffers::Verifier verifier(copy.data(), copy.size(), internal::kSchemaDepth,
                                 static_cast<flatbuffers::uoffset_t>(max_tables));
  return internal::ProgramTablesWellFormed(copy, max_tables) == fbs::VerifyProgramBuffer(verifier);
}

std::string Describe(const DriveResult& result) {
  std::string out = absl::StrCat("parse: ", result.parse.ToString(), "\n");
  if (!result.model.ok()) absl::StrAppend(&out, "model: ", result.model.ToString(), "\n");
  for (const MethodOutcome& m : result.methods) {
    absl::StrAppend(&out, "method \"", m.name, "\" load: ", m.load.ToString(), "\n");
    if (!m.load.ok()) continue;
    if (m.executed || !m.execute.ok()) {
      absl::StrAppend(&out, "method \"", m.name, "\" execute: ", m.execute.ToString(), "\n");
    } else {
      absl::StrAppend(&out, "method \"", m.name, "\" not executed: ", m.skip_reason, "\n");
    }
  }
  return out;
}

}  // namespace ferry::fuzz
