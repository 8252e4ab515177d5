// Pieces of hand-made ExecuTorch programs (loader/executorch/pte_reader.h) for tests: values,
// kernel calls, one-method programs, and a backend registered under an ExecuTorch backend id.
#ifndef FERRY_TESTS_TESTING_ET_PROGRAM_PARTS_H_
#define FERRY_TESTS_TESTING_ET_PROGRAM_PARTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "ferry/loader/executorch/importer.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/model/method_def.h"
#include "ferry/runtime/backend.h"

namespace ferry::testing {

// A float32 tensor value of `sizes`, without data.
inline EtValue FloatTensor(std::vector<int64_t> sizes) {
  EtValue v;
  v.kind = EtValueKind::kTensor;
  v.tensor.scalar_type = 6;
  v.tensor.dtype = DType::kFloat32;
  v.tensor.element_size = 4;
  v.tensor.sizes = std::move(sizes);
  v.tensor.numel = 1;
  for (int64_t s : v.tensor.sizes) v.tensor.numel *= s;
  v.tensor.byte_size = v.tensor.numel * 4;
  return v;
}

inline EtValue Int(int64_t i) {
  EtValue v;
  v.kind = EtValueKind::kInt;
  v.int_value = i;
  return v;
}

// A kernel call of operator `op` (an index into the method's operators) with value indices.
inline EtInstruction KernelCall(int32_t op, std::vector<int32_t> args) {
  EtInstruction i;
  i.kind = EtInstructionKind::kKernelCall;
  i.op_index = op;
  i.args = std::move(args);
  return i;
}

// A tensor value of another dtype: `scalar_type` is its ExecuTorch number.
inline EtValue TensorOf(int8_t scalar_type, DType dtype, size_t element_size, std::vector<int64_t> sizes) {
  EtValue v = FloatTensor(std::move(sizes));
  v.tensor.scalar_type = scalar_type;
  v.tensor.dtype = dtype;
  v.tensor.element_size = element_size;
  return v;
}

inline EtValue BoolTensor(std::vector<int64_t> sizes) {
  return TensorOf(11, DType::kBool, 1, std::move(sizes));
}

inline EtValue Int32Tensor(std::vector<int64_t> sizes) {
  return TensorOf(3, DType::kInt32, 4, std::move(sizes));
}

inline EtValue Int64Tensor(std::vector<int64_t> sizes) {
  return TensorOf(4, DType::kInt64, 8, std::move(sizes));
}

inline EtValue Bool(bool b) {
  EtValue v;
  v.kind = EtValueKind::kBool;
  v.bool_value = b;
  return v;
}

inline EtValue Double(double d) {
  EtValue v;
  v.kind = EtValueKind::kDouble;
  v.double_value = d;
  return v;
}

inline EtValue IntList(std::vector<int32_t> items) {
  EtValue v;
  v.kind = EtValueKind::kIntList;
  v.items = std::move(items);
  return v;
}

inline EtValue None() { return EtValue(); }

inline EtValue String(std::string s) {
  EtValue v;
  v.kind = EtValueKind::kString;
  v.string_value = std::move(s);
  return v;
}

inline EtValue DoubleList(std::vector<double> items) {
  EtValue v;
  v.kind = EtValueKind::kDoubleList;
  v.doubles = std::move(items);
  return v;
}

inline EtValue BoolList(std::vector<bool> items) {
  EtValue v;
  v.kind = EtValueKind::kBoolList;
  v.bools = std::move(items);
  return v;
}

inline EtValue TensorList(std::vector<int32_t> items) {
  EtValue v;
  v.kind = EtValueKind::kTensorList;
  v.items = std::move(items);
  return v;
}

// A float32 constant of `sizes` whose bytes are `data` (which must outlive the program).
inline EtValue Constant(std::vector<int64_t> sizes, const std::vector<float>& data) {
  EtValue v = FloatTensor(std::move(sizes));
  v.tensor.numel = data.size();
  v.tensor.byte_size = data.size() * sizeof(float);
  v.tensor.data.kind = EtDataKind::kConstantSegment;
  v.tensor.data.bytes = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(data.data()),
                                            data.size() * sizeof(float));
  return v;
}

// One method "forward" with these values, inputs, outputs, operators and calls.
inline EtProgram OneMethod(std::vector<EtValue> values, std::vector<int32_t> inputs,
                    std::vector<int32_t> outputs, std::vector<EtOperator> operators,
                    std::vector<EtInstruction> instructions) {
  EtProgram p;
  EtMethod m;
  m.name = "forward";
  m.values = std::move(values);
  m.inputs = std::move(inputs);
  m.outputs = std::move(outputs);
  m.operators = std::move(operators);
  m.instructions = std::move(instructions);
  p.methods.push_back(std::move(m));
  return p;
}

// forward(x) = y, where y = x + x, then y = y + y: value 1 is written twice, as ExecuTorch does
// when it reuses an `out`.
inline EtProgram ReusedOut(int64_t alpha) {
  EtProgram p;
  EtMethod m;
  m.name = "forward";
  m.values = {FloatTensor({2}), FloatTensor({2}), Int(alpha)};
  m.inputs = {0};
  m.outputs = {1};
  m.operators = {{"aten::add", "out"}};
  m.instructions = {KernelCall(0, {0, 0, 2, 1, 1}), KernelCall(0, {1, 1, 2, 1, 1})};
  p.methods.push_back(std::move(m));
  return p;
}

// The op of the node that produces `value`, or "" for none.
inline std::string ProducerOp(const MethodDef& m, ValueId value) {
  for (const NodeDef& n : m.nodes) {
    for (ValueId r : n.results) {
      if (r == value) return n.op;
    }
  }
  return "";
}

// The status of importing `program`'s first method: the import's reason when it refuses it.
inline absl::Status ImportMethodStatus(const EtProgram& program) {
  absl::StatusOr<EtImport> imported = ImportExecuTorchProgram(program);
  if (!imported.ok()) return imported.status();
  return imported->refused.empty() ? absl::OkStatus() : imported->refused.front().status;
}

// Another backend under another name, as an application registers a backend for the id an
// ExecuTorch exporter wrote (e.g. Ferry's graph backend as "FerryGraphBackend").
class RenamedBackend : public Backend {
 public:
  RenamedBackend(std::string name, std::unique_ptr<Backend> inner)
      : name_(std::move(name)), inner_(std::move(inner)) {}
  absl::string_view name() const override { return name_; }
  bool SupportsDevice(DeviceType type) const override { return inner_->SupportsDevice(type); }
  absl::StatusOr<std::unique_ptr<DelegateInstance>> Init(const DelegateInit& init) const override {
    return inner_->Init(init);
  }

 private:
  std::string name_;
  std::unique_ptr<Backend> inner_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_ET_PROGRAM_PARTS_H_
