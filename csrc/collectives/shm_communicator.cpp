// The communicator's life cycle (create, connect, abort) and the framing every
// collective shares: sequence numbers, call headers compared across ranks, the
// step-counter barrier and its waits with deadline, abort and liveness checks.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include <sys/mman.h>
#include <unistd.h>

#include "shm_impl.h"

namespace openneuron::collectives {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Product: return "product";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::BitAnd: return "band";
    case ReduceOp::BitOr: return "bor";
    case ReduceOp::BitXor: return "bxor";
  }
  return "?";
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::None: return "none";
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::Reduce: return "reduce";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::Gather: return "gather";
    case CollectiveKind::Scatter: return "scatter";
    case CollectiveKind::AllToAll: return "all_to_all";
    case CollectiveKind::Barrier: return "barrier";
  }
  return "?";
}

namespace detail {
namespace {

// torch's spelling, for messages.
const char* dtype_label(uint8_t d) {
  static const char* const names[] = {"bool",    "uint8",    "int8",    "int16",     "int32",
                                      "int64",   "float16",  "bfloat16", "float32",  "float64",
                                      "complex64", "float8_e4m3fn", "float8_e5m2"};
  return d < sizeof(names) / sizeof(names[0]) ? names[d] : "?";
}

// "all_gather #3 (4096 bytes)" or, without the number, "all_reduce (float32, 1024 elements, sum)".
std::string describe(const CallHeader& h, bool with_seq) {
  const auto kind = static_cast<CollectiveKind>(h.kind);
  std::ostringstream s;
  s << collective_name(kind);
  if (with_seq) s << " #" << h.seq;
  if (kind == CollectiveKind::Barrier || kind == CollectiveKind::AllToAll) return s.str();
  s << " (";
  if (h.dtype != 0xff) {
    const size_t es = dtype_size(static_cast<DType>(h.dtype));
    s << dtype_label(h.dtype) << ", " << (es ? h.bytes / es : h.bytes) << " elements, "
      << reduce_op_name(static_cast<ReduceOp>(h.op));
  } else {
    s << h.bytes << " bytes";
  }
  if (h.root >= 0) s << ", root " << h.root;
  s << ")";
  return s.str();
}

size_t env_chunk_bytes(size_t fallback) {
  if (const char* v = std::getenv("OPENNEURON_SHM_CHUNK_BYTES")) {
    const unsigned long long n = std::strtoull(v, nullptr, 10);
    if (n > 0) return static_cast<size_t>(n);
  }
  return fallback;
}

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

ShmCommunicatorImpl::ShmCommunicatorImpl(const ShmOptions& options)
    : ShmCommunicator(options.rank, options.size), opt_(options) {
  // Staging slices stay 64-byte aligned and hold at least 16 elements per rank.
  opt_.chunk_bytes = round_up(std::max(env_chunk_bytes(opt_.chunk_bytes), size_t{256} * size_), kLine);
  opt_.ring_bytes = round_up(std::max<size_t>(opt_.ring_bytes, 256), kLine);
  layout_ = make_layout(size_, opt_.chunk_bytes, opt_.ring_bytes);
  peers_.resize(size_);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) others_.push_back(r);
    send_mu_.push_back(std::make_unique<std::mutex>());
    recv_mu_.push_back(std::make_unique<std::mutex>());
  }
  own_name_ = segment_name(opt_.group_key, rank_);
  Peer& me = peers_[rank_];
  me.map = create_segment(own_name_, layout_.total);
  linked_ = true;
  me.ctl = new (me.map.base) ControlBlock{};
  me.pid = static_cast<int>(getpid());
  self_ = me.ctl;
  self_->pid = me.pid;
  self_->rank = rank_;
  self_->size = size_;
  self_->chunk_bytes = opt_.chunk_bytes;
  self_->ring_bytes = opt_.ring_bytes;
  self_->magic = kMagic;
}

ShmCommunicatorImpl::~ShmCommunicatorImpl() {
  unmap_peer_memory();
  if (linked_) shm_unlink(own_name_.c_str());
  for (Peer& p : peers_) unmap(p.map);
}

void ShmCommunicatorImpl::connect(Rendezvous& rdv) {
  what_ = "create";
  auto get = [&](const std::string& key, int r, const char* stage) {
    try {
      return rdv.get(key);
    } catch (const std::exception& e) {
      throw CollectiveError("create: rank " + std::to_string(r) + " never " + stage + ": " + e.what());
    }
  };
  rdv.set("shm/" + std::to_string(rank_), own_name_);
  for (int r : others_) {
    const std::string name = get("shm/" + std::to_string(r), r, "published its segment");
    Peer& p = peers_[r];
    p.map = map_segment(name);
    p.ctl = reinterpret_cast<ControlBlock*>(p.map.base);
    const ControlBlock& c = *p.ctl;
    std::string diff;
    auto field = [&](const char* what, uint64_t theirs, uint64_t ours) {
      if (theirs != ours) diff += std::string(", ") + what + " " + std::to_string(theirs) + " vs " + std::to_string(ours);
    };
    field("magic", c.magic, kMagic);
    field("rank", static_cast<uint64_t>(c.rank), static_cast<uint64_t>(r));
    field("size", static_cast<uint64_t>(c.size), static_cast<uint64_t>(size_));
    field("chunk_bytes", c.chunk_bytes, opt_.chunk_bytes);
    field("ring_bytes", c.ring_bytes, opt_.ring_bytes);
    field("segment bytes", p.map.len, layout_.total);
    if (!diff.empty()) {
      throw CollectiveError("create: segment " + name + " of rank " + std::to_string(r) +
                            " does not match this rank's (" + diff.substr(2) + ")");
    }
    p.pid = c.pid;
    // A rank in another pid namespace (shared /dev/shm across containers) is
    // invisible to kill(): do not mistake it for a dead one.
    p.watch_pid = pid_alive(p.pid);
  }
  rdv.set("shm-mapped/" + std::to_string(rank_), "1");
  for (int r : others_) get("shm-mapped/" + std::to_string(r), r, "mapped the segments");
  shm_unlink(own_name_.c_str());
  linked_ = false;
  map_peer_memory(rdv);
}

std::vector<std::string> ShmCommunicatorImpl::linked_segments() const {
  if (linked_) return {own_name_};
  return {};
}

// ------------------------------------------------------------ abort

void ShmCommunicatorImpl::abort_at(uint64_t seq, const std::string& reason) {
  uint32_t expected = 0;
  if (!self_->abort_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  self_->abort_seq.store(seq, std::memory_order_relaxed);
  const size_t n = std::min(reason.size(), kReasonBytes - 1);
  std::memcpy(self_->reason, reason.data(), n);
  self_->reason[n] = '\0';
  self_->abort_state.store(2, std::memory_order_release);
}

std::string ShmCommunicatorImpl::abort_reason(int r) const {
  const ControlBlock* c = peers_[r].ctl;
  uint32_t st = c->abort_state.load(std::memory_order_acquire);
  if (st == 0) return {};
  for (int i = 0; st == 1 && i < 100000; ++i) {
    sched_yield();
    st = c->abort_state.load(std::memory_order_acquire);
  }
  if (st != 2) return "aborted";
  return std::string(c->reason, strnlen(c->reason, kReasonBytes));
}

void ShmCommunicatorImpl::throw_if_aborted(const std::string& what) const {
  if (self_->abort_state.load(std::memory_order_acquire) == 0) return;
  throw CollectiveError(what + ": communicator aborted: " + abort_reason(rank_));
}

void ShmCommunicatorImpl::fail(const std::string& msg) {
  abort_at(seq_, msg);
  throw CollectiveError(msg);
}

// ------------------------------------------------------------ waits

bool ShmCommunicatorImpl::peer_exited(int r) const {
  const Peer& p = peers_[r];
  return p.watch_pid && !pid_alive(p.pid);
}

void ShmCommunicatorImpl::check_waiting(const std::vector<int>& lagging,
                                        std::chrono::steady_clock::time_point start,
                                        const std::string& what,
                                        const std::function<bool(int)>& ready_now) {
  throw_if_aborted(what);
  for (int r : others_) {
    const std::string reason = abort_reason(r);
    if (!reason.empty()) throw CollectiveError(what + ": rank " + std::to_string(r) + " aborted: " + reason);
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.1f s", waited);
  for (int r : lagging) {
    const Peer& p = peers_[r];
    if (p.watch_pid && !pid_alive(p.pid) && !(ready_now && ready_now(r))) {
      throw CollectiveError(what + ": rank " + std::to_string(r) + " (pid " + std::to_string(p.pid) +
                            ") exited (waited " + secs + ")");
    }
  }
  if (std::chrono::steady_clock::now() - start >= opt_.timeout) {
    std::string ranks;
    for (int r : lagging) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    throw CollectiveError(what + ": timed out after " + secs + " waiting for rank(s) " + ranks);
  }
}

// ------------------------------------------------------------ collective framing

const uint64_t* ShmCommunicatorImpl::a2a_sizes(int r, uint64_t seq) const {
  const char* base = peers_[r].map.base + layout_.a2a;
  return reinterpret_cast<const uint64_t*>(base) + (seq & 1) * 2 * static_cast<size_t>(size_);
}

void ShmCommunicatorImpl::begin(CollectiveKind kind, uint8_t dtype, uint8_t op, int root,
                                uint64_t bytes, const size_t* a2a_send, const size_t* a2a_recv,
                                uint64_t shared_offset) {
  ++seq_;
  checked_ = false;
  what_ = std::string(collective_name(kind)) + " #" + std::to_string(seq_);
  throw_if_aborted(what_);
  if (root >= size_) fail(what_ + ": root " + std::to_string(root) + " out of range for size " + std::to_string(size_));
  CallHeader& h = self_->headers[seq_ & 1];
  h.seq = seq_;
  h.kind = static_cast<uint8_t>(kind);
  h.dtype = dtype;
  h.op = op;
  h.root = root;
  h.bytes = bytes;
  h.shared_offset = shared_offset;
  if (a2a_send != nullptr) {
    uint64_t* sizes = const_cast<uint64_t*>(a2a_sizes(rank_, seq_));
    for (int r = 0; r < size_; ++r) {
      sizes[r] = a2a_send[r];
      sizes[size_ + r] = a2a_recv[r];
    }
  }
}

void ShmCommunicatorImpl::sync() {
  ++step_;
  self_->step.v.store(step_, std::memory_order_release);
  const uint64_t target = step_;
  wait_on(
      others_, [&](int p) { return peers_[p].ctl->step.v.load(std::memory_order_acquire) >= target; },
      what_);
  if (!checked_) {
    checked_ = true;
    check_headers();
  }
  // A peer that reached the step and then failed in this collective (timed out
  // after signalling, say) fails this rank too, now rather than one call later.
  // One that failed in a later collective (a third rank died after this one
  // ended for it) does not: this collective is complete.
  for (int r : others_) {
    const ControlBlock* c = peers_[r].ctl;
    if (c->abort_state.load(std::memory_order_acquire) == 0) continue;
    // abort_reason waits until the abort is fully written, abort_seq with it.
    const std::string reason = abort_reason(r);
    const uint64_t at = c->abort_seq.load(std::memory_order_relaxed);
    if (at == 0 || at <= seq_) {
      throw CollectiveError(what_ + ": rank " + std::to_string(r) + " aborted: " + reason);
    }
  }
}

void ShmCommunicatorImpl::check_headers() {
  const CallHeader& mine = self_->headers[seq_ & 1];
  for (int r : others_) {
    const CallHeader& h = peers_[r].ctl->headers[seq_ & 1];
    if (h.seq != mine.seq || h.kind != mine.kind || h.dtype != mine.dtype || h.op != mine.op ||
        h.root != mine.root ||
        (h.bytes != mine.bytes && mine.kind != static_cast<uint8_t>(CollectiveKind::AllToAll))) {
      fail(what_ + ": rank " + std::to_string(r) + " called " + describe(h, true) + " where rank " +
           std::to_string(rank_) + " called " + describe(mine, false));
    }
  }
  if (mine.kind == static_cast<uint8_t>(CollectiveKind::AllToAll)) check_a2a_sizes();
}

void ShmCommunicatorImpl::check_a2a_sizes() {
  // Every rank checks every pair, so all of them fail on the same mismatch.
  for (int i = 0; i < size_; ++i) {
    const uint64_t* si = a2a_sizes(i, seq_);
    for (int j = 0; j < size_; ++j) {
      const uint64_t* sj = a2a_sizes(j, seq_);
      const uint64_t sent = si[j], expected = sj[size_ + i];
      if (sent != expected) {
        fail(what_ + ": rank " + std::to_string(i) + " sends " + std::to_string(sent) + " bytes to rank " +
             std::to_string(j) + ", which expects " + std::to_string(expected) + " bytes from it");
      }
    }
  }
}

}  // namespace detail

std::unique_ptr<ShmCommunicator> ShmCommunicator::create(Rendezvous& rdv, const ShmOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    throw CollectiveError("create: rank " + std::to_string(options.rank) + " out of range for size " +
                          std::to_string(options.size));
  }
  remove_stale_segments();
  try {
    auto comm = std::make_unique<detail::ShmCommunicatorImpl>(options);
    comm->connect(rdv);
    return comm;
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {  // the store's own errors
    throw CollectiveError(std::string("create: ") + e.what());
  }
}

}  // namespace openneuron::collectives
