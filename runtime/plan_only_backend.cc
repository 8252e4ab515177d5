// The plan-only stand-in for a backend nobody registered (runtime/backend.h,
// Runtime::RegisterPlanOnlyBackends).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/runtime.h"

namespace ferry {
namespace {

// Planning needs only what the program declares for a delegate (its device, arguments and
// results), not the payload: an instance reports that signature and refuses to execute.
class PlanOnlyBackend : public Backend {
 public:
  explicit PlanOnlyBackend(std::string name) : name_(std::move(name)) {}
  absl::string_view name() const override { return name_; }
  bool SupportsDevice(DeviceType) const override { return true; }
  absl::StatusOr<std::unique_ptr<DelegateInstance>> Init(const DelegateInit& init) const override {
    DelegateSignature signature;
    for (const TensorRef& arg : init.args) {
      if (arg.rank < 0) continue;  // a scalar argument
      signature.tensor_args.push_back(Spec(arg));
    }
    for (const TensorRef& result : init.results) signature.results.push_back(Spec(result));
    return std::unique_ptr<DelegateInstance>(new Instance(std::move(signature), name_));
  }

 private:
  static TensorSpec Spec(const TensorRef& t) {
    return TensorSpec{t.dtype, std::vector<int64_t>(t.sizes.begin(), t.sizes.begin() + t.rank)};
  }
  class Instance : public DelegateInstance {
   public:
    Instance(DelegateSignature signature, std::string backend)
        : signature_(std::move(signature)), backend_(std::move(backend)) {}
    DelegateSignature signature() const override { return signature_; }
    // The executor prefixes the method and the node.
    absl::Status Execute(absl::Span<TensorRef* const>, absl::Span<TensorRef* const>,
                         void*) override {
      return absl::FailedPreconditionError(absl::StrCat(
          "backend \"", backend_,
          "\" is not registered: this call was planned only (Runtime::RegisterPlanOnlyBackends); "
          "register the backend with Runtime::RegisterBackend before loading to run it"));
    }

   private:
    DelegateSignature signature_;
    std::string backend_;
  };
  std::string name_;
};

}  // namespace

std::unique_ptr<Backend> MakePlanOnlyBackend(absl::string_view name) {
  return std::make_unique<PlanOnlyBackend>(std::string(name));
}

std::vector<std::string> Runtime::RegisterPlanOnlyBackends(const Program& program) {
  // The names first, then the registrations: nothing can fail between them, since every name is
  // one this runtime lacks and each is registered once.
  std::vector<std::string> missing;
  for (const std::string& name : program.method_names()) {
    absl::StatusOr<const MethodDef*> method = program.method(name);
    if (!method.ok()) continue;
    for (const NodeDef& node : (*method)->nodes) {
      if (node.kind != NodeKind::kDelegate || FindBackend(node.delegate().backend) != nullptr ||
          std::find(missing.begin(), missing.end(), node.delegate().backend) != missing.end()) {
        continue;
      }
      missing.push_back(node.delegate().backend);
    }
  }
  for (const std::string& name : missing) {
    backends_.emplace(name, MakePlanOnlyBackend(name));
  }
  return missing;
}

}  // namespace ferry
