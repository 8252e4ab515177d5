#include "bench/peers/ort_peer.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ferry/base/status_macros.h"

namespace ferry::peers {
namespace {

// The oldest release the table's indices were checked against.
constexpr int kMinMajor = 1, kMinMinor = 30;

bool AtLeastMinimum(const std::string& version) {
  std::vector<std::string> parts = absl::StrSplit(version, '.');
  if (parts.size() < 2) return false;
  const int major = std::atoi(parts[0].c_str()), minor = std::atoi(parts[1].c_str());
  return major > kMinMajor || (major == kMinMajor && minor >= kMinMinor);
}

}  // namespace

PeerSession::~PeerSession() { api_->ReleaseSession(session_); }

absl::StatusOr<std::unique_ptr<OrtPeer>> OrtPeer::Open(const std::string& library_path) {
  if (library_path.empty()) return absl::NotFoundError("no ONNX Runtime library given");
  void* handle = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot load ", library_path, ": ", dlerror()));
  }
  auto get_base = reinterpret_cast<OrtGetApiBaseFn>(dlsym(handle, "OrtGetApiBase"));
  const OrtApiBase* base = get_base != nullptr ? get_base() : nullptr;
  if (base == nullptr) {
    dlclose(handle);
    return absl::FailedPreconditionError(
        absl::StrCat(library_path, " has no OrtGetApiBase: not ONNX Runtime"));
  }
  std::string version = base->GetVersionString();
  if (!AtLeastMinimum(version)) {
    dlclose(handle);
    return absl::FailedPreconditionError(
        absl::StrCat("ONNX Runtime ", version, " is older than ", kMinMajor, ".", kMinMinor,
                     ", the release whose function table the harness was checked against"));
  }
  const void* table = base->GetApi(kOrtApiVersion);
  if (table == nullptr) {
    dlclose(handle);
    return absl::FailedPreconditionError(
        absl::StrCat("ONNX Runtime ", version, " does not serve API version ", kOrtApiVersion));
  }
  std::unique_ptr<OrtPeer> peer(
      new OrtPeer(handle, OrtApiTable{static_cast<const void* const*>(table)}, std::move(version)));
  FERRY_RETURN_IF_ERROR(peer->Init());
  return peer;
}

OrtPeer::~OrtPeer() {
  if (cpu_ != nullptr) api_.ReleaseMemoryInfo(cpu_);
  if (options_ != nullptr) api_.ReleaseSessionOptions(options_);
  if (env_ != nullptr) api_.ReleaseEnv(env_);
  // The library stays mapped: ONNX Runtime's static destructors run at exit.
}

absl::Status OrtPeer::Check(OrtStatus* status, const char* what) const {
  if (status == nullptr) return absl::OkStatus();
  absl::Status s = absl::InternalError(absl::StrCat(what, ": ", api_.GetErrorMessage(status)));
  api_.ReleaseStatus(status);
  return s;
}

absl::Status OrtPeer::Init() {
  // Entries 0, 1, 2 and 93: a status made here must come back with its code and message.
  constexpr char kProbe[] = "ferry probe";
  OrtStatus* probe = api_.CreateStatus(kOrtErrorInvalidArgument, kProbe);
  const bool status_ok = probe != nullptr && api_.GetErrorCode(probe) == kOrtErrorInvalidArgument &&
                         std::strcmp(api_.GetErrorMessage(probe), kProbe) == 0;
  if (probe != nullptr) api_.ReleaseStatus(probe);
  if (!status_ok) {
    return absl::FailedPreconditionError(
        "ONNX Runtime's CreateStatus/GetErrorCode/GetErrorMessage do not round-trip: the "
        "function table's indices are wrong for this release");
  }
  // Entries 125 and 126, past the middle of the table: the CPU provider must be listed.
  char** providers = nullptr;
  int count = 0;
  FERRY_RETURN_IF_ERROR(
      Check(api_.GetAvailableProviders(&providers, &count), "GetAvailableProviders"));
  bool has_cpu = false;
  for (int i = 0; i < count; ++i) has_cpu |= std::strcmp(providers[i], "CPUExecutionProvider") == 0;
  FERRY_RETURN_IF_ERROR(
      Check(api_.ReleaseAvailableProviders(providers, count), "ReleaseAvailableProviders"));
  if (!has_cpu) {
    return absl::FailedPreconditionError(
        "GetAvailableProviders does not list CPUExecutionProvider: the function table's indices "
        "are wrong for this release");
  }

  FERRY_RETURN_IF_ERROR(
      Check(api_.CreateEnv(kOrtLoggingLevelWarning, "ferry_peers", &env_), "CreateEnv"));
  FERRY_RETURN_IF_ERROR(Check(api_.CreateSessionOptions(&options_), "CreateSessionOptions"));
  FERRY_RETURN_IF_ERROR(Check(api_.SetIntraOpNumThreads(options_, 1), "SetIntraOpNumThreads"));
  FERRY_RETURN_IF_ERROR(Check(api_.SetInterOpNumThreads(options_, 1), "SetInterOpNumThreads"));
  FERRY_RETURN_IF_ERROR(
      Check(api_.SetSessionExecutionMode(options_, kOrtSequential), "SetSessionExecutionMode"));
  FERRY_RETURN_IF_ERROR(Check(api_.SetSessionGraphOptimizationLevel(options_, kOrtEnableAll),
                              "SetSessionGraphOptimizationLevel"));
  return Check(api_.CreateCpuMemoryInfo(kOrtDeviceAllocator, kOrtMemTypeDefault, &cpu_),
               "CreateCpuMemoryInfo");
}

absl::StatusOr<std::unique_ptr<PeerSession>> OrtPeer::CreateSession(
    absl::Span<const uint8_t> model) const {
  OrtSession* session = nullptr;
  FERRY_RETURN_IF_ERROR(
      Check(api_.CreateSessionFromArray(env_, model.data(), model.size(), options_, &session),
            "CreateSessionFromArray"));
  return std::unique_ptr<PeerSession>(new PeerSession(&api_, session));
}

absl::StatusOr<PeerValue> OrtPeer::WrapFloats(float* data, absl::Span<const int64_t> dims) const {
  size_t elements = 1;
  for (int64_t d : dims) elements *= static_cast<size_t>(d);
  OrtValue* value = nullptr;
  FERRY_RETURN_IF_ERROR(
      Check(api_.CreateTensorWithDataAsOrtValue(cpu_, data, elements * sizeof(float), dims.data(),
                                                dims.size(), kOnnxFloat, &value),
            "CreateTensorWithDataAsOrtValue"));
  // Entry 51: the value must hold the caller's memory, not a copy.
  void* held = nullptr;
  FERRY_RETURN_IF_ERROR(Check(api_.GetTensorMutableData(value, &held), "GetTensorMutableData"));
  if (held != data) {
    api_.ReleaseValue(value);
    return absl::FailedPreconditionError(
        "GetTensorMutableData does not return the wrapped memory: the function table's indices "
        "are wrong for this release");
  }
  return PeerValue(value, ValueReleaser{&api_});
}

}  // namespace ferry::peers
