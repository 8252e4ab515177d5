// Load phase 4: one delegate instance per delegate node, its signature checked against the
// program's declaration.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "ferry/base/status_macros.h"
#include "ferry/runtime/internal/method_loader.h"

namespace ferry {
namespace internal {

absl::Status MethodLoader::InitBackends() {
  const size_t nn = m_.nodes.size();
  instance_of_node_.assign(nn, -1);
  DelegateInit init;  // reused: its lists keep their memory from one delegate to the next
  for (size_t n = 0; n < nn; ++n) {
    if (backends_[n] == nullptr) continue;
    const NodeDef& node = m_.nodes[n];
    const NodePlacement& placed = plan().nodes[n];
    init.args.clear();
    init.scalar_args.clear();
    init.results.clear();
    init.node_name = node.name;
    init.payload = node.delegate().payload;
    init.compile_specs = &node.delegate().compile_specs;
    init.device = placed.device;
    init.device_runtime = rt_.devices().Find(placed.device);
    init.written_args.assign(node.delegate().written_args.begin(),
                             node.delegate().written_args.end());
    init.ops = &rt_.ops();
    init.named_data = m_.named_data;
    for (size_t a = 0; a < node.args.size(); ++a) {
      const ValueDef& value = m_.values[node.args[a]];
      if (value.is_tensor()) {
        init.args.push_back(impl_.refs_[placed.arg_buffers[a]]);
        init.scalar_args.push_back(nullptr);
      } else {
        TensorRef none;
        none.rank = -1;
        init.args.push_back(none);
        init.scalar_args.push_back(&value.scalar);
      }
    }
    for (int32_t b : placed.result_buffers) init.results.push_back(impl_.refs_[b]);
    const std::string& backend = node.delegate().backend;
    std::vector<std::string>& built_in = impl_.plan_.built_in_backends;
    if (rt_.IsBuiltInBackend(backend) &&
        std::find(built_in.begin(), built_in.end(), backend) == built_in.end()) {
      built_in.push_back(backend);
    }
    absl::StatusOr<std::unique_ptr<DelegateInstance>> instance = backends_[n]->Init(init);
    if (!instance.ok()) {
      return absl::Status(instance.status().code(),
                          absl::StrCat(NodeContext(n), ": backend \"", node.delegate().backend,
                                       "\" init failed: ", instance.status().message()));
    }
    // Owned by the method from here, so that it is destroyed if a later check fails.
    instance_of_node_[n] = static_cast<int32_t>(impl_.instances_.size());
    impl_.instances_.push_back(*std::move(instance));
    FERRY_RETURN_IF_ERROR(CheckSignature(n, init, impl_.instances_.back()->signature()));
  }
  return absl::OkStatus();
}

absl::Status MethodLoader::CheckSignature(size_t n, const DelegateInit& init,
                                          const DelegateSignature& signature) const {
  const NodeDef& node = m_.nodes[n];
  // The messages' subject, built only on error.
  auto who = [&] {
    return absl::StrCat(NodeContext(n), ": delegate \"", node.delegate().backend, "\"");
  };
  // Tensor arguments, in call order.
  size_t k = 0;
  for (size_t a = 0; a < init.args.size(); ++a) {
    const TensorRef& arg = init.args[a];
    if (arg.rank < 0) continue;
    if (k >= signature.tensor_args.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          who(), " is called with tensor argument ", a, " (\"", m_.values[node.args[a]].name,
          "\"), but its payload reads only ", signature.tensor_args.size(), " tensors"));
    }
    const TensorSpec& spec = signature.tensor_args[k++];
    const absl::Span<const int64_t> sizes(arg.sizes.data(), arg.rank);
    if (spec.dtype != arg.dtype || !SameSizes(spec.sizes, sizes)) {
      return absl::InvalidArgumentError(
          absl::StrCat(who(), ": argument ", a, " (\"", m_.values[node.args[a]].name,
                       "\") is declared ", SpecString(arg.dtype, sizes),
                       ", but the backend's payload reads ", SpecString(spec.dtype, spec.sizes)));
    }
  }
  if (k != signature.tensor_args.size()) {
    return absl::InvalidArgumentError(absl::StrCat(who(), " passes ", k,
                                                   " tensor arguments, but its payload reads ",
                                                   signature.tensor_args.size()));
  }
  if (signature.results.size() != init.results.size()) {
    return absl::InvalidArgumentError(absl::StrCat(who(), " declares ", init.results.size(),
                                                   " results, but its payload produces ",
                                                   signature.results.size()));
  }
  for (size_t r = 0; r < init.results.size(); ++r) {
    const TensorRef& result = init.results[r];
    const TensorSpec& spec = signature.results[r];
    const absl::Span<const int64_t> sizes(result.sizes.data(), result.rank);
    if (spec.dtype != result.dtype || !SameSizes(spec.sizes, sizes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          who(), ": result ", r, " (\"", m_.values[node.results[r]].name, "\") is declared ",
          SpecString(result.dtype, sizes), ", but the backend's payload produces ",
          SpecString(spec.dtype, spec.sizes)));
    }
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ferry
