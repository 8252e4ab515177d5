// TensorView: a tensor the caller hands to a method, or reads from it, with the device its memory
// is on. It does not own memory.
//
//   std::vector<float> a(4);
//   method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 2}, a.data()));
//   TensorView out = method->Output(0);      // out.device(), out.data_as<float>()
//
// An empty view (data() == nullptr, rank 0) is what Method::Output returns for an index out of
// range or after a failed Execute.
#ifndef FERRY_RUNTIME_TENSOR_VIEW_H_
#define FERRY_RUNTIME_TENSOR_VIEW_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "ferry/base/tensor.h"
#include "ferry/memory/device.h"

namespace ferry {

class TensorView {
 public:
  TensorView() = default;
  // A dense row-major tensor at `data` on `device`. More than kMaxRank sizes make a view that
  // SetInput and SetOutputBuffer refuse (given_rank() says how many were given).
  TensorView(DType dtype, absl::Span<const int64_t> sizes, void* data, Device device)
      : ref_(TensorRef::Contiguous(dtype, sizes, data)),
        device_(device),
        given_rank_(sizes.size()) {}
  TensorView(const TensorRef& ref, Device device)
      : ref_(ref), device_(device), given_rank_(ref.rank < 0 ? 0 : ref.rank) {}

  static TensorView Host(DType dtype, absl::Span<const int64_t> sizes, void* data) {
    return TensorView(dtype, sizes, data, Device::Host());
  }

  DType dtype() const { return ref_.dtype; }
  absl::Span<const int64_t> sizes() const {
    return absl::Span<const int64_t>(ref_.sizes.data(), ref_.rank);
  }
  absl::Span<const int64_t> strides() const {
    return absl::Span<const int64_t>(ref_.strides.data(), ref_.rank);
  }
  int64_t numel() const { return ref_.numel(); }
  size_t nbytes() const { return ref_.nbytes(); }
  void* data() const { return ref_.data; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(ref_.data);
  }
  const Device& device() const { return device_; }
  const TensorRef& ref() const { return ref_; }
  // The number of sizes the view was made with; above kMaxRank, ref() holds only the first
  // kMaxRank of them and the view is refused wherever it is bound.
  size_t given_rank() const { return given_rank_; }

 private:
  TensorRef ref_;
  Device device_;
  size_t given_rank_ = 0;
};

}  // namespace ferry

#endif  // FERRY_RUNTIME_TENSOR_VIEW_H_
