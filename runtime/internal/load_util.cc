#include "ferry/runtime/internal/load_util.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ferry/memory/status_macros.h"

namespace ferry {
namespace internal {
namespace {

// Load-time copies of program data run in pieces of this size, so that the program's pages
// resident in the process stay bounded however large a constant is.
constexpr size_t kLoadChunkBytes = size_t{16} << 20;

// madvise over the whole pages inside [data, data + bytes); a hint, never an error.
void AdvisePages(const void* data, size_t bytes, int advice) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(page - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

// Maps the source pages of a piece in one call instead of one fault per page.
void PrefetchPages(const void* data, size_t bytes) {
#ifdef MADV_POPULATE_READ
  AdvisePages(data, bytes, MADV_POPULATE_READ);
#else
  AdvisePages(data, bytes, MADV_WILLNEED);
#endif
}

}  // namespace

absl::Status RunLoadCopy(const CopyExec& c, bool mapped_file) {
  const char* src = static_cast<const char*>(c.src->data);
  char* dst = static_cast<char*>(c.dst->data);
  const bool dense = !c.strided && (c.direction == CopyDirection::kHostToDevice ||
                                    c.direction == CopyDirection::kHostToHost);
  if (!dense || c.bytes <= kLoadChunkBytes) {
    if (mapped_file) PrefetchPages(src, c.bytes);
    FERRY_RETURN_IF_ERROR(RunCopy(c));
    FERRY_RETURN_IF_ERROR(c.dst_runtime->Synchronize());
    if (mapped_file) AdvisePages(src, c.bytes, MADV_DONTNEED);
    return absl::OkStatus();
  }
  for (size_t done = 0; done < c.bytes; done += kLoadChunkBytes) {
    const size_t n = std::min(kLoadChunkBytes, c.bytes - done);
    if (mapped_file) PrefetchPages(src + done, n);
    if (c.direction == CopyDirection::kHostToHost) {
      std::memcpy(dst + done, src + done, n);
    } else {
      FERRY_RETURN_IF_ERROR(c.dst_runtime->CopyHostToDevice(dst + done, src + done, n));
      // The source must have been read before its pages are dropped.
      FERRY_RETURN_IF_ERROR(c.dst_runtime->Synchronize());
    }
    if (mapped_file) AdvisePages(src + done, n, MADV_DONTNEED);
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

std::string FormatBytes(size_t n) {
  if (n >= (size_t{1} << 40)) return absl::StrFormat("%.2f TiB", n / 1099511627776.0);
  if (n >= (size_t{1} << 30)) return absl::StrFormat("%.2f GiB", n / 1073741824.0);
  if (n >= (size_t{1} << 20)) return absl::StrFormat("%.1f MiB", n / 1048576.0);
  if (n >= 4096) return absl::StrFormat("%.1f KiB", n / 1024.0);
  return absl::StrCat(n, " B");
}

}  // namespace internal
}  // namespace ferry
