// Point-to-point messages: one single-producer single-consumer byte ring per
// ordered pair of ranks, in the sender's segment. The sender alone advances
// head, the receiver alone advances tail (both monotonic byte counts, each on
// its own cache line), so no lock is shared between processes. A message is a
// 16-byte header {tag, bytes} followed by the payload, streamed through the
// ring: a message larger than the ring flows while the receiver drains it.
// A receive from any rank peeks at the header next in each peer's ring and
// takes the first whose tag matches.
// None of this touches the collectives' step counters: sends and receives run
// on their own threads, concurrently with collectives.
#include <algorithm>
#include <cstring>

#include "shm_impl.h"

namespace openneuron::collectives::detail {
namespace {

struct MessageHeader {
  int64_t tag;
  uint64_t bytes;
};
static_assert(sizeof(MessageHeader) == 16);

Line* p2p_line(char* base, const Layout& l, int index) {
  return reinterpret_cast<Line*>(base + l.p2p_lines) + index;
}

}  // namespace

void ShmCommunicatorImpl::push(int dst, const char* src, size_t n, const std::string& what) {
  char* base = peers_[rank_].map.base;
  std::atomic<uint64_t>& head = p2p_line(base, layout_, 2 * dst)->v;
  std::atomic<uint64_t>& tail = p2p_line(base, layout_, 2 * dst + 1)->v;
  char* ring = base + layout_.ring_offset(rank_, dst);
  const size_t cap = layout_.ring;
  uint64_t h = head.load(std::memory_order_relaxed);
  while (n > 0) {
    uint64_t free = cap - (h - tail.load(std::memory_order_acquire));
    if (free == 0) {
      wait_on(
          {dst}, [&](int) { return h - tail.load(std::memory_order_acquire) < cap; }, what);
      continue;
    }
    // Publish at most half a ring at a time: the receiver copies out one half
    // while the sender fills the other.
    const size_t take = std::min<uint64_t>({free, n, std::max<size_t>(cap / 2, 1)});
    const size_t pos = h % cap;
    const size_t first = std::min(take, cap - pos);
    std::memcpy(ring + pos, src, first);
    std::memcpy(ring, src + first, take - first);
    h += take;
    head.store(h, std::memory_order_release);
    src += take;
    n -= take;
  }
}

void ShmCommunicatorImpl::pop(int src_rank, char* dst, size_t n, const std::string& what) {
  char* base = peers_[src_rank].map.base;
  std::atomic<uint64_t>& head = p2p_line(base, layout_, 2 * rank_)->v;
  std::atomic<uint64_t>& tail = p2p_line(base, layout_, 2 * rank_ + 1)->v;
  const char* ring = base + layout_.ring_offset(src_rank, rank_);
  const size_t cap = layout_.ring;
  uint64_t t = tail.load(std::memory_order_relaxed);
  while (n > 0) {
    const uint64_t avail = head.load(std::memory_order_acquire) - t;
    if (avail == 0) {
      wait_on(
          {src_rank}, [&](int) { return head.load(std::memory_order_acquire) != t; }, what);
      continue;
    }
    const size_t take = std::min<uint64_t>(avail, n);
    const size_t pos = t % cap;
    const size_t first = std::min(take, cap - pos);
    std::memcpy(dst, ring + pos, first);
    std::memcpy(dst + first, ring, take - first);
    t += take;
    tail.store(t, std::memory_order_release);
    dst += take;
    n -= take;
  }
}

bool ShmCommunicatorImpl::peek(int src_rank, char* dst, size_t n) const {
  char* base = peers_[src_rank].map.base;
  const std::atomic<uint64_t>& head = p2p_line(base, layout_, 2 * rank_)->v;
  const std::atomic<uint64_t>& tail = p2p_line(base, layout_, 2 * rank_ + 1)->v;
  const char* ring = base + layout_.ring_offset(src_rank, rank_);
  const size_t cap = layout_.ring;
  const uint64_t t = tail.load(std::memory_order_relaxed);
  if (head.load(std::memory_order_acquire) - t < n) return false;
  const size_t pos = t % cap;
  const size_t first = std::min(n, cap - pos);
  std::memcpy(dst, ring + pos, first);
  std::memcpy(dst + first, ring, n - first);
  return true;
}

void ShmCommunicatorImpl::send(const void* data, size_t bytes, int dst, int tag) {
  const std::string what = "send to rank " + std::to_string(dst) + " (tag " + std::to_string(tag) + ")";
  try {
    throw_if_aborted(what);
    if (dst < 0 || dst >= size_ || dst == rank_) {
      fail(what + ": invalid destination for rank " + std::to_string(rank_) + " of " + std::to_string(size_));
    }
    std::lock_guard<std::mutex> lock(*send_mu_[dst]);  // one message at a time per pair: FIFO
    const MessageHeader hdr{tag, bytes};
    push(dst, reinterpret_cast<const char*>(&hdr), sizeof(hdr), what);
    push(dst, static_cast<const char*>(data), bytes, what);
  } catch (const CollectiveError& e) {
    abort(e.what());
    throw;
  }
}

void ShmCommunicatorImpl::recv(void* data, size_t bytes, int src, int tag) {
  const std::string what = "recv from rank " + std::to_string(src) + " (tag " + std::to_string(tag) + ")";
  try {
    throw_if_aborted(what);
    if (src < 0 || src >= size_ || src == rank_) {
      fail(what + ": invalid source for rank " + std::to_string(rank_) + " of " + std::to_string(size_));
    }
    std::lock_guard<std::mutex> lock(*recv_mu_[src]);
    MessageHeader hdr{};
    pop(src, reinterpret_cast<char*>(&hdr), sizeof(hdr), what);
    if (hdr.tag != tag || hdr.bytes != bytes) {
      fail(what + ": expected " + std::to_string(bytes) + " bytes, rank " + std::to_string(src) + " sent " +
           std::to_string(hdr.bytes) + " bytes with tag " + std::to_string(hdr.tag));
    }
    pop(src, static_cast<char*>(data), bytes, what);
  } catch (const CollectiveError& e) {
    abort(e.what());
    throw;
  }
}

int ShmCommunicatorImpl::recv_any(void* data, size_t bytes, int tag) {
  const std::string what = "recv from any rank (tag " + std::to_string(tag) + ")";
  try {
    throw_if_aborted(what);
    if (others_.empty()) fail(what + ": rank " + std::to_string(rank_) + " has no peer in a group of 1");
    // Start after a different peer each call, so a busy sender cannot starve the others.
    const size_t first = any_next_.fetch_add(1, std::memory_order_relaxed) % others_.size();
    std::vector<int> order(others_.begin() + first, others_.end());
    order.insert(order.end(), others_.begin(), others_.begin() + first);
    // A peer's ring is looked at only while no recv from it runs (its next
    // header is then at the tail), and stays locked once its header matched.
    std::unique_lock<std::mutex> held;
    MessageHeader hdr{};
    auto matches = [&](int p) {
      std::unique_lock<std::mutex> lock(*recv_mu_[p], std::try_to_lock);
      if (!lock.owns_lock()) return false;
      MessageHeader h{};
      if (!peek(p, reinterpret_cast<char*>(&h), sizeof(h)) || h.tag != tag) return false;
      hdr = h;
      held = std::move(lock);
      return true;
    };
    const int src = wait_any(order, matches, what);
    if (hdr.bytes != bytes) {
      fail(what + ": expected " + std::to_string(bytes) + " bytes, rank " + std::to_string(src) + " sent " +
           std::to_string(hdr.bytes) + " bytes with tag " + std::to_string(hdr.tag));
    }
    pop(src, reinterpret_cast<char*>(&hdr), sizeof(hdr), what);
    pop(src, static_cast<char*>(data), bytes, what);
    return src;
  } catch (const CollectiveError& e) {
    abort(e.what());
    throw;
  }
}

}  // namespace openneuron::collectives::detail
