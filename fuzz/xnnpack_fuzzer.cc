// libFuzzer target: the input is the payload of an XNNPACK delegate call, read by
// ReadXnnpackPayload; every constant of an accepted graph is read whole and checked to lie inside
// the input, and every id a node names is a value of the graph. An accepted graph whose external
// values are small float32 tensors is then run end to end: the built-in XNNPACK backend's Init
// (the translation into Ferry's host ops) on the host with those tensors as the call's arguments
// and results, and, when it accepts the graph and its scratch is small, Execute on zeroed memory
// sized exactly. Seeds: the XNNPACK payloads of the programs in ../shared/pte, written by
// ferry_fuzz_make_seeds. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "ferry/fuzz/fuzz_driver.h"
#include "ferry/loader/executorch/xnnpack_reader.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/runtime.h"

namespace {

constexpr size_t kMaxExternalBytes = size_t{1} << 20;
constexpr size_t kMaxScratchBytes = size_t{64} << 20;

bool Inside(absl::Span<const uint8_t> span, const uint8_t* begin, size_t size) {
  return span.empty() || (span.data() >= begin && span.size() <= size &&
                          static_cast<size_t>(span.data() - begin) <= size - span.size());
}

// Runs the graph through the backend with its external values as the call's tensors.
void RunBackend(const ferry::XnnGraph& graph, absl::Span<const uint8_t> payload) {
  static const ferry::Runtime& runtime = ferry::fuzz::FuzzRuntime();
  static const std::unique_ptr<ferry::Backend> backend = ferry::MakeXnnpackBackend();
  // External value i by position: arguments first (flagged inputs), then results.
  std::vector<const ferry::XnnValue*> externals(graph.num_externs, nullptr);
  for (const ferry::XnnValue& v : graph.values) {
    if (v.flags != 0) externals[v.external_id] = &v;
  }
  size_t args = 0;
  while (args < externals.size() && externals[args] != nullptr &&
         (externals[args]->flags & ferry::kXnnExternalInput) != 0) {
    ++args;
  }
  ferry::DelegateInit init;
  init.node_name = "fuzz";
  init.payload = payload;
  init.device = ferry::Device::Host();
  init.device_runtime = const_cast<ferry::Runtime&>(runtime).devices().Find(init.device);
  init.ops = &runtime.ops();
  size_t total = 0;
  for (size_t i = 0; i < externals.size(); ++i) {
    const ferry::XnnValue* v = externals[i];
    if (v == nullptr || v->dtype != ferry::XnnDataType::kFloat32) return;
    ferry::TensorMeta meta{ferry::DType::kFloat32, {v->dims.begin(), v->dims.end()}, {}};
    const std::optional<size_t> bytes = meta.ByteSize();
    if (!bytes.has_value() || *bytes > kMaxExternalBytes - total) return;
    total += *bytes;
    (i < args ? init.args : init.results).push_back(meta.ToRef());
    if (i < args) init.scalar_args.push_back(nullptr);
  }
  absl::StatusOr<std::unique_ptr<ferry::DelegateInstance>> instance = backend->Init(init);
  if (!instance.ok() || (*instance)->scratch_bytes() > kMaxScratchBytes) return;
  std::vector<std::unique_ptr<uint64_t[]>> memory;
  std::vector<ferry::TensorRef> refs;
  refs.reserve(init.args.size() + init.results.size());
  for (const ferry::TensorRef& r : init.args) refs.push_back(r);
  for (const ferry::TensorRef& r : init.results) refs.push_back(r);
  std::vector<ferry::TensorRef*> arg_ptrs, result_ptrs;
  for (size_t i = 0; i < refs.size(); ++i) {
    memory.emplace_back(new uint64_t[(refs[i].nbytes() + 7) / 8 + 1]());
    refs[i].data = memory.back().get();
    (i < init.args.size() ? arg_ptrs : result_ptrs).push_back(&refs[i]);
  }
  std::unique_ptr<uint64_t[]> scratch(new uint64_t[(*instance)->scratch_bytes() / 8 + 1]());
  (void)(*instance)->Execute(arg_ptrs, result_ptrs, scratch.get());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ferry::fuzz::kMaxProgramBytes) return 0;
  // A buffer of exactly `size` bytes, so that reading past the input faults.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  const absl::Span<const uint8_t> payload(copy.get(), size);
  absl::StatusOr<ferry::XnnGraph> graph = ferry::ReadXnnpackPayload(payload, nullptr);
  if (!graph.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const ferry::XnnValue& v : graph->values) {
    if (v.is_constant) {
      const bool in_storage =
          !graph->storage.empty() &&
          Inside(v.data, reinterpret_cast<const uint8_t*>(graph->storage.data()),
                 graph->storage.size() * 8);
      if (!Inside(v.data, copy.get(), size) && !in_storage) std::abort();
      for (uint8_t b : v.data) sink = sink ^ b;
    }
  }
  for (const ferry::XnnNode& n : graph->nodes) {
    for (uint32_t id : n.inputs) {
      if (id != ferry::kXnnNoValue && graph->value(id) == nullptr) std::abort();
    }
    for (uint32_t id : n.outputs) {
      if (graph->value(id) == nullptr) std::abort();
    }
  }
  RunBackend(*graph, payload);
  return 0;
}
