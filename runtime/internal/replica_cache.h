// What the methods of one loaded program (Runtime::LoadProgram) share: constant replicas and
// shared states.
//
// Constant replicas:
// A replica is identified by what it is made from (the program data it reads, through which view)
// and what it is (device, layout, bytes): two methods reading one constant on one device in one
// layout share one replica. Constants are never written after load, so sharing is safe.
//
// Ownership: methods hold their replicas (shared_ptr, aliasing the constant region they were made
// in); the cache only remembers them (weak_ptr), so a replica is freed with the last method that
// holds it. Thread safety: every member may run on any thread.
#ifndef FERRY_RUNTIME_INTERNAL_REPLICA_CACHE_H_
#define FERRY_RUNTIME_INTERNAL_REPLICA_CACHE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ferry/base/tensor.h"
#include "ferry/memory/device.h"
#include "ferry/memory/device_buffer.h"

namespace ferry::internal {

struct ReplicaKey {
  const void* source = nullptr;  // the program data it is made from (view offset applied)
  DType dtype = DType::kFloat32;
  int32_t rank = 0;
  std::array<int64_t, kMaxRank> sizes{};    // the source view
  std::array<int64_t, kMaxRank> strides{};
  Device device;
  std::vector<int32_t> dim_order;  // the replica's layout
  size_t bytes = 0;
  bool converts = false;

  friend bool operator==(const ReplicaKey&, const ReplicaKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ReplicaKey& k) {
    return H::combine(std::move(h), k.source, static_cast<int>(k.dtype), k.rank, k.sizes,
                      k.strides, k.device, k.dim_order, k.bytes, k.converts);
  }
};

class ReplicaCache {
 public:
  // The live replica for `key`; nullptr when no method holds one.
  std::shared_ptr<void> Find(const ReplicaKey& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = replicas_.find(key);
    return it == replicas_.end() ? nullptr : it->second.lock();
  }
  // Remembers `replica` for `key` (replacing an expired entry).
  void Add(const ReplicaKey& key, const std::shared_ptr<void>& replica) {
    std::lock_guard<std::mutex> lock(mu_);
    replicas_[key] = replica;
  }
  // Bytes of live replicas per device, sorted by device.
  std::vector<std::pair<Device, size_t>> LiveBytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<Device, size_t> bytes;
    for (const auto& [key, replica] : replicas_) {
      if (!replica.expired()) bytes[key.device] += key.bytes;
    }
    return {bytes.begin(), bytes.end()};
  }

 private:
  mutable std::mutex mu_;
  absl::flat_hash_map<ReplicaKey, std::weak_ptr<void>> replicas_;
};

// The shared states of one loaded program (ValueDef::shared), by name: one buffer, one home
// device, one content for every method that has a shared state of that name. A state is made
// (and its initial data copied in) by the first method loaded that has it, and freed with the last
// method that holds it. Methods that share a state must not run at the same time.
struct SharedState {
  std::string method;  // the method that made it
  Device device;
  DType dtype = DType::kFloat32;
  TensorSizes sizes;
  std::vector<int32_t> dim_order;
  size_t bytes = 0;
  DeviceBuffer buffer;
};

class SharedStates {
 public:
  std::shared_ptr<SharedState> Find(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = states_.find(name);
    return it == states_.end() ? nullptr : it->second.lock();
  }
  void Add(const std::string& name, const std::shared_ptr<SharedState>& state) {
    std::lock_guard<std::mutex> lock(mu_);
    states_[name] = state;
  }
  // Bytes of live shared states per device, sorted by device.
  std::vector<std::pair<Device, size_t>> LiveBytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<Device, size_t> bytes;
    for (const auto& [name, state] : states_) {
      if (std::shared_ptr<SharedState> s = state.lock()) bytes[s->device] += s->bytes;
    }
    return {bytes.begin(), bytes.end()};
  }

 private:
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::weak_ptr<SharedState>> states_;
};

// What the methods of one loaded program share.
struct ProgramResidency {
  ReplicaCache replicas;
  SharedStates states;
};

}  // namespace ferry::internal

#endif  // FERRY_RUNTIME_INTERNAL_REPLICA_CACHE_H_
