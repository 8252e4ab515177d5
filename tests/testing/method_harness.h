// Loading, running and inspecting methods in tests.
//
//   ProgramBuilder pb;
//   MethodBuilder& m = pb.AddMethod("forward");
//   ...
//   MethodHarness h(pb);                       // builds, serializes and verifies the program
//   ASSERT_OK_AND_ASSIGN(auto method, h.Load(options));
//   EXPECT_THAT(PerCallCopies(*method), ElementsAre(...));
//   ASSERT_OK_AND_ASSIGN(auto outputs, h.Run(*method, 2));
//   ASSERT_OK_AND_ASSIGN(auto host, h.RunAllHost(2));
//   EXPECT_EQ(outputs, host);                  // P14
//
// Inputs are deterministic per input position; inputs the plan expects on a device are placed in
// that device's memory (as a caller keeping tensors there would do). Outputs are read back to the
// host from wherever the plan returns them.
#ifndef FERRY_TESTS_TESTING_METHOD_HARNESS_H_
#define FERRY_TESTS_TESTING_METHOD_HARNESS_H_

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/runtime/runtime.h"

namespace ferry::testing {

// (direction, value name, source device, destination device, bytes), one per copy.
using CopyRow = std::tuple<std::string, std::string, std::string, std::string, size_t>;

inline std::vector<CopyRow> Copies(const Method& method, CopyTiming timing) {
  std::vector<CopyRow> rows;
  for (const CopyStep& c : method.plan().placement.copies) {
    if (c.timing != timing) continue;
    rows.emplace_back(CopyDirectionName(c.direction), method.def().values[c.value].name,
                      c.src_device.ToString(), c.dst_device.ToString(), c.bytes);
  }
  return rows;
}
inline std::vector<CopyRow> PerCallCopies(const Method& m) { return Copies(m, CopyTiming::kPerCall); }
inline std::vector<CopyRow> OnceCopies(const Method& m) { return Copies(m, CopyTiming::kOnce); }

inline std::vector<std::string> Warnings(const Method& method) {
  std::vector<std::string> out;
  for (const Diagnostic& d : method.plan().placement.diagnostics) {
    if (d.severity == Diagnostic::Severity::kWarning) out.push_back(d.message);
  }
  return out;
}

// Deterministic input element j of input i: floats in [-1, 1], int64 in [0, 2).
inline double InputValue(size_t i, size_t j, DType dtype) {
  if (dtype == DType::kInt64) return static_cast<double>((i + j) % 2);
  return std::sin(0.7 * static_cast<double>(j) + 1.3 * static_cast<double>(i) + 0.25);
}

class MethodHarness {
 public:
  explicit MethodHarness(const ProgramBuilder& builder, RuntimeOptions options = {})
      : runtime_(std::make_unique<Runtime>(options)) {
    absl::StatusOr<std::vector<uint8_t>> bytes = builder.Build();
    if (!bytes.ok()) {
      status_ = bytes.status();
      return;
    }
    bytes_ = *std::move(bytes);
    absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(bytes_);
    if (!program.ok()) {
      status_ = program.status();
      return;
    }
    program_ = *std::move(program);
  }

  const absl::Status& status() const { return status_; }
  Runtime& runtime() { return *runtime_; }
  const Program& program() const { return *program_; }

  // Loads with `options`; without a device map in them, with the harness's map where one was
  // set (set_device_map), else with the runtime's default map.
  absl::StatusOr<std::unique_ptr<Method>> Load(const LoadOptions& options = {},
                                               const std::string& name = "forward") {
    FERRY_RETURN_IF_ERROR(status_);
    if (options.device_map.has_value() || !device_map_.has_value()) {
      return runtime_->LoadMethod(*program_, name, options);
    }
    LoadOptions mapped = options;
    mapped.device_map = device_map_;
    return runtime_->LoadMethod(*program_, name, mapped);
  }

  void set_device_map(absl::flat_hash_map<Device, Device> map) { device_map_ = std::move(map); }

  // Binds deterministic inputs (on the devices the plan names) and executes `calls` times;
  // returns each output of the last call as doubles, read back to the host.
  absl::StatusOr<std::vector<std::vector<double>>> Run(Method& method, int calls = 1) {
    FERRY_RETURN_IF_ERROR(BindInputs(method));
    for (int c = 0; c < calls; ++c) FERRY_RETURN_IF_ERROR(method.Execute());
    return ReadOutputs(method);
  }

  // The same method loaded with every device mapped to the host: the reference run of P14.
  absl::StatusOr<std::vector<std::vector<double>>> RunAllHost(int calls = 1,
                                                               const std::string& name = "forward") {
    LoadOptions options;
    absl::flat_hash_map<Device, Device> map;
    for (int i = 0; i < 8; ++i) {
      map[Device::Cuda(i)] = Device::Host();
      map[Device::Sim(i)] = Device::Host();
    }
    options.device_map = map;
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Method> method, Load(options, name));
    for (const NodePlacement& n : method->plan().placement.nodes) {
      if (!n.device.is_host()) return absl::InternalError("all-host run placed a node off the host");
    }
    return Run(*method, calls);
  }

  absl::Status BindInputs(Method& method) {
    inputs_.clear();
    device_inputs_.clear();
    const MethodPlan& plan = method.plan();
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const IoInfo& io = plan.inputs[i];
      std::vector<uint8_t> bytes(io.bytes);
      const size_t count = io.bytes / DTypeSize(io.dtype);
      for (size_t j = 0; j < count; ++j) {
        double v = InputValue(i, j, io.dtype);
        if (io.dtype == DType::kFloat32) {
          float f = static_cast<float>(v);
          std::memcpy(bytes.data() + 4 * j, &f, 4);
        } else {
          int64_t n = static_cast<int64_t>(v);
          std::memcpy(bytes.data() + 8 * j, &n, 8);
        }
      }
      inputs_.push_back(std::move(bytes));
      void* data = inputs_.back().data();
      if (!io.device.is_host()) {
        DeviceRuntime* device = runtime_->devices().Find(io.device);
        FERRY_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(*device, io.bytes, 64));
        FERRY_RETURN_IF_ERROR(device->CopyHostToDevice(buffer.data(), data, io.bytes));
        FERRY_RETURN_IF_ERROR(device->Synchronize());
        data = buffer.data();
        device_inputs_.push_back(std::move(buffer));
      }
      FERRY_RETURN_IF_ERROR(method.SetInput(i, TensorView(io.dtype, io.sizes, data, io.device)));
    }
    // The set-up copies above are the harness's, not the method's.
    for (const Device& d : runtime_->devices().devices()) runtime_->devices().Find(d)->ResetCounters();
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::vector<double>>> ReadOutputs(const Method& method) {
    std::vector<std::vector<double>> outputs;
    for (size_t i = 0; i < method.num_outputs(); ++i) {
      FERRY_ASSIGN_OR_RETURN(std::vector<double> values, ReadValues(*runtime_, method.Output(i)));
      outputs.push_back(std::move(values));
    }
    return outputs;
  }

  // Total per-device copy counts since the inputs were bound.
  DeviceCounters Counters() const {
    DeviceCounters total;
    for (const Device& d : runtime_->devices().devices()) {
      if (d.is_host()) continue;
      total.AddCopies(runtime_->devices().Find(d)->counters());
    }
    return total;
  }

 private:
  std::unique_ptr<Runtime> runtime_;
  std::optional<absl::flat_hash_map<Device, Device>> device_map_;
  absl::Status status_;
  std::vector<uint8_t> bytes_;
  std::unique_ptr<Program> program_;
  std::vector<std::vector<uint8_t>> inputs_;
  std::vector<DeviceBuffer> device_inputs_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_METHOD_HARNESS_H_
