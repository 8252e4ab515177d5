// Pieces of hand-made ExecuTorch programs (loader/executorch/pte_reader.h) for tests: values,
// kernel calls, and a backend registered under an ExecuTorch backend id.
#ifndef FERRY_TESTS_TESTING_ET_PROGRAM_PARTS_H_
#define FERRY_TESTS_TESTING_ET_PROGRAM_PARTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ferry/loader/executorch/pte_reader.h"
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
