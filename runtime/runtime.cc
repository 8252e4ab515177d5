#include "ferry/runtime/runtime.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_blas.h"
#include "ferry/loader/executorch/xnnpack_reader.h"
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
  backends_.emplace(kXnnpackBackendName, MakeXnnpackBackend());
  built_in_backends_ = {kGraphBackendName, kXnnpackBackendName};
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
  // A built-in backend is replaced by the first backend registered under its name.
  if (built_in_backends_.erase(name) > 0) {
    backends_[name] = std::move(backend);
    return absl::OkStatus();
  }
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

absl::Status ForEachValueChunk(const Runtime& runtime, const TensorView& tensor,
                               absl::FunctionRef<absl::Status(absl::Span<const double>)> fn) {
  const DType dtype = tensor.dtype();
  const size_t element = DTypeSize(dtype);
  const size_t total = static_cast<size_t>(tensor.numel());
  DeviceRuntime* device = nullptr;
  if (!tensor.device().is_host()) {
    device = runtime.devices().Find(tensor.device());
    if (device == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("reading values: device ", tensor.device().ToString(), " is not present"));
    }
  }
  std::vector<uint8_t> staging(device != nullptr ? kValueChunkElements * element : 0);
  std::vector<double> values(std::min(total, kValueChunkElements));
  const auto* base = static_cast<const uint8_t*>(tensor.data());
  for (size_t start = 0; start < total; start += kValueChunkElements) {
    const size_t n = std::min(kValueChunkElements, total - start);
    const uint8_t* bytes = base + start * element;
    if (device != nullptr) {
      FERRY_RETURN_IF_ERROR(device->CopyDeviceToHost(staging.data(), bytes, n * element));
      FERRY_RETURN_IF_ERROR(device->Synchronize());
      bytes = staging.data();
    }
    for (size_t k = 0; k < n; ++k) values[k] = ElementAsDouble(dtype, bytes + k * element);
    FERRY_RETURN_IF_ERROR(fn(absl::MakeConstSpan(values.data(), n)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> ReadValues(const Runtime& runtime, const TensorView& tensor) {
  const size_t total = static_cast<size_t>(tensor.numel());
  std::vector<double> values;
  // The one allocation that grows with the tensor: refused, not thrown, when the host has no room.
  try {
    values.reserve(total);
  } catch (const std::exception&) {  // bad_alloc, or length_error past the vector's maximum
    return absl::ResourceExhaustedError(
        absl::StrCat("reading values: ", total, " elements as doubles take ", total,
                     " x 8 bytes, more than "
                     "the host could allocate; read them a chunk at a time (ForEachValueChunk)"));
  }
  FERRY_RETURN_IF_ERROR(ForEachValueChunk(runtime, tensor, [&](absl::Span<const double> chunk) {
    values.insert(values.end(), chunk.begin(), chunk.end());
    return absl::OkStatus();
  }));
  return values;
}

}  // namespace ferry
