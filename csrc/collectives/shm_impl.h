// Internals of the shared-memory communicator, shared by its source files:
// the segment layout (shm_segment.cpp), the communicator with its waits and
// checks (shm_communicator.cpp), the collective algorithms
// (shm_collectives.cpp) and the point-to-point rings (p2p_ring.cpp).
#pragma once

#include <sched.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "openneuron/collectives/shm_communicator.h"
#include "openneuron/ipc.h"

namespace openneuron::collectives::detail {

inline constexpr uint64_t kMagic = 0x314d48534e4f4e4fULL;  // "ONONSHM1", little endian
inline constexpr size_t kLine = 64;
inline constexpr size_t kReasonBytes = 1024;

// One atomic per cache line: a rank spinning on a peer's counter does not
// steal the line the peer's other writers use.
struct alignas(kLine) Line {
  std::atomic<uint64_t> v;
};

// The fixed head of every segment. The file is zero-filled by ftruncate, so
// every atomic starts at 0; the owner fills in the plain fields before
// publishing the name.
struct ControlBlock {
  uint64_t magic;
  int32_t pid;
  int32_t rank;
  int32_t size;
  uint64_t chunk_bytes;
  uint64_t ring_bytes;
  Line step;  // barriers this rank has reached
  // 0: running, 1: an abort is writing its reason, 2: aborted (reason readable).
  alignas(kLine) std::atomic<uint32_t> abort_state;
  // The collective that failed (0: outside one, e.g. a send): peers that already
  // finished an earlier collective do not fail it for this abort.
  std::atomic<uint64_t> abort_seq;
  char reason[kReasonBytes];
  // The header of collective seq lives in headers[seq % 2]: a rank writes
  // header seq + 2 only after all peers passed the first barrier of seq + 1,
  // hence after they compared header seq.
  alignas(kLine) CallHeader headers[2];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// Byte offsets of the variable parts of a segment, identical for every rank
// of a group except for which peers its rings serve.
struct Layout {
  int size = 1;
  size_t chunk = 0;
  size_t ring = 0;
  size_t p2p_lines = 0;  // 2 Lines per peer rank r: [2r] head of the ring to r, [2r+1] its tail
  size_t a2a = 0;        // 2 slots x (send bytes[size], recv bytes[size]) of uint64
  size_t stage[2] = {0, 0};
  size_t rings = 0;  // size - 1 rings: the one to rank d is at index d < owner ? d : d - 1
  size_t total = 0;

  size_t ring_offset(int owner, int dst) const {
    return rings + static_cast<size_t>(dst < owner ? dst : dst - 1) * ring;
  }
};
Layout make_layout(int size, size_t chunk_bytes, size_t ring_bytes);

struct Mapping {
  char* base = nullptr;
  size_t len = 0;
};
// "/openneuron-<pid>-<hash of group_key>-<rank>".
std::string segment_name(const std::string& group_key, int rank);
// shm_open(O_CREAT | O_EXCL), ftruncate, mmap. Throws CollectiveError.
Mapping create_segment(const std::string& name, size_t len);
// Maps an existing segment (its size from fstat). Throws CollectiveError.
Mapping map_segment(const std::string& name);
void unmap(Mapping& m);
bool pid_alive(int pid);  // kill(pid, 0) does not fail with ESRCH

// Spin, then yield, then sleep: cheap while a peer is microseconds behind,
// harmless when it computes for seconds.
class Backoff {
 public:
  void pause() {
    if (iter_ < 256) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else if (iter_ < 2048) {
      sched_yield();
    } else {
      const timespec ts{0, 50'000};
      nanosleep(&ts, nullptr);
    }
    ++iter_;
  }
  bool spinning() const { return iter_ < 256; }

 private:
  uint32_t iter_ = 0;
};

class ShmCommunicatorImpl final : public ShmCommunicator {
 public:
  explicit ShmCommunicatorImpl(const ShmOptions& options);
  ~ShmCommunicatorImpl() override;
  void connect(Rendezvous& rdv);

  void abort(const std::string& reason) override { abort_at(0, reason); }
  void abort_at(uint64_t seq, const std::string& reason);
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  void reduce(void* data, size_t count, DType dtype, ReduceOp op, int root) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void all_gather(const void* input, size_t bytes, void* const* outputs) override;
  void reduce_scatter(const void* const* inputs, void* output, size_t count, DType dtype,
                      ReduceOp op) override;
  void gather(const void* input, size_t bytes, void* const* outputs, int root) override;
  void scatter(const void* const* inputs, void* output, size_t bytes, int root) override;
  void all_to_all(const void* const* inputs, const size_t* input_bytes, void* const* outputs,
                  const size_t* output_bytes) override;
  void barrier() override;
  void send(const void* data, size_t bytes, int dst, int tag) override;
  void recv(void* data, size_t bytes, int src, int tag) override;
  int recv_any(void* data, size_t bytes, int tag) override;
  std::vector<std::string> linked_segments() const override;
  bool peer_memory() const override { return peer_memory_; }
  uint64_t in_place_calls() const override {
    return in_place_calls_.load(std::memory_order_relaxed);
  }
  bool buffer_may_still_be_written() const override { return in_place_window_; }

 private:
  struct Peer {
    Mapping map;
    ControlBlock* ctl = nullptr;
    int pid = 0;
    bool watch_pid = false;  // false when the pid is not visible here (another pid namespace)
  };

  // --- collective framing (shm_communicator.cpp)
  // Starts collective number ++seq_: fails if aborted, publishes the header.
  void begin(CollectiveKind kind, uint8_t dtype, uint8_t op, int root, uint64_t bytes,
             const size_t* a2a_send = nullptr, const size_t* a2a_recv = nullptr,
             uint64_t shared_offset = CallHeader::kNotShared);
  // One barrier among all ranks; the first of a collective compares headers.
  void sync();
  void check_headers();
  void check_a2a_sizes();
  char* stage(int r) const { return peers_[r].map.base + layout_.stage[round_ & 1]; }
  void next_round() { ++round_; }
  const uint64_t* a2a_sizes(int r, uint64_t seq) const;  // send[size], then recv[size]
  // Runs f; any exception aborts this rank and leaves as a CollectiveError.
  template <class F>
  void guarded(F&& f);
  [[noreturn]] void fail(const std::string& msg);
  void throw_if_aborted(const std::string& what) const;
  std::string abort_reason(int r) const;  // "" while rank r runs

  // Waits until ready(p) for every p in peers. Every ~1 ms checks the
  // deadline, own and peers' abort flags, and that the lagging peers live.
  template <class Ready>
  void wait_on(const std::vector<int>& peers, Ready&& ready, const std::string& what);
  // The periodic check of wait_on, for the peers still lagging. A lagging peer
  // that exited is an error unless ready_now(peer) (read after its exit was
  // seen) says it became ready meanwhile.
  void check_waiting(const std::vector<int>& lagging, std::chrono::steady_clock::time_point start,
                     const std::string& what, const std::function<bool(int)>& ready_now = {});
  // Waits until ready(p) for some p in peers (tried in order) and returns it.
  // The same backoff and checks as wait_on, for the peers still alive; throws
  // once every peer exited.
  template <class Ready>
  int wait_any(const std::vector<int>& peers, Ready&& ready, const std::string& what);
  bool peer_exited(int r) const;

  // --- point to point (p2p_ring.cpp)
  void push(int dst, const char* src, size_t n, const std::string& what);
  void pop(int src, char* dst, size_t n, const std::string& what);
  // Copies the first n bytes waiting in src's ring to dst without consuming
  // them; false if fewer have arrived. The caller holds recv_mu_[src].
  bool peek(int src, char* dst, size_t n) const;

  // --- the peers' memory (peer_memory.cpp)
  // Exchanges shareable-memory handles at create(); sets peer_memory_ when
  // every rank mapped every peer's.
  void map_peer_memory(Rendezvous& rdv);
  void unmap_peer_memory();
  // Where `data` sits in this rank's shareable memory, or kNotShared.
  uint64_t shared_offset_of(const void* data) const;
  // After the first barrier of the current collective: every rank's buffer
  // as mapped here (this rank's is `own`), or false if some rank's is not shared.
  bool peer_buffers(char* own, std::vector<char*>* out);

  // --- algorithms (shm_collectives.cpp)
  void reduce_impl(char* data, size_t count, DType dtype, ReduceOp op, int root);
  // all_reduce in place on every rank's buffer; after the first barrier.
  void all_reduce_in_place(const std::vector<char*>& buffers, size_t count, DType dtype,
                           ReduceOp op);

  ShmOptions opt_;
  Layout layout_;
  std::string own_name_;
  bool linked_ = false;
  std::vector<Peer> peers_;  // by rank, self included
  ControlBlock* self_ = nullptr;
  std::vector<int> others_;  // every rank but this one

  // The current collective (collectives run one at a time).
  uint64_t seq_ = 0;
  uint64_t step_ = 0;
  uint64_t round_ = 0;  // staging buffer round_ % 2; counted across collectives
  bool checked_ = false;
  std::string what_;  // "all_reduce #3"

  // Peers' shareable memory, mapped at create(): where rank r's starts here
  // (nullptr for this rank), and this rank's own range.
  bool peer_memory_ = false;
  std::vector<char*> peer_base_;
  std::vector<uint64_t> peer_bytes_;
  onrt_ipc_handle own_range_{};
  std::atomic<uint64_t> in_place_calls_{0};  // read from other threads
  // From this rank's first barrier of an in-place all_reduce until every rank
  // is known to have finished writing (or to take the staged path).
  bool in_place_window_ = false;

  std::vector<std::unique_ptr<std::mutex>> send_mu_, recv_mu_;
  std::atomic<unsigned> any_next_{0};  // where recv_any starts looking: no peer starves
};

template <class F>
void ShmCommunicatorImpl::guarded(F&& f) {
  try {
    f();
  } catch (const CollectiveError& e) {
    abort_at(seq_, e.what());
    throw;
  } catch (const std::exception& e) {
    const std::string msg = what_ + ": " + e.what();
    abort_at(seq_, msg);
    throw CollectiveError(msg);
  }
}

template <class Ready>
void ShmCommunicatorImpl::wait_on(const std::vector<int>& peers, Ready&& ready, const std::string& what) {
  auto all_ready = [&] {
    for (int p : peers)
      if (!ready(p)) return false;
    return true;
  };
  if (all_ready()) return;
  const auto start = std::chrono::steady_clock::now();
  auto next_check = start;
  Backoff backoff;
  std::vector<int> lagging;
  for (;;) {
    backoff.pause();
    if (all_ready()) return;
    if (backoff.spinning()) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_check) continue;
    next_check = now + std::chrono::milliseconds(1);
    lagging.clear();
    for (int p : peers)
      if (!ready(p)) lagging.push_back(p);
    if (lagging.empty()) return;
    // A peer may make its last write and exit between the readiness test above
    // and the liveness test in check_waiting: it is dead only if still not
    // ready once its exit has been seen.
    check_waiting(lagging, start, what, [&](int p) { return ready(p); });
  }
}

template <class Ready>
int ShmCommunicatorImpl::wait_any(const std::vector<int>& peers, Ready&& ready, const std::string& what) {
  auto any_ready = [&] {
    for (int p : peers)
      if (ready(p)) return p;
    return -1;
  };
  int p = any_ready();
  if (p >= 0) return p;
  const auto start = std::chrono::steady_clock::now();
  auto next_check = start;
  Backoff backoff;
  std::vector<int> alive;
  for (;;) {
    backoff.pause();
    if ((p = any_ready()) >= 0) return p;
    if (backoff.spinning()) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_check) continue;
    next_check = now + std::chrono::milliseconds(1);
    // A peer that exited may have left messages, still received above, but
    // sends no more: only the others are waited for, until none is left.
    alive.clear();
    for (int r : peers)
      if (!peer_exited(r)) alive.push_back(r);
    if (alive.empty()) {
      // All exited: what is in their rings now is all there will be.
      if ((p = any_ready()) >= 0) return p;
      check_waiting(peers, start, what);
    }
    // One that exits from now on is dropped from `alive` at the next check
    // (its messages still received), not reported dead.
    check_waiting(alive, start, what, [](int) { return true; });
  }
}

}  // namespace openneuron::collectives::detail
