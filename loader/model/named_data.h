// Data a program keeps by name for its delegates: ExecuTorch's named data (the program's
// `named_data` entries, and the entries of its data file, .ptd), which a delegate's payload refers
// to by key instead of carrying the bytes itself (XNNPACK's weights, for one).
//
// Ownership: an entry added as a view points into the program's bytes and lives as long as the
// Program; an entry added as a copy is owned here. The bytes are unaligned as far as a reader
// knows: copy them, or use memcpy, before reading elements.
// Thread safety: immutable once the Program is built; safe to share between threads.
#ifndef FERRY_LOADER_MODEL_NAMED_DATA_H_
#define FERRY_LOADER_MODEL_NAMED_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ferry {

class NamedData {
 public:
  // `bytes` outlive this object. A key already present keeps its first entry; returns whether
  // this one was added.
  bool AddView(absl::string_view key, absl::Span<const uint8_t> bytes) {
    return entries_.try_emplace(key, bytes).second;
  }
  // The same for bytes that do not outlive the call: they are copied.
  bool AddCopy(absl::string_view key, absl::Span<const uint8_t> bytes) {
    if (entries_.contains(key)) return false;
    owned_.push_back(std::make_unique<std::vector<uint8_t>>(bytes.begin(), bytes.end()));
    entries_.emplace(key, absl::MakeConstSpan(*owned_.back()));
    return true;
  }
  // The entry named `key`, or nullptr.
  const absl::Span<const uint8_t>* Find(absl::string_view key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
  }
  size_t size() const { return entries_.size(); }

 private:
  absl::flat_hash_map<std::string, absl::Span<const uint8_t>> entries_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;
};

}  // namespace ferry

#endif  // FERRY_LOADER_MODEL_NAMED_DATA_H_
