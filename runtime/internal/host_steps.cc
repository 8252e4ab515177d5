#include "ferry/runtime/internal/host_steps.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ferry::internal {

absl::Status InferAndCheck(const OpSchema& schema, absl::Span<const OpArg> args,
                           absl::Span<const TensorMeta* const> declared,
                           std::vector<InferredResult>* results,
                           absl::FunctionRef<std::string()> context) {
  const int n = static_cast<int>(args.size());
  if (n < schema.min_args || (schema.max_args >= 0 && n > schema.max_args)) {
    return absl::InvalidArgumentError(absl::StrCat(
        context(), ": op \"", schema.name, "\" takes ",
        schema.max_args == schema.min_args
            ? absl::StrCat(schema.min_args)
            : (schema.max_args < 0 ? absl::StrCat("at least ", schema.min_args)
                                   : absl::StrCat(schema.min_args, " to ", schema.max_args)),
        " arguments, but the node passes ", n));
  }
  if (static_cast<int>(declared.size()) != schema.num_results) {
    return absl::InvalidArgumentError(absl::StrCat(context(), ": op \"", schema.name,
                                                   "\" has ", schema.num_results,
                                                   " results, but the node declares ",
                                                   declared.size()));
  }
  results->resize(schema.num_results);
  for (InferredResult& r : *results) r = InferredResult{};
  absl::Status s = schema.infer(args, absl::MakeSpan(*results));
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(context(), ": ", s.message()));
  }
  for (size_t r = 0; r < declared.size(); ++r) {
    const TensorRef& got = (*results)[r].layout;
    const TensorMeta& want = *declared[r];
    const absl::Span<const int64_t> got_sizes(got.sizes.data(), got.rank);
    if (got.dtype != want.dtype || !SameSizes(got_sizes, want.sizes)) {
      TensorMeta inferred{got.dtype, {got_sizes.begin(), got_sizes.end()}, {}};
      return absl::InvalidArgumentError(absl::StrCat(
          context(), ": result ", r, " is declared ", want.ToString(), ", but op \"", schema.name,
          "\" produces ", inferred.ToString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace ferry::internal
