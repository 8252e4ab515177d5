// The built-in graph backend: runs a sub-graph of registered ops on any device whose memory the
// host's kernels can run over (inside its scope), and on device types with kernels of their own
// (kernels/device_kernels.h). See runtime/backend.h.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"
#include "ferry/kernels/device_kernels.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/memory/device_type.h"
#include "ferry/memory/memory_planner.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/internal/graph_instance.h"
#include "ferry/runtime/internal/host_steps.h"

namespace ferry {
namespace {

constexpr size_t kAlignment = 64;

bool SameLayout(const TensorRef& a, const TensorRef& b) {
  if (a.dtype != b.dtype || a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i) {
    if (a.sizes[i] != b.sizes[i]) return false;
    if (a.sizes[i] != 1 && a.strides[i] != b.strides[i]) return false;
  }
  return true;
}

}  // namespace

namespace internal {

// A sub-program's constants on one device, shared by the instances of that program there (the
// sub-graph never writes them: Compile refuses an in-place write to a constant).
struct DeviceConstants {
  std::shared_ptr<const Program> program;  // keeps the key's program alive while in the cache
  DeviceBuffer buffer;
};

// Verified sub-programs, shared by every instance whose payload has the same bytes: a method
// built from repeated layers carries one payload many times, and it is verified and parsed once,
// and its constants are copied to each device once. An entry lives as long as some instance
// holds it; keys view the program's own bytes.
class GraphProgramCache : public std::enable_shared_from_this<GraphProgramCache> {
 public:
  absl::StatusOr<std::shared_ptr<const Program>> Get(absl::Span<const uint8_t> payload) {
    const absl::string_view key(reinterpret_cast<const char*>(payload.data()), payload.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = programs_.find(key);
      if (it != programs_.end()) {
        if (std::shared_ptr<const Program> program = it->second.lock()) return program;
      }
    }
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Program> parsed, Program::FromBytes(payload));
    const absl::Span<const uint8_t> bytes = parsed->bytes();
    const absl::string_view own_key(reinterpret_cast<const char*>(bytes.data()), payload.size());
    std::weak_ptr<GraphProgramCache> cache = weak_from_this();
    std::shared_ptr<const Program> program(parsed.release(), [cache, own_key](const Program* p) {
      if (std::shared_ptr<GraphProgramCache> c = cache.lock()) c->Erase(own_key);
      delete p;
    });
    std::lock_guard<std::mutex> lock(mu_);
    auto it = programs_.find(own_key);
    if (it != programs_.end()) {
      // Another thread parsed the same bytes meanwhile: share its program (ours is dropped).
      if (std::shared_ptr<const Program> shared = it->second.lock()) return shared;
      // An expired entry is replaced, key included: its key views the bytes of the program being
      // destroyed.
      programs_.erase(it);
    }
    programs_.emplace(own_key, program);
    return program;
  }

  // `program`'s constants on `runtime`, made by `make` (allocation and copies) when no instance
  // holds them there.
  absl::StatusOr<std::shared_ptr<const DeviceConstants>> Constants(
      const std::shared_ptr<const Program>& program, DeviceRuntime* runtime,
      absl::FunctionRef<absl::StatusOr<DeviceBuffer>()> make) {
    const ConstantsKey key(program.get(), runtime);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = constants_.find(key); it != constants_.end()) {
        if (std::shared_ptr<const DeviceConstants> c = it->second.lock()) return c;
      }
    }
    auto made = std::make_unique<DeviceConstants>();
    made->program = program;
    FERRY_ASSIGN_OR_RETURN(made->buffer, make());
    std::weak_ptr<GraphProgramCache> cache = weak_from_this();
    std::shared_ptr<const DeviceConstants> shared(made.release(),
                                                  [cache, key](const DeviceConstants* c) {
                                                    if (auto self = cache.lock()) {
                                                      self->EraseExpiredConstants(key);
                                                    }
                                                    delete c;
                                                  });
    std::lock_guard<std::mutex> lock(mu_);
    auto it = constants_.find(key);
    if (it != constants_.end()) {
      // Another thread made them meanwhile: share those (ours are dropped after the lock).
      if (std::shared_ptr<const DeviceConstants> other = it->second.lock()) return other;
      constants_.erase(it);
    }
    constants_.emplace(key, shared);
    return shared;
  }

 private:
  using ConstantsKey = std::pair<const Program*, DeviceRuntime*>;

  // Called by the constants' deleter: their entry, unless newer live constants replaced it.
  void EraseExpiredConstants(const ConstantsKey& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = constants_.find(key);
    if (it != constants_.end() && it->second.expired()) constants_.erase(it);
  }

  // Called by a program's deleter, before the program (and the bytes `key` views) is freed.
  void Erase(absl::string_view key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = programs_.find(key);
    // Only this program's own entry: a newer program may have replaced an expired one.
    if (it != programs_.end() && it->first.data() == key.data()) programs_.erase(it);
  }

  std::mutex mu_;
  absl::flat_hash_map<absl::string_view, std::weak_ptr<const Program>> programs_;
  absl::flat_hash_map<ConstantsKey, std::weak_ptr<const DeviceConstants>> constants_;
};

}  // namespace internal

namespace {

class GraphInstance : public DelegateInstance {
 public:
  static absl::StatusOr<std::unique_ptr<GraphInstance>> Create(
      const DelegateInit& init, std::shared_ptr<const Program> program,
      internal::GraphProgramCache& cache) {
    std::unique_ptr<GraphInstance> g(new GraphInstance());
    g->device_runtime_ = init.device_runtime;
    // A device whose memory is the host's would let host kernels read a foreign pointer silently:
    // its arguments are checked. Other devices fault on one (or the copy kernels refuse it).
    g->check_ownership_ = !init.device.is_host() && init.device_runtime->uses_host_memory();
    const DeviceTypeInfo* type = FindDeviceType(init.device.type);
    if (type == nullptr || !type->host_kernels_run_on_memory) {
      g->kernels_ = FindDeviceKernels(init.device.type);
      if (g->kernels_ == nullptr) {
        return absl::UnimplementedError(absl::StrCat("the graph backend has no kernels for ",
                                                     init.device.ToString()));
      }
    }
    g->program_ = std::move(program);
    FERRY_ASSIGN_OR_RETURN(const MethodDef* main, g->program_->method("main"));
    FERRY_RETURN_IF_ERROR(g->Compile(*main, init, cache));
    return g;
  }

  size_t scratch_bytes() const override { return scratch_bytes_; }
  DelegateSignature signature() const override { return signature_; }

  absl::Status Execute(absl::Span<TensorRef* const> args, absl::Span<TensorRef* const> results,
                       void* scratch) override {
    for (size_t i = 0; i < input_refs_.size(); ++i) {
      TensorRef* arg = args[arg_of_input_[i]];
      if (check_ownership_ && !device_runtime_->Owns(arg->data, arg->nbytes())) {
        return ForeignArgument(arg_of_input_[i], arg->data);
      }
      refs_[input_refs_[i]].data = arg->data;
    }
    for (const auto& [ref, offset] : scratch_refs_) {
      refs_[ref].data = static_cast<char*>(scratch) + offset;
    }
    for (const auto& [ref, result] : bound_outputs_) refs_[ref].data = results[result]->data;
    if (kernels_ != nullptr) kernels_->SetStream(device_runtime_->native_stream());
    for (const internal::HostStep& step : tables_.steps()) {
      FERRY_RETURN_IF_ERROR(internal::RunHostStep(step));
    }
    // Outputs that are views, inputs or constants are copied into their result buffers.
    for (const auto& [ref, result] : copied_outputs_) {
      copy_args_[0].tensor = results[result];
      copy_args_[1].tensor = &refs_[ref];
      TensorRef* out = results[result];
      FERRY_RETURN_IF_ERROR(copy_kernel_(absl::MakeConstSpan(copy_args_, 2),
                                         absl::Span<TensorRef* const>(&out, 1)));
    }
    return absl::OkStatus();
  }

 private:
  GraphInstance() = default;

  // Built only on the error path.
  absl::Status ForeignArgument(int32_t arg, const void* data) const {
    const std::string device = device_runtime_->device().ToString();
    if (device_runtime_->WasFreed(data)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph backend: argument ", arg, " is memory of ", device,
          " that was freed; a device delegate was handed a buffer after its release"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "graph backend: argument ", arg, " is not memory of ", device,
        "; a device delegate was handed host memory or memory of another device"));
  }

  // The sub-graph's per-value and per-node tables that the node phases build and read.
  struct CompileState {
    explicit CompileState(const MethodDef& main);
    // Per value: the output it is (the first one), -1, or -2 once bound to the call's result.
    std::vector<int32_t> output_of;
    // Scratch buffers: one request per functional result not bound to a result, and its value.
    std::vector<BufferRequest> requests;
    std::vector<ValueId> request_value;
    std::vector<int32_t> request_of;  // per value: its request, or -1
    std::vector<int32_t> bound_as;    // per value: the output it is written to, or -1
    std::vector<int32_t> last_use;    // per value: the last node that reads it, or -1
    std::vector<int32_t> alias_root;  // per value: the value whose memory it is
    std::vector<int32_t> input_of;    // per value: its input index, or -1
    std::vector<std::vector<internal::ViewFixup>> pending_views;  // per node
    struct NodeRefs {
      const OpSchema* schema;
      std::vector<OpArg> args;
      std::vector<TensorRef*> results;
    };
    std::vector<NodeRefs> node_refs;  // per node
  };

  // Compiling "main" for the call, in named phases, each of which returns a status:
  //  1. BindInputs: the call's tensor arguments are main's inputs, in order and as declared;
  //  2. MaterializeConstants: main's constants on the device, once per device and sub-program;
  //  3. InferNodes: each node's schema and inferred results, its in-place writes checked, each
  //     result placed as a view, in the call's result, or in scratch;
  //  4. PlanScratch: scratch lifetimes (through views) and the scratch arena;
  //  5. BindKernels: each node's kernel for the device, its dtypes checked, into the step tables;
  //  6. BindOutputCopies: the copy for outputs that are views, inputs or constants.
  absl::Status Compile(const MethodDef& main, const DelegateInit& init,
                       internal::GraphProgramCache& cache) {
    CompileState state(main);
    FERRY_RETURN_IF_ERROR(BindInputs(main, init));
    FERRY_RETURN_IF_ERROR(MaterializeConstants(main, init, cache));
    FERRY_RETURN_IF_ERROR(InferNodes(main, init, state));
    FERRY_RETURN_IF_ERROR(PlanScratch(main, state));
    FERRY_RETURN_IF_ERROR(BindKernels(main, init, state));
    return BindOutputCopies(init);
  }

  absl::Status BindInputs(const MethodDef& main, const DelegateInit& init) {
    // Arguments: every tensor argument of the call is an input of "main", in order.
    std::vector<int32_t> tensor_args;
    for (size_t a = 0; a < init.args.size(); ++a) {
      if (init.args[a].rank >= 0) tensor_args.push_back(static_cast<int32_t>(a));
    }
    if (tensor_args.size() != main.inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the sub-graph takes ", main.inputs.size(),
                                                     " inputs, but the call passes ",
                                                     tensor_args.size(), " tensors"));
    }
    if (init.results.size() != main.outputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the sub-graph returns ",
                                                     main.outputs.size(),
                                                     " values, but the call has ",
                                                     init.results.size(), " results"));
    }
    // A sub-graph passes tensors only: its inputs are the call's tensor arguments, its outputs
    // the call's results.
    for (size_t i = 0; i < main.inputs.size(); ++i) {
      if (!main.values[main.inputs[i]].is_tensor()) {
        return absl::InvalidArgumentError(absl::StrCat("sub-graph input ", i,
                                                       " is not a tensor; a sub-graph's inputs and "
                                                       "outputs are tensors"));
      }
    }
    for (size_t o = 0; o < main.outputs.size(); ++o) {
      if (!main.values[main.outputs[o]].is_tensor()) {
        return absl::InvalidArgumentError(absl::StrCat("sub-graph output ", o,
                                                       " is not a tensor; a sub-graph's inputs and "
                                                       "outputs are tensors"));
      }
    }
    // What "main" reads and returns, as the program declares it (verified, and checked against
    // the inferred shapes of its nodes below); the loader compares it with the call.
    for (ValueId v : main.inputs) {
      const TensorMeta& meta = main.values[v].meta;
      signature_.tensor_args.push_back({meta.dtype, {meta.sizes.begin(), meta.sizes.end()}});
    }
    for (ValueId v : main.outputs) {
      const TensorMeta& meta = main.values[v].meta;
      signature_.results.push_back({meta.dtype, {meta.sizes.begin(), meta.sizes.end()}});
    }
    refs_.resize(main.values.size());
    for (size_t i = 0; i < main.inputs.size(); ++i) {
      ValueId v = main.inputs[i];
      const TensorRef& arg = init.args[tensor_args[i]];
      const TensorMeta& meta = main.values[v].meta;
      const absl::Span<const int64_t> sizes(arg.sizes.data(), arg.rank);
      if (arg.dtype != meta.dtype || sizes != absl::MakeConstSpan(meta.sizes)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sub-graph input ", i, " is ", meta.ToString(), ", but argument ", tensor_args[i],
            " is ", TensorMeta{arg.dtype, {sizes.begin(), sizes.end()}, {}}.ToString()));
      }
      refs_[v] = arg;
      refs_[v].data = nullptr;
      input_refs_.push_back(v);
      arg_of_input_.push_back(tensor_args[i]);
    }
    return absl::OkStatus();
  }

  absl::Status MaterializeConstants(const MethodDef& main, const DelegateInit& init,
                                    internal::GraphProgramCache& cache) {
    // Constants of the sub-graph are materialized on the device once.
    size_t constant_bytes = 0;
    std::vector<std::pair<ValueId, size_t>> constants;
    for (size_t v = 0; v < main.values.size(); ++v) {
      const ValueDef& value = main.values[v];
      if (value.kind == ValueKind::kState) {
        return absl::UnimplementedError(
            absl::StrCat("sub-graph value \"", value.name,
                         "\" is a state buffer; pass state to the delegate as an argument"));
      }
      if (value.kind != ValueKind::kConstant) continue;
      refs_[v] = value.meta.ToRef();
      constant_bytes = (constant_bytes + kAlignment - 1) / kAlignment * kAlignment;
      constants.emplace_back(static_cast<ValueId>(v), constant_bytes);
      constant_bytes += value.data.size();
    }
    if (constant_bytes > 0) {
      // Made once per device and shared by every instance of this sub-program there.
      auto make = [&]() -> absl::StatusOr<DeviceBuffer> {
        FERRY_ASSIGN_OR_RETURN(
            DeviceBuffer buffer,
            DeviceBuffer::Allocate(*init.device_runtime, constant_bytes, kAlignment));
        for (const auto& [v, offset] : constants) {
          FERRY_RETURN_IF_ERROR(init.device_runtime->CopyHostToDevice(
              static_cast<char*>(buffer.data()) + offset, main.values[v].data.data(),
              main.values[v].data.size()));
        }
        FERRY_RETURN_IF_ERROR(init.device_runtime->Synchronize());
        return buffer;
      };
      FERRY_ASSIGN_OR_RETURN(constants_, cache.Constants(program_, init.device_runtime, make));
      for (const auto& [v, offset] : constants) {
        refs_[v].data = static_cast<char*>(constants_->buffer.data()) + offset;
      }
    }
    return absl::OkStatus();
  }

  // Host ops only. Functional results are planned in scratch, or written straight into the
  // call's result when they are returned.
  absl::Status InferNodes(const MethodDef& main, const DelegateInit& init, CompileState& s) {
    const OpRegistry& ops = *init.ops;
    std::vector<int32_t>& output_of = s.output_of;
    std::vector<BufferRequest>& requests = s.requests;
    std::vector<ValueId>& request_value = s.request_value;
    std::vector<int32_t>& request_of = s.request_of;
    std::vector<int32_t>& bound_as = s.bound_as;
    std::vector<int32_t>& alias_root = s.alias_root;
    const std::vector<int32_t>& input_of = s.input_of;
    std::vector<std::vector<internal::ViewFixup>>& pending_views = s.pending_views;
    std::vector<CompileState::NodeRefs>& node_refs = s.node_refs;
    for (size_t n = 0; n < main.nodes.size(); ++n) {
      const NodeDef& node = main.nodes[n];
      auto ctx = [&] { return absl::StrCat("sub-graph node ", n, " (", node.name, ")"); };
      if (node.kind != NodeKind::kHostOp) {
        return absl::UnimplementedError(
            absl::StrCat(ctx(), ": the graph backend runs host ops only, not delegate calls"));
      }
      const OpSchema* schema = ops.Find(node.op);
      if (schema == nullptr) {
        return absl::UnimplementedError(absl::StrCat(ctx(), ": unknown op \"", node.op, "\""));
      }
      CompileState::NodeRefs& nr = node_refs[n];
      nr.schema = schema;
      nr.args.resize(node.args.size());
      for (size_t a = 0; a < node.args.size(); ++a) {
        const ValueDef& value = main.values[node.args[a]];
        if (value.is_tensor()) {
          nr.args[a].tensor = &refs_[node.args[a]];
        } else {
          nr.args[a].scalar = &value.scalar;
        }
      }
      std::vector<const TensorMeta*> declared;
      for (ValueId r : node.results) declared.push_back(&main.values[r].meta);
      std::vector<InferredResult> inferred;
      FERRY_RETURN_IF_ERROR(internal::InferAndCheck(*schema, nr.args, declared, &inferred, ctx));
      // In-place writes: never to a constant (instances share them, and a call must not change
      // what the next one reads), and to an input only where the call declares that argument
      // written (anything else would change a value the caller's plan holds unchanged).
      for (int a : schema->written_args) {
        const ValueId root = alias_root[node.args[a]];
        if (main.values[root].kind == ValueKind::kConstant) {
          return absl::InvalidArgumentError(
              absl::StrCat(ctx(), ": writes in place to sub-graph constant \"",
                           main.values[root].name, "\"; constants are read-only"));
        }
        if (input_of[root] >= 0) {
          const int32_t arg = arg_of_input_[input_of[root]];
          if (std::find(init.written_args.begin(), init.written_args.end(), arg) ==
              init.written_args.end()) {
            return absl::InvalidArgumentError(
                absl::StrCat(ctx(), ": writes in place to sub-graph input ", input_of[root],
                             " (argument ", arg, "), but the call does not declare argument ", arg,
                             " written; declare it in the delegate node's written_args"));
          }
        }
      }
      for (size_t r = 0; r < node.results.size(); ++r) {
        ValueId v = node.results[r];
        refs_[v] = inferred[r].layout;
        refs_[v].data = nullptr;
        nr.results.push_back(&refs_[v]);
        int view_of = schema->ViewOf(static_cast<int>(r));
        if (view_of >= 0) {
          ValueId base = node.args[view_of];
          alias_root[v] = alias_root[base];
          pending_views[n].push_back(
              {&refs_[v], &refs_[base],
               inferred[r].view_offset * static_cast<int64_t>(refs_[v].element_size())});
        } else if (output_of[v] >= 0 && SameLayout(refs_[v], init.results[output_of[v]])) {
          bound_outputs_.emplace_back(v, output_of[v]);
          bound_as[v] = output_of[v];
          output_of[v] = -2;  // bound
        } else {
          request_of[v] = static_cast<int32_t>(requests.size());
          requests.push_back({refs_[v].nbytes(), kAlignment, static_cast<int32_t>(n),
                              static_cast<int32_t>(n)});
          request_value.push_back(v);
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status PlanScratch(const MethodDef& main, CompileState& s) {
    std::vector<BufferRequest>& requests = s.requests;
    const std::vector<int32_t>& last_use = s.last_use;
    const std::vector<int32_t>& request_of = s.request_of;
    const std::vector<int32_t>& alias_root = s.alias_root;
    const std::vector<int32_t>& bound_as = s.bound_as;
    const std::vector<ValueId>& request_value = s.request_value;
    // A scratch value lives until the last read of it or of any view of it.
    // Linear in values and outputs: a sub-graph comes from a program file, whatever its size.
    for (size_t v = 0; v < main.values.size(); ++v) {
      if (last_use[v] < 0) continue;
      const int32_t i = request_of[alias_root[v]];
      if (i >= 0) requests[i].last_use = std::max(requests[i].last_use, last_use[v]);
    }
    const int32_t end = static_cast<int32_t>(main.nodes.size());
    for (size_t o = 0; o < main.outputs.size(); ++o) {
      ValueId v = main.outputs[o];
      if (bound_as[v] == static_cast<int32_t>(o)) continue;
      copied_outputs_.emplace_back(v, static_cast<int32_t>(o));
      const int32_t i = request_of[alias_root[v]];
      if (i >= 0) requests[i].last_use = end;
    }
    FERRY_ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(requests));
    scratch_bytes_ = plan.arena_size;
    for (size_t i = 0; i < requests.size(); ++i) {
      scratch_refs_.emplace_back(request_value[i], plan.offsets[i]);
    }
    return absl::OkStatus();
  }

  absl::Status BindKernels(const MethodDef& main, const DelegateInit& init,
                           const CompileState& s) {
    const std::vector<CompileState::NodeRefs>& node_refs = s.node_refs;
    const std::vector<std::vector<internal::ViewFixup>>& pending_views = s.pending_views;
    if (kernels_ != nullptr) FERRY_RETURN_IF_ERROR(kernels_->Prepare(init.device.index));
    for (size_t n = 0; n < main.nodes.size(); ++n) {
      const OpSchema& schema = *node_refs[n].schema;
      KernelFn kernel = schema.kernel;
      if (kernels_ != nullptr && kernel != nullptr) {
        kernel = kernels_->Find(schema.name);
        if (kernel == nullptr) {
          return absl::UnimplementedError(absl::StrCat(
              "sub-graph node ", n, " (", main.nodes[n].name, "): op \"", schema.name,
              "\" has no kernel for ", DeviceTypeName(init.device.type), " devices"));
        }
        const absl::Status dtypes = kernels_->CheckDTypes(
            schema.name, node_refs[n].args,
            absl::Span<const TensorRef* const>(node_refs[n].results.data(),
                                               node_refs[n].results.size()));
        if (!dtypes.ok()) {
          return absl::Status(dtypes.code(),
                              absl::StrCat("sub-graph node ", n, " (", main.nodes[n].name,
                                           ") on ", DeviceTypeName(init.device.type), ": ",
                                           dtypes.message()));
        }
      }
      tables_.Add(schema, node_refs[n].args, node_refs[n].results, pending_views[n], kernel);
    }
    tables_.Finalize();
    return absl::OkStatus();
  }

  absl::Status BindOutputCopies(const DelegateInit& init) {
    const OpRegistry& ops = *init.ops;
    if (!copied_outputs_.empty()) {
      const OpSchema* copy = ops.Find("copy_");
      if (copy == nullptr || copy->kernel == nullptr) {
        return absl::UnimplementedError(
            "the sub-graph returns a view, an input or a constant, which needs the op \"copy_\"");
      }
      copy_kernel_ = kernels_ != nullptr ? kernels_->Find("copy_") : copy->kernel;
      if (copy_kernel_ == nullptr) {
        return absl::UnimplementedError(absl::StrCat("op \"copy_\" has no kernel for ",
                                                     DeviceTypeName(init.device.type),
                                                     " devices"));
      }
      if (kernels_ != nullptr) {
        for (const auto& [ref, result] : copied_outputs_) {
          const OpArg arg{&refs_[ref], nullptr};
          const TensorRef* out = &refs_[ref];
          const absl::Status dtypes = kernels_->CheckDTypes(
              "copy_", absl::MakeConstSpan(&arg, 1), absl::Span<const TensorRef* const>(&out, 1));
          if (!dtypes.ok()) {
            return absl::Status(dtypes.code(),
                                absl::StrCat("sub-graph output ", result, " on ",
                                             DeviceTypeName(init.device.type), ": ",
                                             dtypes.message()));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  DeviceRuntime* device_runtime_ = nullptr;
  bool check_ownership_ = false;
  const DeviceKernels* kernels_ = nullptr;  // the device type's own kernels, if it needs them
  std::shared_ptr<const Program> program_;
  std::vector<TensorRef> refs_;  // per sub-graph value; never resized after Compile
  std::vector<ValueId> input_refs_;
  std::vector<int32_t> arg_of_input_;
  std::vector<std::pair<ValueId, size_t>> scratch_refs_;
  std::vector<std::pair<ValueId, int32_t>> bound_outputs_;
  std::vector<std::pair<ValueId, int32_t>> copied_outputs_;
  size_t scratch_bytes_ = 0;
  DelegateSignature signature_;
  std::shared_ptr<const internal::DeviceConstants> constants_;
  internal::HostStepTables tables_;
  KernelFn copy_kernel_ = nullptr;
  OpArg copy_args_[2];
};

GraphInstance::CompileState::CompileState(const MethodDef& main)
    : output_of(main.values.size(), -1),
      request_of(main.values.size(), -1),
      bound_as(main.values.size(), -1),
      last_use(main.values.size(), -1),
      alias_root(main.values.size()),
      input_of(main.values.size(), -1),
      pending_views(main.nodes.size()),
      node_refs(main.nodes.size()) {
  for (size_t o = 0; o < main.outputs.size(); ++o) {
    if (output_of[main.outputs[o]] < 0) output_of[main.outputs[o]] = static_cast<int32_t>(o);
  }
  for (size_t n = 0; n < main.nodes.size(); ++n) {
    for (ValueId a : main.nodes[n].args) last_use[a] = static_cast<int32_t>(n);
  }
  for (size_t v = 0; v < main.values.size(); ++v) alias_root[v] = static_cast<int32_t>(v);
  for (size_t i = 0; i < main.inputs.size(); ++i) {
    if (input_of[main.inputs[i]] < 0) input_of[main.inputs[i]] = static_cast<int32_t>(i);
  }
}

class GraphBackend : public Backend {
 public:
  absl::string_view name() const override { return kGraphBackendName; }
  bool SupportsDevice(DeviceType type) const override {
    const DeviceTypeInfo* info = FindDeviceType(type);
    return info != nullptr &&
           (info->host_kernels_run_on_memory || FindDeviceKernels(type) != nullptr);
  }
  absl::StatusOr<std::unique_ptr<DelegateInstance>> Init(const DelegateInit& init) const override {
    FERRY_ASSIGN_OR_RETURN(std::shared_ptr<const Program> program, cache_->Get(init.payload));
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<GraphInstance> instance,
                           GraphInstance::Create(init, std::move(program), *cache_));
    return std::unique_ptr<DelegateInstance>(std::move(instance));
  }

 private:
  std::shared_ptr<internal::GraphProgramCache> cache_ =
      std::make_shared<internal::GraphProgramCache>();
};

}  // namespace

namespace internal {

std::shared_ptr<GraphProgramCache> MakeGraphProgramCache() {
  return std::make_shared<GraphProgramCache>();
}

absl::StatusOr<std::unique_ptr<DelegateInstance>> InitGraphInstance(
    const DelegateInit& init, std::shared_ptr<const Program> program, GraphProgramCache& cache) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<GraphInstance> instance,
                         GraphInstance::Create(init, std::move(program), cache));
  return std::unique_ptr<DelegateInstance>(std::move(instance));
}

}  // namespace internal

std::unique_ptr<Backend> MakeGraphBackend() { return std::make_unique<GraphBackend>(); }

}  // namespace ferry
