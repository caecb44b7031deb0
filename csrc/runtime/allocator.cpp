// The per-core caching allocator (allocator.h): segments, block splitting and
// merging, per-stream free lists, record_stream, statistics, and the registry
// mapping a device pointer to its core.
#include "allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "protect.h"
#include "status.h"
#include "stream.h"

namespace openneuron::runtime {
namespace {

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Requests beyond this are rejected before any arithmetic could overflow.
constexpr size_t kMaxRequest = size_t{1} << 60;
constexpr size_t kHugePage = size_t{2} << 20;

// Segment address ranges of every allocator, so a bare pointer leads to its
// allocator with one shared lock. Intentionally leaked: allocators may outlive
// static destruction order.
struct SegmentRegistry {
  std::shared_mutex mu;
  std::map<uintptr_t, std::pair<uintptr_t, CachingAllocator*>> ranges;  // base -> (end, owner)
};

SegmentRegistry& registry() {
  static SegmentRegistry* r = new SegmentRegistry;
  return *r;
}

void register_segment(void* base, size_t size, CachingAllocator* owner) {
  auto& r = registry();
  std::unique_lock lock(r.mu);
  auto b = reinterpret_cast<uintptr_t>(base);
  r.ranges[b] = {b + size, owner};
}

void unregister_segment(void* base) {
  auto& r = registry();
  std::unique_lock lock(r.mu);
  r.ranges.erase(reinterpret_cast<uintptr_t>(base));
}

template <typename F>
void for_each_stat_array(onrt_memory_stats& s, F f) {
  f(s.allocation);
  f(s.segment);
  f(s.active);
  f(s.inactive_split);
  f(s.allocated_bytes);
  f(s.reserved_bytes);
  f(s.active_bytes);
  f(s.inactive_split_bytes);
  f(s.requested_bytes);
}

struct Observer {
  onrt_memory_observer fn;
  void* user;
};
// Swapped whole, so a reader never pairs one observer's function with
// another's user pointer. Readers are under some allocator's lock, not a
// shared one, so a replaced observer is never freed (a few bytes per set);
// it stays listed here so leak checkers see it as reachable.
// Function-local: observers are set from other libraries' static initialisers.
std::atomic<const Observer*> observer{nullptr};
struct Observers {
  std::mutex mu;
  std::vector<std::unique_ptr<const Observer>> ever;
};
Observers& observers() {
  static Observers* o = new Observers;  // never destroyed: workers may notify during exit
  return *o;
}

}  // namespace

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return std::less<Stream*>()(a->stream, b->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

CachingAllocator::CachingAllocator(int device, uint64_t capacity)
    : device_(device), capacity_(capacity) {
  stats_.max_split_size = -1;
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [base, head] : segments_) {
    size_t size = 0;
    Block* b = head;
    while (b != nullptr) {
      Block* next = b->next;
      size += b->size;
      delete b;
      b = next;
    }
    unregister_segment(reinterpret_cast<void*>(base));
    unmap_segment(reinterpret_cast<void*>(base), size);
  }
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes <= kMinBlockSize) return kMinBlockSize;
  if (bytes < kSmallSize || bytes >= kPowerOfTwoClassesUpTo) return round_up(bytes, kMinBlockSize);
  // Four classes per power of two: bounded waste (< 25%) while making freed
  // mid-size blocks far more likely to fit the next request.
  const size_t step = std::bit_floor(bytes) / 4;
  return round_up(bytes, step);
}

size_t CachingAllocator::segment_size(size_t bytes, size_t rounded) {
  if (bytes < kSmallSize) return kSmallSegment;
  if (rounded <= kMidSize) return kLargeSegment;
  return round_up(rounded, kRoundLarge);
}

void CachingAllocator::update(onrt_stat (&stat)[ONRT_POOL_COUNT], int pool, int64_t delta) {
  for (int idx : {static_cast<int>(ONRT_POOL_ALL), pool}) {
    onrt_stat& s = stat[idx];
    s.current += delta;
    s.peak = std::max(s.peak, s.current);
    if (delta > 0) {
      s.allocated += delta;
    } else {
      s.freed -= delta;
    }
  }
}

void set_memory_observer(onrt_memory_observer fn, void* user) {
  const Observer* next = nullptr;
  if (fn != nullptr) {
    Observers& all = observers();
    std::lock_guard lock(all.mu);
    next = all.ever.emplace_back(new Observer{fn, user}).get();
  }
  observer.store(next, std::memory_order_release);
}

void CachingAllocator::notify(onrt_memory_action action, const void* address, size_t size,
                              size_t requested, const Stream* stream) {
  const Observer* o = observer.load(std::memory_order_acquire);
  if (o == nullptr || o->fn == nullptr) return;
  onrt_memory_event e{};
  e.action = action;
  e.device = device_;
  e.address = reinterpret_cast<uintptr_t>(address);
  e.size = size;
  e.requested = requested;
  e.stream = stream ? stream->id() : 0;
  e.allocated_bytes = stats_.allocated_bytes[ONRT_POOL_ALL].current;
  e.reserved_bytes = stats_.reserved_bytes[ONRT_POOL_ALL].current;
  o->fn(&e, o->user);
}

void CachingAllocator::free_set_add(Block* b) {
  b->state = State::kFree;
  free_blocks_[b->pool].insert(b);
  if (b->is_split()) {
    update(stats_.inactive_split, b->pool, 1);
    update(stats_.inactive_split_bytes, b->pool, static_cast<int64_t>(b->size));
  }
}

void CachingAllocator::free_set_remove(Block* b) {
  free_blocks_[b->pool].erase(b);
  if (b->is_split()) {
    update(stats_.inactive_split, b->pool, -1);
    update(stats_.inactive_split_bytes, b->pool, -static_cast<int64_t>(b->size));
  }
}

CachingAllocator::Block* CachingAllocator::find_free_block(int pool, Stream* stream, size_t size) {
  Block key(nullptr, size, stream, pool);
  auto& set = free_blocks_[pool];
  auto it = set.lower_bound(&key);
  if (it == set.end() || (*it)->stream != stream) return nullptr;
  return *it;
}

bool CachingAllocator::new_segment(int pool, size_t size, Stream* stream, Block** out) {
  // Lazily backed: reserving capacity costs nothing until pages are touched.
  void* base = arena_ ? arena_->map_segment(size) : nullptr;
  if (base == nullptr) {
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                -1, 0);
    if (base == MAP_FAILED) return false;
  }
  protect_device_range(base, size);
  if (size >= kHugePage) madvise(base, size, MADV_HUGEPAGE);
  auto* b = new Block(static_cast<char*>(base), size, stream, pool);
  segments_[reinterpret_cast<uintptr_t>(base)] = b;
  register_segment(base, size, this);
  update(stats_.segment, pool, 1);
  update(stats_.reserved_bytes, pool, static_cast<int64_t>(size));
  ++stats_.num_device_alloc;
  notify(ONRT_MEMORY_SEGMENT_ALLOC, base, size, size, stream);
  free_set_add(b);
  *out = b;
  return true;
}

void CachingAllocator::take_block(Block* b, size_t size, size_t requested) {
  free_set_remove(b);
  const size_t remaining = b->size - size;
  const bool split =
      b->pool == ONRT_POOL_SMALL ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (split) {
    auto* rest = new Block(b->ptr + size, remaining, b->stream, b->pool);
    rest->free_seq = b->free_seq;
    rest->prev = b;
    rest->next = b->next;
    if (b->next != nullptr) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    free_set_add(rest);
  }
  b->state = State::kAllocated;
  b->requested = requested;
  live_[reinterpret_cast<uintptr_t>(b->ptr)] = b;
  update(stats_.allocation, b->pool, 1);
  update(stats_.allocated_bytes, b->pool, static_cast<int64_t>(b->size));
  update(stats_.active, b->pool, 1);
  update(stats_.active_bytes, b->pool, static_cast<int64_t>(b->size));
  update(stats_.requested_bytes, b->pool, static_cast<int64_t>(requested));
  notify(ONRT_MEMORY_ALLOC, b->ptr, b->size, requested, b->stream);
}

// Merges always keep the lower-addressed block, so a segment's first block
// (the key of segments_) lives as long as the segment.
void CachingAllocator::free_block(Block* b) {
  notify(ONRT_MEMORY_FREE_COMPLETED, b->ptr, b->size, b->requested, b->stream);
  update(stats_.active, b->pool, -1);
  update(stats_.active_bytes, b->pool, -static_cast<int64_t>(b->size));
  b->stream_uses.clear();
  if (Block* n = b->next; n != nullptr && n->state == State::kFree) {
    free_set_remove(n);
    b->size += n->size;
    b->free_seq = std::max(b->free_seq, n->free_seq);
    b->next = n->next;
    if (b->next != nullptr) b->next->prev = b;
    delete n;
  }
  if (Block* p = b->prev; p != nullptr && p->state == State::kFree) {
    free_set_remove(p);
    p->size += b->size;
    p->free_seq = std::max(p->free_seq, b->free_seq);
    p->next = b->next;
    if (p->next != nullptr) p->next->prev = p;
    delete b;
    b = p;
  }
  free_set_add(b);
}

void CachingAllocator::release_cached_segments() {
  for (auto it = segments_.begin(); it != segments_.end();) {
    Block* head = it->second;
    if (head->state != State::kFree || head->next != nullptr ||
        !head->stream->reached(head->free_seq)) {
      ++it;
      continue;
    }
    free_set_remove(head);
    unregister_segment(head->ptr);
    unmap_segment(head->ptr, head->size);
    update(stats_.segment, head->pool, -1);
    update(stats_.reserved_bytes, head->pool, -static_cast<int64_t>(head->size));
    ++stats_.num_device_free;
    notify(ONRT_MEMORY_SEGMENT_FREE, head->ptr, head->size, head->size, head->stream);
    delete head;
    it = segments_.erase(it);
  }
}

void CachingAllocator::unmap_segment(void* base, size_t size) {
  if (arena_ && arena_->contains(base)) {
    arena_->unmap_segment(base, size);
  } else {
    munmap(base, size);
  }
}

onrt_status CachingAllocator::enable_ipc() {
  std::lock_guard<std::mutex> lock(mu_);
  if (arena_) return ONRT_OK;
  // Address space, not memory: room for the capacity several times over, so
  // fragmentation of the range rarely sends a segment to private memory.
  constexpr uint64_t kMin = uint64_t{1} << 30, kMax = uint64_t{1} << 40;
  const uint64_t bytes = round_up(std::clamp(std::min(capacity_, kMax) * 4, kMin, kMax), kHugePage);
  std::string error;
  arena_ = IpcArena::create(device_, bytes, &error);
  if (!arena_) {
    return failf(ONRT_ERROR_UNSUPPORTED, "neuron:%d: shareable device memory unavailable: %s",
                 device_, error.c_str());
  }
  return ONRT_OK;
}

bool CachingAllocator::ipc_handle(const void* ptr, onrt_ipc_handle* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!arena_ || (ptr != nullptr && !arena_->contains(ptr))) return false;
  out->pid = static_cast<int32_t>(getpid());
  out->fd = arena_->fd();
  out->inode = arena_->inode();
  out->dev = arena_->dev();
  out->bytes = arena_->bytes();
  out->offset = ptr == nullptr ? 0 : arena_->offset_of(ptr);
  return true;
}

std::vector<std::pair<Stream*, uint64_t>> CachingAllocator::unreached_cached_segments() {
  std::vector<std::pair<Stream*, uint64_t>> out;
  for (auto& [base, head] : segments_) {
    if (head->state == State::kFree && head->next == nullptr &&
        !head->stream->reached(head->free_seq)) {
      out.emplace_back(head->stream, head->free_seq);
    }
  }
  return out;
}

void CachingAllocator::release_cached_segments_waiting(std::unique_lock<std::mutex>& lock) {
  release_cached_segments();
  auto waits = unreached_cached_segments();
  if (waits.empty()) return;
  // Not under mu_: the work being waited for may itself use the allocator.
  lock.unlock();
  for (auto& [stream, seq] : waits) stream->wait_until(seq);
  lock.lock();
  process_pending_frees();
  release_cached_segments();
}

void CachingAllocator::process_pending_frees() {
  if (pending_.empty()) return;
  auto done = [](const PendingFree& p) {
    return std::all_of(p.marks.begin(), p.marks.end(),
                       [](const auto& m) { return m.first->reached(m.second); });
  };
  auto keep = std::partition(pending_.begin(), pending_.end(),
                             [&](const PendingFree& p) { return !done(p); });
  for (auto it = keep; it != pending_.end(); ++it) free_block(it->block);
  pending_.erase(keep, pending_.end());
}

onrt_status CachingAllocator::malloc(size_t bytes, Stream* stream, void** out) {
  *out = nullptr;
  if (bytes == 0) return ONRT_OK;
  std::unique_lock<std::mutex> lock(mu_);
  process_pending_frees();
  const size_t size = round_size(std::min(bytes, kMaxRequest));
  const int pool = bytes < kSmallSize ? ONRT_POOL_SMALL : ONRT_POOL_LARGE;
  Block* b = bytes > kMaxRequest ? nullptr : find_free_block(pool, stream, size);
  if (b == nullptr && bytes <= kMaxRequest) {
    size_t seg = segment_size(bytes, size);
    auto fits = [&](size_t s) {
      return static_cast<uint64_t>(stats_.reserved_bytes[ONRT_POOL_ALL].current) + s <= capacity_;
    };
    if (!fits(seg)) {
      const int64_t before = stats_.num_device_free;
      release_cached_segments();
      // Waiting for streams is worth it only when idle segments were not enough.
      if (!fits(seg)) release_cached_segments_waiting(lock);
      if (stats_.num_device_free != before) ++stats_.num_alloc_retries;
    }
    // Near capacity, a shared 20 MiB segment may not fit where an exact one does.
    if (!fits(seg) && pool == ONRT_POOL_LARGE) seg = round_up(size, kRoundLarge);
    if (fits(seg)) new_segment(pool, seg, stream, &b);
  }
  if (b == nullptr) {
    ++stats_.num_ooms;
    const uint64_t reserved = stats_.reserved_bytes[ONRT_POOL_ALL].current;
    return failf(ONRT_ERROR_OUT_OF_MEMORY,
                 "neuron:%d out of memory: tried to allocate %s; %s allocated, %s reserved, "
                 "capacity %s (%s free)",
                 device_, format_size(bytes).c_str(),
                 format_size(stats_.allocated_bytes[ONRT_POOL_ALL].current).c_str(),
                 format_size(reserved).c_str(), format_size(capacity_).c_str(),
                 format_size(capacity_ > reserved ? capacity_ - reserved : 0).c_str());
  }
  take_block(b, size, bytes);
  *out = b->ptr;
  return ONRT_OK;
}

onrt_status CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return ONRT_OK;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.end()) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "onrt_free: %p is not the start of a live allocation on neuron:%d (freed twice, "
                 "or an interior pointer?)",
                 ptr, device_);
  }
  Block* b = it->second;
  live_.erase(it);
  b->free_seq = b->stream->enqueued();
  update(stats_.allocation, b->pool, -1);
  update(stats_.allocated_bytes, b->pool, -static_cast<int64_t>(b->size));
  update(stats_.requested_bytes, b->pool, -static_cast<int64_t>(b->requested));
  notify(ONRT_MEMORY_FREE_REQUESTED, b->ptr, b->size, b->requested, b->stream);
  PendingFree pending{b, {}};
  for (Stream* s : b->stream_uses) {
    const uint64_t mark = s->enqueued();
    if (!s->reached(mark)) pending.marks.emplace_back(s, mark);
  }
  if (pending.marks.empty()) {
    free_block(b);
  } else {
    b->state = State::kPendingFree;
    pending_.push_back(std::move(pending));
  }
  return ONRT_OK;
}

CachingAllocator::Block* CachingAllocator::live_block_containing(const void* ptr) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = live_.upper_bound(p);
  if (it == live_.begin()) return nullptr;
  --it;
  Block* b = it->second;
  return p < reinterpret_cast<uintptr_t>(b->ptr) + b->size ? b : nullptr;
}

onrt_status CachingAllocator::record_stream(const void* ptr, Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  Block* b = live_block_containing(ptr);
  if (b == nullptr) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "onrt_record_stream: %p is not inside a live allocation on neuron:%d", ptr,
                 device_);
  }
  if (stream != b->stream &&
      std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end()) {
    b->stream_uses.push_back(stream);
  }
  return ONRT_OK;
}

bool CachingAllocator::contains(const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Block* b = live_block_containing(ptr);
  if (b == nullptr) return false;
  return bytes <= static_cast<size_t>(b->ptr + b->size - static_cast<const char*>(ptr));
}

void CachingAllocator::empty_cache() {
  std::unique_lock<std::mutex> lock(mu_);
  process_pending_frees();
  release_cached_segments_waiting(lock);
}

std::vector<onrt_segment_info> CachingAllocator::snapshot(
    std::vector<std::vector<onrt_block_info>>* blocks) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<onrt_segment_info> out;
  blocks->clear();
  blocks->reserve(segments_.size());
  for (const auto& [base, head] : segments_) {
    std::vector<onrt_block_info>& bs = blocks->emplace_back();
    size_t total = 0;
    for (const Block* b = head; b != nullptr; b = b->next) {
      const onrt_block_state state = b->state == State::kAllocated     ? ONRT_BLOCK_ALLOCATED
                                     : b->state == State::kPendingFree ? ONRT_BLOCK_PENDING_FREE
                                                                       : ONRT_BLOCK_FREE;
      bs.push_back(onrt_block_info{reinterpret_cast<uintptr_t>(b->ptr), b->size,
                                   b->state == State::kFree ? 0 : b->requested, state});
      total += b->size;
    }
    out.push_back(onrt_segment_info{base, total, head->pool, head->stream->id(), nullptr, 0});
  }
  return out;
}

onrt_memory_stats CachingAllocator::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  for_each_stat_array(stats_, [](onrt_stat(&a)[ONRT_POOL_COUNT]) {
    for (auto& s : a) s.peak = s.current;
  });
}

void CachingAllocator::reset_accumulated() {
  std::lock_guard<std::mutex> lock(mu_);
  for_each_stat_array(stats_, [](onrt_stat(&a)[ONRT_POOL_COUNT]) {
    for (auto& s : a) s.allocated = s.freed = 0;
  });
  stats_.num_alloc_retries = 0;
  stats_.num_ooms = 0;
  stats_.num_device_alloc = 0;
  stats_.num_device_free = 0;
}

uint64_t CachingAllocator::reserved() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint64_t>(stats_.reserved_bytes[ONRT_POOL_ALL].current);
}

CachingAllocator* CachingAllocator::owner_of(const void* ptr) {
  auto& r = registry();
  std::shared_lock lock(r.mu);
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = r.ranges.upper_bound(p);
  if (it == r.ranges.begin()) return nullptr;
  --it;
  return p < it->second.first ? it->second.second : nullptr;
}

}  // namespace openneuron::runtime
