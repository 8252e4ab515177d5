#include "ferry/runtime/internal/load_util.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/program_mapping.h"

namespace ferry {
namespace internal {
namespace {

// Load-time copies of program data run in pieces of this size, so that the program's pages
// resident in the process stay bounded however large a constant is.
constexpr size_t kLoadChunkBytes = size_t{16} << 20;

}  // namespace

absl::Status RunLoadCopy(const CopyExec& c, const ProgramMapping* mapping) {
  const char* src = static_cast<const char*>(c.src->data);
  char* dst = static_cast<char*>(c.dst->data);
  const bool dense = !c.strided && (c.direction == CopyDirection::kHostToDevice ||
                                    c.direction == CopyDirection::kHostToHost);
  if (!dense || c.bytes <= kLoadChunkBytes) {
    if (mapping != nullptr) mapping->WillRead(src, c.bytes);
    FERRY_RETURN_IF_ERROR(RunCopy(c));
    FERRY_RETURN_IF_ERROR(c.dst_runtime->Synchronize());
    if (mapping != nullptr) mapping->DoneReading(src, c.bytes);
    return absl::OkStatus();
  }
  for (size_t done = 0; done < c.bytes; done += kLoadChunkBytes) {
    const size_t n = std::min(kLoadChunkBytes, c.bytes - done);
    if (mapping != nullptr) mapping->WillRead(src + done, n);
    if (c.direction == CopyDirection::kHostToHost) {
      std::memcpy(dst + done, src + done, n);
    } else {
      FERRY_RETURN_IF_ERROR(c.dst_runtime->CopyHostToDevice(dst + done, src + done, n));
      // The source must have been read before its pages are dropped.
      FERRY_RETURN_IF_ERROR(c.dst_runtime->Synchronize());
    }
    if (mapping != nullptr) mapping->DoneReading(src + done, n);
  }
  return absl::OkStatus();
}

std::string DeviceLabel(const Device& device, const absl::flat_hash_map<Device, Device>& map) {
  std::vector<Device> declared;
  for (const auto& [from, to] : map) {
    if (to == device && from != device) declared.push_back(from);
  }
  if (declared.empty()) return device.ToString();
  std::sort(declared.begin(), declared.end());
  return absl::StrCat(declared.front().ToString(), " (as ", device.ToString(), ")");
}

size_t LoadTableBytes(const MethodDef& m) {
  // Entries of all argument and result lists, and bytes of all payloads: each is bounded by the
  // program's size, so the sums fit in size_t.
  size_t entries = 0, payload = 0;
  for (const NodeDef& node : m.nodes) {
    entries += node.args.size() + node.results.size();
    payload += node.delegate().payload.size();  // a host op's is empty
  }
  return LoadTableBytes(m.values.size(), m.nodes.size(), entries, payload);
}

size_t LoadTableBytes(size_t values, size_t nodes, size_t list_entries, size_t payload_bytes) {
  size_t value_bytes = 0, node_bytes = 0, lists = 0, payloads = 0, total = 0;
  if (__builtin_mul_overflow(values, kLoadTableBytesPerValue, &value_bytes) ||
      __builtin_mul_overflow(nodes, kLoadTableBytesPerNode, &node_bytes) ||
      __builtin_mul_overflow(list_entries, kLoadTableBytesPerArgument, &lists) ||
      __builtin_mul_overflow(payload_bytes, kLoadTableBytesPerPayloadByte, &payloads) ||
      __builtin_add_overflow(value_bytes, node_bytes, &total) ||
      __builtin_add_overflow(total, lists, &total) ||
      __builtin_add_overflow(total, payloads, &total)) {
    return SIZE_MAX;
  }
  return total;
}

ValueLayout LayoutOf(const TensorRef& ref) {
  ValueLayout layout;
  const absl::Span<const int64_t> sizes(ref.sizes.data(), ref.rank);
  const absl::Span<const int64_t> strides(ref.strides.data(), ref.rank);
  if (ref.IsContiguous()) return layout;  // dense, row-major: nothing to store
  layout.dense = IsDenseLayout(sizes, strides, &layout.dim_order);
  if (layout.dense) {
    layout.dim_order = CanonicalDimOrder(std::move(layout.dim_order));
  } else {
    layout.dim_order.clear();
    layout.strides.assign(strides.begin(), strides.end());
  }
  return layout;
}

std::string SpecString(DType dtype, absl::Span<const int64_t> sizes) {
  return absl::StrCat(DTypeName(dtype), "[", absl::StrJoin(sizes, ", "), "]");
}

}  // namespace internal
}  // namespace ferry
