// The Ferry runtime: devices, op kernels and delegate backends, and method loading.
//
//   ferry::Runtime rt;                                  // host + sim devices (+ CUDA when present)
//   FERRY_ASSIGN_OR_RETURN(auto program, ferry::Program::Load("model.ferry"));
//   ferry::LoadOptions options;
//   options.skip_h2d_for_method_inputs = true;
//   FERRY_ASSIGN_OR_RETURN(auto method, rt.LoadMethod(*program, "forward", options));
//
// LoadMethod decides everything: op and backend lookup, shape checks, placement (loader/plan/
// placement.h), arena planning, allocation, constants materialized on their devices, backend
// initialization. Either a fully loaded Method is returned or nothing is: every resource acquired
// on the way is released on error.
//
// The default device map sends cuda:N to sim:N when no CUDA device is present, so every program
// runs on any machine. A declared device neither present nor mapped is a load error.
//
// Memory: before allocating anything, loading checks every device's planned arena and constant
// replicas against the device's available memory and LoadOptions::memory_limits, and the host
// and sim devices together against the host's memory; a program whose declared sizes do not fit
// is refused with ResourceExhausted (see LoadOptions::memory_limits). `ferry plan` prints the
// totals per device.
//
// Thread safety: configure (ops(), RegisterBackend) before loading. After that:
// - LoadMethod may be called from any number of threads at once; the calls are serialized.
// - Methods may execute on different threads at once when they use different devices (the host
//   aside: every method may use the host). A method is used by one thread at a time.
// - LoadMethod may run while methods execute on other threads, provided the method being loaded
//   uses none of the non-host devices they use (devices serve one thread at a time: loading
//   copies constants to its devices). Destroying a method follows the same rule.
// Runtimes are independent.
#ifndef FERRY_RUNTIME_RUNTIME_H_
#define FERRY_RUNTIME_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device.h"
#include "ferry/memory/device_registry.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/method.h"

namespace ferry {

namespace internal {
struct ProgramResidency;
}  // namespace internal

class LoadedProgram;

struct RuntimeOptions {
  // Each device type's options, from its folder: the sim devices (count, guard, capacity;
  // memory/devices/sim/sim_options.h) and the CUDA devices (whether to add them, copy threads;
  // memory/devices/cuda/cuda_options.h).
  SimTypeOptions sim;
  CudaTypeOptions cuda;
  // The most threads one host matmul or linear uses when Ferry is built with OpenBLAS. OpenBLAS
  // has one setting per process: each Runtime sets it when made.
  int host_blas_threads = 1;

  // Deprecated, removed in the next release: the fields above under their old names. A deprecated
  // field set to other than its default takes precedence over its new field.
  [[deprecated("use sim.guard")]] bool sim_guard = true;
  [[deprecated("use sim.count")]] int num_sim_devices = 4;
  [[deprecated("use sim.bytes")]] size_t sim_device_bytes = 0;
  [[deprecated("use cuda.enabled")]] bool use_cuda = true;
  [[deprecated("use cuda.copy_threads")]] int cuda_copy_threads = 0;

  // Declared so that the deprecated fields' own initialization and copies do not warn; the
  // struct is used as a plain value.
  RuntimeOptions();
  RuntimeOptions(const RuntimeOptions& other);
  RuntimeOptions& operator=(const RuntimeOptions& other);
  ~RuntimeOptions();

  // The device types' options with any deprecated field that was set applied.
  DeviceRegistryOptions DeviceOptions() const;
};

struct LoadOptions {
  bool skip_h2d_for_method_inputs = false;
  bool skip_d2h_for_method_outputs = false;
  bool error_on_per_call_copies = false;
  // Declared device -> device used; nullopt: the runtime's default map.
  std::optional<absl::flat_hash_map<Device, Device>> device_map;
  // The most bytes the method may take on a device (a device as used, after the device map):
  // its arena and its constant replicas together. Loading also checks every device against
  // what it has available (DeviceRuntime::available_bytes) and the host and sim devices
  // together against the host's memory. A method over either is refused with ResourceExhausted
  // naming the device and the largest values there, before anything is allocated.
  absl::flat_hash_map<Device, size_t> memory_limits;
  // The most host memory the load's own tables (layouts, placement, the plan, the steps; about
  // 1 KiB per node, 24 bytes per argument or result, 5 per byte of delegate payload) may take.
  // Loading also checks them, from 1 MiB, against what the host has available, and refuses a method
  // over either with ResourceExhausted before building any of them. SIZE_MAX: no limit of the
  // caller's.
  size_t table_memory_limit_bytes = SIZE_MAX;
  // Record a timeline: the load's phases and copies (MethodPlan::load_events) and, per Execute,
  // the time of every step (Method::last_trace); runtime/trace.h turns them into a Chrome
  // trace and a per-node profile. Off: nothing is recorded and Execute costs what it did.
  bool record_trace = false;
};

class Runtime {
 public:
  Runtime();
  explicit Runtime(const RuntimeOptions& options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The op registry methods are loaded with; register application ops here.
  OpRegistry& ops() { return ops_; }
  const OpRegistry& ops() const { return ops_; }

  // Every Runtime has the built-in backends "graph" (MakeGraphBackend) and "XnnpackBackend"
  // (MakeXnnpackBackend). The first backend registered under a built-in's name replaces it (an
  // application may bring its own XNNPACK); AlreadyExists when a backend of that name was
  // registered before.
  absl::Status RegisterBackend(std::unique_ptr<Backend> backend);
  const Backend* FindBackend(absl::string_view name) const;
  // Whether the backend registered under `name` is one of Ferry's built-ins (not replaced).
  bool IsBuiltInBackend(absl::string_view name) const { return built_in_backends_.contains(name); }

  // For planning without every backend: `ferry plan`, inspecting a program's placement, copies
  // and memory (Method::plan()) on a machine that lacks a delegate's backend. Registers a
  // plan-only stand-in (MakePlanOnlyBackend) under every backend name a delegate node of
  // `program` uses and this runtime lacks, and returns those names, each once, in the order the
  // program first uses them; a registered backend is never replaced. LoadMethod then loads such
  // a method (without the stand-ins it fails with NotFound naming the backend), planned from what
  // the program declares; Execute fails with FailedPrecondition naming the method, the node and
  // the backend at the first planned-only delegate. The stand-ins stay registered: a runtime that
  // is to run the program registers its real backends first, or uses another Runtime. Cannot
  // fail. Configuration, like RegisterBackend: call it before loading.
  //
  //   ferry::Runtime rt;
  //   for (const std::string& name : rt.RegisterPlanOnlyBackends(*program)) { ... }  // report
  //   FERRY_ASSIGN_OR_RETURN(auto method, rt.LoadMethod(*program, "forward"));
  //   std::cout << ferry::FormatPlanText(*method);
  std::vector<std::string> RegisterPlanOnlyBackends(const Program& program);

  DeviceRegistry& devices() { return *devices_; }
  const DeviceRegistry& devices() const { return *devices_; }
  const absl::flat_hash_map<Device, Device>& default_device_map() const { return default_map_; }

  absl::StatusOr<std::unique_ptr<Method>> LoadMethod(const Program& program,
                                                     absl::string_view method_name,
                                                     const LoadOptions& options = {}) const;
  // The same for a method already in hand (its spans must outlive the Method).
  absl::StatusOr<std::unique_ptr<Method>> LoadMethod(const MethodDef& method,
                                                     const LoadOptions& options = {}) const;

  // A program whose methods share what they can on each device: a constant read by several
  // methods on one device, in one layout, is copied there once (see LoadedProgram). `program`
  // must outlive it and its methods.
  std::unique_ptr<LoadedProgram> LoadProgram(const Program& program) const;

 private:
  OpRegistry ops_;
  friend class LoadedProgram;
  absl::StatusOr<std::unique_ptr<Method>> LoadMethodSharing(const MethodDef& method,
                                                            const LoadOptions& options,
                                                            internal::ProgramResidency* program) const;
  mutable std::mutex load_mu_;  // serializes LoadMethod
  std::unique_ptr<DeviceRegistry> devices_;
  absl::flat_hash_map<std::string, std::unique_ptr<Backend>> backends_;
  absl::flat_hash_set<std::string> built_in_backends_;  // not replaced yet
  absl::flat_hash_map<Device, Device> default_map_;
};

// The methods of one program, loaded so that they share device residency: each constant's
// replica on a device (per layout) is made by the first method that needs it and shared by every
// later one, and freed with the last method that holds it. Host readers keep reading the
// program's own data. States marked shared (ValueDef::shared) with the same name are one buffer
// for all the methods that have them: placed by the first method loaded (P11: where its writers
// are), its initial data copied in once; a later method that would place it on another device,
// or declares it otherwise, is refused at load, naming both methods. Methods that share a state
// must not run at the same time.
//
//   std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Method> prefill, loaded->LoadMethod("prefill"));
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Method> decode, loaded->LoadMethod("decode"));
//   // decode's plan().arenas[i].shared_constant_bytes: what it shares with prefill.
//
// Methods may outlive the LoadedProgram (they hold their replicas). Thread safety: as
// Runtime::LoadMethod.
class LoadedProgram {
 public:
  LoadedProgram(const LoadedProgram&) = delete;
  LoadedProgram& operator=(const LoadedProgram&) = delete;
  ~LoadedProgram();

  const Program& program() const { return program_; }
  // NotFound naming the method and listing the ones present; otherwise as Runtime::LoadMethod.
  absl::StatusOr<std::unique_ptr<Method>> LoadMethod(absl::string_view method_name,
                                                     const LoadOptions& options = {}) const;
  // Bytes of the constant replicas the program's live methods hold, per device (each replica
  // counted once however many methods share it).
  std::vector<std::pair<Device, size_t>> replica_bytes() const;
  // Bytes of the shared states the program's live methods hold, per device.
  std::vector<std::pair<Device, size_t>> shared_state_bytes() const;

 private:
  friend class Runtime;
  LoadedProgram(const Runtime& runtime, const Program& program);
  const Runtime& runtime_;
  const Program& program_;
  std::shared_ptr<internal::ProgramResidency> residency_;
};

// The elements of `tensor` (dense, on the host or on a device of `runtime`) read back to the host
// as doubles, for tools and tests. Synchronizes the tensor's device. ResourceExhausted when the
// doubles do not fit in the host's memory (8 bytes per element): read large tensors with
// ForEachValueChunk instead.
absl::StatusOr<std::vector<double>> ReadValues(const Runtime& runtime, const TensorView& tensor);

// Calls `fn` on consecutive runs of `tensor`'s elements as doubles, in order, at most
// kValueChunkElements at a time (device memory is copied a chunk at a time): what it holds
// beyond the tensor is bounded, whatever the tensor's size. Stops at, and returns, the first
// error of `fn` or of a copy.
inline constexpr size_t kValueChunkElements = size_t{1} << 14;
absl::Status ForEachValueChunk(const Runtime& runtime, const TensorView& tensor,
                               absl::FunctionRef<absl::Status(absl::Span<const double>)> fn);

}  // namespace ferry

#endif  // FERRY_RUNTIME_RUNTIME_H_
