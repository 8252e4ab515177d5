// ONNX Runtime as a peer to time Ferry against: the CPU library opened with dlopen, checked, and
// wrapped in the few owners the harness needs.
//
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<OrtPeer> ort,
//   OrtPeer::Open("/path/libonnxruntime.so.1"));
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<PeerSession> s, ort->CreateSession(model_bytes));
//   FERRY_ASSIGN_OR_RETURN(PeerValue x, ort->WrapFloats(data, {16}));
//
// Open returns NotFound when the library cannot be loaded (the peer is absent; the harness then
// reports nothing and succeeds), FailedPrecondition when it is older than 1.30 or the function
// table fails the checks described in ort_api.h. Other errors are Internal with ONNX Runtime's
// message. Sessions run single-threaded (one intra-op and one inter-op thread, sequential
// execution), graph optimizations at ONNX Runtime's default level (ORT_ENABLE_ALL).
//
// The OrtPeer must outlive its sessions and values. Not thread-safe.
#ifndef FERRY_BENCH_PEERS_ORT_PEER_H_
#define FERRY_BENCH_PEERS_ORT_PEER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bench/peers/ort_api.h"

namespace ferry::peers {

// Releases an OrtValue through the table it came from.
struct ValueReleaser {
  const OrtApiTable* api;
  void operator()(OrtValue* v) const { api->ReleaseValue(v); }
};
using PeerValue = std::unique_ptr<OrtValue, ValueReleaser>;

class OrtPeer;

class PeerSession {
 public:
  ~PeerSession();
  PeerSession(const PeerSession&) = delete;
  PeerSession& operator=(const PeerSession&) = delete;

  OrtSession* get() const { return session_; }

 private:
  friend class OrtPeer;
  PeerSession(const OrtApiTable* api, OrtSession* session) : api_(api), session_(session) {}
  const OrtApiTable* api_;
  OrtSession* session_;
};

class OrtPeer {
 public:
  static absl::StatusOr<std::unique_ptr<OrtPeer>> Open(const std::string& library_path);
  ~OrtPeer();
  OrtPeer(const OrtPeer&) = delete;
  OrtPeer& operator=(const OrtPeer&) = delete;

  const OrtApiTable& api() const { return api_; }
  const std::string& version() const { return version_; }

  // A session over a serialized ModelProto (copied by ONNX Runtime).
  absl::StatusOr<std::unique_ptr<PeerSession>> CreateSession(absl::Span<const uint8_t> model) const;
  // A float32 tensor over the caller's memory, which must outlive the value.
  absl::StatusOr<PeerValue> WrapFloats(float* data, absl::Span<const int64_t> dims) const;

  // CPU memory, for values made in timed loops with api().CreateTensorWithDataAsOrtValue.
  const OrtMemoryInfo* cpu() const { return cpu_; }

  // OK for a null status; otherwise Internal with the message (the status is released).
  absl::Status Check(OrtStatus* status, const char* what) const;

 private:
  OrtPeer(void* handle, OrtApiTable api, std::string version)
      : handle_(handle), api_(api), version_(std::move(version)) {}
  // The checks of ort_api.h, and the environment, options and memory info every session uses.
  absl::Status Init();

  void* handle_;
  OrtApiTable api_;
  std::string version_;
  OrtEnv* env_ = nullptr;
  OrtSessionOptions* options_ = nullptr;
  OrtMemoryInfo* cpu_ = nullptr;
};

}  // namespace ferry::peers

#endif  // FERRY_BENCH_PEERS_ORT_PEER_H_
