// memcpy of large buffers split across threads: the calling thread and helpers started once, when
// the copier is made. One thread's memcpy moves about 10-20 GB/s on common servers, well below what
// a DMA engine takes from pinned memory; a CUDA device stages pageable copies through pinned
// chunks with one of these, so its staging keeps up with the DMA.
//
//   ParallelMemcpy copier(4);                 // the caller and 3 helpers
//   copier.Copy(dst, src, 4 << 20);           // four 1 MiB parts at once; returns when all landed
//
// Copy() splits `bytes` into at most threads() parts of at least kMinPartBytes each (a smaller copy
// runs on the calling thread alone), hands one part to each helper and copies the first itself,
// then waits for the helpers. Helpers spin briefly for the next copy (back-to-back chunks of one
// large copy wake them without a system call) and then sleep on an atomic wait. Copy() neither
// allocates nor fails. The destructor stops and joins the helpers.
//
// Thread safety: Copy() from one thread at a time (the device that owns the copier is used by one
// thread at a time).
#ifndef FERRY_MEMORY_PARALLEL_MEMCPY_H_
#define FERRY_MEMORY_PARALLEL_MEMCPY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace ferry {

class ParallelMemcpy {
 public:
  // The smallest part a helper is given: below it, waking a thread costs more than it saves.
  static constexpr size_t kMinPartBytes = size_t{256} << 10;
  // The most threads one copier uses.
  static constexpr int kMaxThreads = 16;

  // `threads` in all, the caller included, clamped to [1, kMaxThreads]; 1 starts no thread. When
  // the system refuses a thread, the copier works with those it has (threads() says how many).
  explicit ParallelMemcpy(int threads);
  ~ParallelMemcpy();
  ParallelMemcpy(const ParallelMemcpy&) = delete;
  ParallelMemcpy& operator=(const ParallelMemcpy&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }
  // How many parts Copy() splits `bytes` into.
  int PartsFor(size_t bytes) const;
  // Copies `bytes` from `src` to `dst` (which must not overlap), as memcpy does.
  void Copy(void* dst, const void* src, size_t bytes);

  // The default thread count for staging copies: half the machine's hardware threads, at least 1
  // and at most 4.
  static int DefaultThreads();

 private:
  void Help(int index);
  // Part `part` of `parts` of the current job.
  void CopyPart(int part, int parts);

  // The job, written by Copy() before `generation_` is bumped and read by helpers after they see
  // the new generation.
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  size_t bytes_ = 0;
  int parts_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> remaining_{0};  // helper parts not yet copied
  std::atomic<bool> stop_{false};
  std::vector<std::thread> helpers_;
};

}  // namespace ferry

#endif  // FERRY_MEMORY_PARALLEL_MEMCPY_H_
