#include "ferry/kernels/op_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

bool OpSchema::Writes(int arg) const { return Contains(written_args, arg); }

bool OpSchema::ShapeOnly(int arg) const { return Contains(shape_only_args, arg); }

int OpSchema::ViewOf(int result) const {
  if (result < 0 || result >= static_cast<int>(view_of.size())) return -1;
  return view_of[result];
}

OpRegistry::OpRegistry(const OpRegistry& other) {
  ops_.reserve(other.ops_.size());
  for (const auto& [name, schema] : other.ops_) {
    ops_.emplace(name, std::make_unique<OpSchema>(*schema));
  }
}

OpRegistry& OpRegistry::operator=(const OpRegistry& other) {
  if (this != &other) {
    OpRegistry copy(other);
    *this = std::move(copy);
  }
  return *this;
}

OpRegistry OpRegistry::WithBuiltIns() {
  OpRegistry registry;
  // The built-in schemas are fixed at compile time and covered by tests; a failure here would be a
  // programming error in this library, not something a program or caller can cause.
  absl::Status status = RegisterBuiltInOps(registry);
  (void)status;
  return registry;
}

absl::Status OpRegistry::Register(OpSchema schema) {
  const std::string& name = schema.name;
  if (name.empty()) return absl::InvalidArgumentError("cannot register an op with an empty name");
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("op \"", name, "\": ", what));
  };
  if (ops_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("op \"", name, "\" is already registered"));
  }
  if (schema.infer == nullptr) return bad("the schema has no infer function");
  if (schema.min_args < 0) return bad(absl::StrCat("min_args is ", schema.min_args));
  if (schema.max_args != -1 && schema.max_args < schema.min_args) {
    return bad(absl::StrCat("max_args (", schema.max_args, ") is below min_args (", schema.min_args,
                            ")"));
  }
  if (schema.num_results < 0) return bad(absl::StrCat("num_results is ", schema.num_results));
  // An empty view_of means no result is a view.
  if (schema.view_of.empty()) schema.view_of.assign(schema.num_results, -1);
  if (static_cast<int>(schema.view_of.size()) != schema.num_results) {
    return bad(absl::StrCat("view_of has ", schema.view_of.size(), " entries for ",
                            schema.num_results, " results"));
  }
  // Indices must name an argument every call has: a variadic op guarantees only min_args.
  const int arg_limit = schema.max_args == -1 ? schema.min_args : schema.max_args;
  auto check_arg = [&](const char* list, int arg) -> absl::Status {
    if (arg < 0 || arg >= arg_limit) {
      return bad(absl::StrCat(list, " names argument ", arg, ", but the op takes at most ",
                              arg_limit, " fixed arguments"));
    }
    return absl::OkStatus();
  };
  for (int arg : schema.written_args) {
    if (absl::Status s = check_arg("written_args", arg); !s.ok()) return s;
    if (Contains(schema.shape_only_args, arg)) {
      return bad(absl::StrCat("argument ", arg, " is both written and shape-only"));
    }
  }
  for (int arg : schema.shape_only_args) {
    if (absl::Status s = check_arg("shape_only_args", arg); !s.ok()) return s;
  }
  bool all_views = true;
  for (int r = 0; r < schema.num_results; ++r) {
    const int arg = schema.view_of[r];
    if (arg == -1) {
      all_views = false;
      continue;
    }
    if (arg < 0 || arg >= arg_limit) {
      return bad(absl::StrCat("result ", r, " is a view of argument ", arg,
                              ", which the op does not have (at most ", arg_limit,
                              " fixed arguments)"));
    }
    if (Contains(schema.shape_only_args, arg)) {
      return bad(absl::StrCat("result ", r, " is a view of argument ", arg,
                              ", which is read only for its shape"));
    }
  }
  if (schema.kernel == nullptr && (!schema.written_args.empty() || !all_views)) {
    return bad("a null kernel is allowed only for ops whose results are all views and that write "
               "nothing");
  }
  std::string key = name;
  ops_.emplace(std::move(key), std::make_unique<OpSchema>(std::move(schema)));
  return absl::OkStatus();
}

const OpSchema* OpRegistry::Find(absl::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> names;
  names.reserve(ops_.size());
  for (const auto& [name, schema] : ops_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ferry
