#include "ferry/runtime/runtime.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_blas.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/memory/device_type.h"
#include "ferry/runtime/internal/method_impl.h"
#include "ferry/runtime/internal/replica_cache.h"

namespace ferry {

Runtime::Runtime() : Runtime(RuntimeOptions{}) {}

// The deprecated fields of RuntimeOptions are read here only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
RuntimeOptions::RuntimeOptions() = default;
RuntimeOptions::RuntimeOptions(const RuntimeOptions& other) = default;
RuntimeOptions& RuntimeOptions::operator=(const RuntimeOptions& other) = default;
RuntimeOptions::~RuntimeOptions() = default;

DeviceRegistryOptions RuntimeOptions::DeviceOptions() const {
  const RuntimeOptions defaults;
  DeviceRegistryOptions out;
  out.sim = sim;
  out.cuda = cuda;
  if (sim_guard != defaults.sim_guard) out.sim.guard = sim_guard;
  if (num_sim_devices != defaults.num_sim_devices) out.sim.count = num_sim_devices;
  if (sim_device_bytes != defaults.sim_device_bytes) out.sim.bytes = sim_device_bytes;
  if (use_cuda != defaults.use_cuda) out.cuda.enabled = use_cuda;
  if (cuda_copy_threads != defaults.cuda_copy_threads) out.cuda.copy_threads = cuda_copy_threads;
  return out;
}
#pragma GCC diagnostic pop

Runtime::Runtime(const RuntimeOptions& options) : ops_(OpRegistry::WithBuiltIns()) {
  internal::SetHostBlasThreads(options.host_blas_threads);
  devices_ = DeviceRegistry::CreateDefault(options.DeviceOptions());
  backends_.emplace(kGraphBackendName, MakeGraphBackend());
  // Declared devices that are absent run where their type's plug-in says (cuda:N on sim:N
  // without a GPU).
  for (const DeviceTypeInfo* type : DeviceTypes()) {
    if (!type->stand_ins) continue;
    for (const auto& [declared, present] : type->stand_ins(*devices_)) {
      if (devices_->Find(declared) == nullptr) default_map_[declared] = present;
    }
  }
}

Runtime::~Runtime() = default;

absl::Status Runtime::RegisterBackend(std::unique_ptr<Backend> backend) {
  if (backend == nullptr) return absl::InvalidArgumentError("RegisterBackend: null backend");
  std::string name(backend->name());
  if (backends_.contains(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("a backend named \"", name, "\" is already registered"));
  }
  backends_.emplace(std::move(name), std::move(backend));
  return absl::OkStatus();
}

const Backend* Runtime::FindBackend(absl::string_view name) const {
  auto it = backends_.find(name);
  return it == backends_.end() ? nullptr : it->second.get();
}

absl::StatusOr<std::unique_ptr<Method>> Runtime::LoadMethod(const Program& program,
                                                            absl::string_view method_name,
                                                            const LoadOptions& options) const {
  FERRY_ASSIGN_OR_RETURN(const MethodDef* method, program.method(method_name));
  return LoadMethod(*method, options);
}

absl::StatusOr<std::unique_ptr<Method>> Runtime::LoadMethod(const MethodDef& method,
                                                            const LoadOptions& options) const {
  return LoadMethodSharing(method, options, nullptr);
}

absl::StatusOr<std::unique_ptr<Method>> Runtime::LoadMethodSharing(
    const MethodDef& method, const LoadOptions& options,
    internal::ProgramResidency* program) const {
  std::lock_guard<std::mutex> lock(load_mu_);
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<internal::MethodImpl> impl,
                         internal::MethodImpl::Load(*this, method, options, program));
  return std::unique_ptr<Method>(new Method(std::move(impl)));
}

std::unique_ptr<LoadedProgram> Runtime::LoadProgram(const Program& program) const {
  return std::unique_ptr<LoadedProgram>(new LoadedProgram(*this, program));
}

LoadedProgram::LoadedProgram(const Runtime& runtime, const Program& program)
    : runtime_(runtime),
      program_(program),
      residency_(std::make_shared<internal::ProgramResidency>()) {}

LoadedProgram::~LoadedProgram() = default;

absl::StatusOr<std::unique_ptr<Method>> LoadedProgram::LoadMethod(
    absl::string_view method_name, const LoadOptions& options) const {
  FERRY_ASSIGN_OR_RETURN(const MethodDef* method, program_.method(method_name));
  return runtime_.LoadMethodSharing(*method, options, residency_.get());
}

std::vector<std::pair<Device, size_t>> LoadedProgram::replica_bytes() const {
  return residency_->replicas.LiveBytes();
}

std::vector<std::pair<Device, size_t>> LoadedProgram::shared_state_bytes() const {
  return residency_->states.LiveBytes();
}

absl::StatusOr<std::vector<double>> ReadValues(const Runtime& runtime, const TensorView& tensor) {
  std::vector<uint8_t> bytes(tensor.nbytes());
  if (tensor.device().is_host()) {
    if (!bytes.empty()) std::memcpy(bytes.data(), tensor.data(), bytes.size());
  } else {
    DeviceRuntime* device = runtime.devices().Find(tensor.device());
    if (device == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("ReadValues: device ", tensor.device().ToString(), " is not present"));
    }
    FERRY_RETURN_IF_ERROR(device->CopyDeviceToHost(bytes.data(), tensor.data(), bytes.size()));
    FERRY_RETURN_IF_ERROR(device->Synchronize());
  }
  std::vector<double> values(tensor.numel());
  for (size_t j = 0; j < values.size(); ++j) {
    switch (tensor.dtype()) {
      case DType::kFloat32: {
        float f;
        std::memcpy(&f, bytes.data() + j * 4, 4);
        values[j] = f;
        break;
      }
      case DType::kInt64: {
        int64_t n;
        std::memcpy(&n, bytes.data() + j * 8, 8);
        values[j] = static_cast<double>(n);
        break;
      }
      case DType::kInt32: {
        int32_t n;
        std::memcpy(&n, bytes.data() + j * 4, 4);
        values[j] = n;
        break;
      }
      case DType::kBool:
        values[j] = bytes[j] != 0 ? 1.0 : 0.0;
        break;
    }
  }
  return values;
}

}  // namespace ferry
