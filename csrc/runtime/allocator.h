// Per-core caching allocator, modelled on PyTorch's CUDA caching allocator but
// simpler: memory comes from the host in segments (mmap), segments are carved
// into blocks, and freed blocks are cached per stream for reuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "ipc_arena.h"
#include "openneuron/ipc.h"
#include "openneuron/runtime.h"

namespace openneuron::runtime {

class Stream;

class CachingAllocator {
 public:
  static constexpr size_t kMinBlockSize = 512;       // every size is a multiple of this
  static constexpr size_t kSmallSize = 1 << 20;      // requests below go to the small pool
  static constexpr size_t kSmallSegment = 2 << 20;   // small-pool segment size
  static constexpr size_t kMidSize = 10 << 20;       // up to here, large requests share...
  static constexpr size_t kLargeSegment = 20 << 20;  // ...segments of this size
  static constexpr size_t kRoundLarge = 2 << 20;     // other large segments round to this
  static constexpr size_t kPowerOfTwoClassesUpTo = 16 << 20;

  // `device` only names the core in messages; `capacity` limits reserved bytes.
  CachingAllocator(int device, uint64_t capacity);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Block size actually handed out for a request.
  static size_t round_size(size_t bytes);
  // Size of the segment obtained from the host for a block of `rounded` bytes
  // requested as `bytes`.
  static size_t segment_size(size_t bytes, size_t rounded);

  onrt_status malloc(size_t bytes, Stream* stream, void** out);
  onrt_status free(void* ptr);
  onrt_status record_stream(const void* ptr, Stream* stream);
  // Whether [ptr, ptr + bytes) lies inside one live block.
  bool contains(const void* ptr, size_t bytes);
  void empty_cache();
  // Segments created from now on come from a shareable arena (openneuron/ipc.h).
  onrt_status enable_ipc();
  // The arena's handle at `ptr` (offset 0 for nullptr); false when `ptr` is not
  // in the arena or sharing is not enabled.
  bool ipc_handle(const void* ptr, onrt_ipc_handle* out);

  onrt_memory_stats stats();
  std::vector<onrt_segment_info> snapshot(std::vector<std::vector<onrt_block_info>>* blocks);
  void reset_peak();
  void reset_accumulated();
  int device() const { return device_; }
  uint64_t capacity() const { return capacity_; }
  uint64_t reserved();

  // The allocator owning the segment around `ptr`, or nullptr. Lets
  // onrt_free find the right core without locking every allocator.
  static CachingAllocator* owner_of(const void* ptr);

 private:
  enum class State : uint8_t { kAllocated, kPendingFree, kFree };
  struct Block {
    Block(char* p, size_t s, Stream* st, int pl) : ptr(p), size(s), stream(st), pool(pl) {}
    char* ptr;
    size_t size;
    size_t requested = 0;
    Stream* stream;
    int pool;  // ONRT_POOL_SMALL or ONRT_POOL_LARGE
    State state = State::kFree;
    Block* prev = nullptr;  // neighbours inside the segment
    Block* next = nullptr;
    std::vector<Stream*> stream_uses;  // streams other than `stream` using it
    // Position of `stream` when the block was last freed: work queued before
    // it may still touch the memory, so the segment must not be unmapped
    // until the stream has passed it.
    uint64_t free_seq = 0;
    bool is_split() const { return prev != nullptr || next != nullptr; }
  };
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  struct PendingFree {
    Block* block;
    std::vector<std::pair<Stream*, uint64_t>> marks;  // stream positions to reach
  };

  Block* find_free_block(int pool, Stream* stream, size_t size);
  bool new_segment(int pool, size_t size, Stream* stream, Block** out);
  void take_block(Block* block, size_t size, size_t requested);
  void free_block(Block* block);
  void release_cached_segments();
  void unmap_segment(void* base, size_t size);
  // Stream positions that fully free segments still wait for.
  std::vector<std::pair<Stream*, uint64_t>> unreached_cached_segments();
  // release_cached_segments(), then waits (without mu_) for the streams of
  // free segments that still have work queued from before their free and
  // releases those too.
  void release_cached_segments_waiting(std::unique_lock<std::mutex>& lock);
  void process_pending_frees();
  Block* live_block_containing(const void* ptr);
  void free_set_add(Block* b);
  void free_set_remove(Block* b);
  void update(onrt_stat (&stat)[ONRT_POOL_COUNT], int pool, int64_t delta);
  // Tells the memory observer (onrt_memory_set_observer), if any; under mu_.
  void notify(onrt_memory_action action, const void* address, size_t size, size_t requested,
              const Stream* stream);

  const int device_;
  const uint64_t capacity_;
  std::mutex mu_;
  std::set<Block*, BlockLess> free_blocks_[ONRT_POOL_COUNT];  // indexed by pool
  std::map<uintptr_t, Block*> live_;                          // allocated blocks by address
  std::map<uintptr_t, Block*> segments_;                      // first block of each segment
  std::vector<PendingFree> pending_;
  std::unique_ptr<IpcArena> arena_;  // once sharing is enabled
  onrt_memory_stats stats_{};
};

// The process-wide memory observer (onrt_memory_set_observer).
void set_memory_observer(onrt_memory_observer fn, void* user);

}  // namespace openneuron::runtime
