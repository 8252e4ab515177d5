// Delegate backends: the code that runs a delegate call on its device.
//
// A Backend is registered in the Runtime under a name; a delegate node names its backend. At method
// load the backend's Init is called once per delegate node with the node's payload, compile specs,
// the device the call was placed on and the layouts of its arguments and results there; it returns
// a DelegateInstance. Execute then runs once per call with device-resident arguments and results.
// Destroying the instance releases what Init acquired (the "destroy" of the design).
//
// Contract checked at load: an instance reports, through signature(), the dtype and sizes its
// payload reads for each tensor argument and produces for each result. LoadMethod compares them
// with the arguments and results the program declares for the node and refuses a mismatch,
// naming the node, the argument or result and both shapes, so a payload that writes more (or
// less) than its declared results can never run.
//
//   class MyBackend : public Backend {
//     absl::string_view name() const override { return "mine"; }
//     bool SupportsDevice(DeviceType t) const override { return t == my_device_type; }
//     absl::StatusOr<std::unique_ptr<DelegateInstance>> Init(const DelegateInit& init) const override;
//   };
//
// Contract for Execute: it runs inside the device's scope (sim memory is accessible), reads only
// `args`, writes every element of `results`, may write in place only the arguments the node declares
// written, uses `scratch` (scratch_bytes() of device memory planned in the method's arena) for
// everything else, and allocates nothing. Work may be left queued on the device's stream: the
// executor synchronizes before the host reads any result. Errors are returned as Status (Internal
// for a device failure, InvalidArgument for run-time-only problems such as an index out of range).
//
// Thread safety: Init is called at load by one thread; an instance is executed by one thread at a
// time.
#ifndef FERRY_RUNTIME_BACKEND_H_
#define FERRY_RUNTIME_BACKEND_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/model/named_data.h"
#include "ferry/memory/device.h"
#include "ferry/memory/device_runtime.h"

namespace ferry {

// A tensor as a delegate's payload reads or produces it.
struct TensorSpec {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
};

// What a delegate instance reads and produces: one entry per tensor argument of the call, in
// order (scalar arguments have none), and one per result.
struct DelegateSignature {
  std::vector<TensorSpec> tensor_args;
  std::vector<TensorSpec> results;
};

class DelegateInstance {
 public:
  virtual ~DelegateInstance() = default;
  // The dtypes and sizes the payload reads and produces; see the contract above.
  virtual DelegateSignature signature() const = 0;
  // Device memory Execute needs besides its arguments and results.
  virtual size_t scratch_bytes() const { return 0; }
  virtual absl::Status Execute(absl::Span<TensorRef* const> args,
                               absl::Span<TensorRef* const> results, void* scratch) = 0;
};

struct DelegateInit {
  absl::string_view node_name;
  absl::Span<const uint8_t> payload;
  const std::vector<std::pair<std::string, std::string>>* compile_specs = nullptr;
  Device device;                  // where the call runs (after the device map)
  DeviceRuntime* device_runtime;  // that device's runtime
  // Layouts (data == nullptr) of the arguments and results on `device`. Scalar arguments are not
  // passed to delegates: their entries have rank -1 and `scalar_args` holds their values.
  std::vector<TensorRef> args;
  std::vector<const Scalar*> scalar_args;
  std::vector<TensorRef> results;
  std::vector<int32_t> written_args;
  const OpRegistry* ops = nullptr;  // the runtime's op registry
  // The program's named data (loader/model/named_data.h), which a payload may refer to by key;
  // nullptr when the program has none.
  const NamedData* named_data = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual absl::string_view name() const = 0;
  virtual bool SupportsDevice(DeviceType type) const = 0;
  virtual absl::StatusOr<std::unique_ptr<DelegateInstance>> Init(
      const DelegateInit& init) const = 0;
};

// The built-in graph backend ("graph"): its payload is a serialized Ferry program whose method
// "main" takes the delegate's arguments and returns its results; it runs that sub-graph with the
// registered host kernels on the host and on sim devices (inside the device scope), and with the
// CUDA kernels of kernels/cuda/ on CUDA devices when Ferry is built with CUDA. Calls whose
// payloads have the same bytes share one parsed sub-program and, per device, one copy of its
// constants. A sub-graph op that writes in place may write only scratch values and the inputs
// whose arguments the call declares written (DelegateInit::written_args); a write to a constant
// or to an undeclared input is refused at init with InvalidArgument naming the sub-graph node.
std::unique_ptr<Backend> MakeGraphBackend();

// The built-in XNNPACK backend ("XnnpackBackend", registered in every Runtime): runs the
// payloads ExecuTorch's XNNPACK delegate writes, on the host. At init the payload is read and
// checked (loader/executorch/xnnpack_reader.h) and its graph translated into a Ferry sub-program
// of host ops, which runs as the graph backend runs its own (same kernels, no decoding or
// allocation per call). XNNPACK's NHWC convolutions and pooling become Ferry's NCHW ops between
// permutes, which are views: the permutes the exporter puts around them cancel. Statically
// quantized graphs (qint8/quint8 values, per-channel qcint8 weights) run on dequantized floats,
// rounded to each quantized value's grid where a node writes it. A node type, datatype or flag
// the translation does not support is refused at init (Unimplemented) naming the node's index
// and type; docs/executorch_delegates.md lists what runs. Registering another backend under the
// same name replaces it (Runtime::RegisterBackend).
std::unique_ptr<Backend> MakeXnnpackBackend();

// A stand-in named `name` for a backend nobody registered, so that a method can be planned
// without it: it supports every device type, and its Init reads nothing of the payload and
// reports, as the instance's signature, exactly the tensors the program declares for the call.
// Executing the instance fails with FailedPrecondition naming the backend (the executor adds the
// method and the node). Runtime::RegisterPlanOnlyBackends registers one for every backend a
// program lacks.
std::unique_ptr<Backend> MakePlanOnlyBackend(absl::string_view name);

}  // namespace ferry

#endif  // FERRY_RUNTIME_BACKEND_H_
