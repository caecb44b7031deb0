// Collectives among the ranks of one host through shared memory: the transport
// behind the c10d backend "neuron" (csrc/torch/process_group.cpp) when every rank
// of a group runs on this host. No torch: the bridge hands over raw device
// pointers (device memory is host memory on virtual cores) and calls these from
// a host function on the backend's communication stream.
//
// Each rank owns one POSIX shared-memory segment: a control block (per-rank
// step counters, the call header of the current collective, pid, abort flag),
// two staging buffers used alternately by successive rounds of a collective
// (round k may be written while peers still read round k-1), and one
// single-producer ring per peer for point-to-point sends. Every rank maps every
// peer's segment; once all have mapped them the names are unlinked, so nothing
// outlives the processes even when one is SIGKILLed. Segments left by a rank
// killed before that point are removed by the next create() on the host.
//
// Collectives of one communicator run one at a time, in the same order on every
// rank (c10d's contract); send and recv may run concurrently with collectives and
// with each other (each on its own thread), but sends to one peer are FIFO, as are
// receives from one peer (recv_any included).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "openneuron/kernels/types.h"

namespace openneuron::collectives {

enum class ReduceOp : uint8_t { Sum, Product, Min, Max, BitAnd, BitOr, BitXor };
const char* reduce_op_name(ReduceOp op);

// The store the ranks meet through (c10d's TCPStore in production, a directory
// in the C++ tests). get() blocks until the key is set and throws on timeout.
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual std::string get(const std::string& key) = 0;
};

// Thrown for a peer that died or aborted, a timeout, or calls that do not
// match across ranks. The message names the collective, its sequence number
// and the rank at fault, e.g.
// "all_reduce #12: rank 1 (pid 4711) exited before joining (waited 0.4 s)".
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ShmOptions {
  // Unique per group and per incarnation (c10d group name + a store-provided
  // nonce): it names the segments.
  std::string group_key;
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // Bytes of each of the two staging buffers, and of each point-to-point ring.
  // A large message goes in rounds of chunk_bytes: at 1 MiB what a rank writes
  // to staging is still in cache when the peers read it (larger rounds spill
  // to memory and run slower). OPENNEURON_SHM_CHUNK_BYTES overrides it.
  size_t chunk_bytes = size_t{1} << 20;
  size_t ring_bytes = size_t{1} << 20;
  // The rank's core, or -1. With a core, create() enables shareable memory on
  // it (openneuron/ipc.h) and maps every peer's; then an all_reduce whose
  // buffers are in shareable memory on every rank reduces straight out of the
  // peers' buffers into all of them, with no staging copies.
  int device = -1;
};

class ShmCommunicator {
 public:
  // Creates this rank's segment, publishes its name through `rdv`, maps every
  // peer's, then unlinks its own name once all have mapped it. Throws
  // CollectiveError (with the reason: shm_open/ftruncate/mmap errno text, a peer
  // that never arrived) on failure.
  static std::unique_ptr<ShmCommunicator> create(Rendezvous& rdv, const ShmOptions& options);
  virtual ~ShmCommunicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Marks this rank aborted (peers waiting on it fail at once with `reason`),
  // and makes every later call on this rank throw.
  virtual void abort(const std::string& reason) = 0;

  // In place on `count` elements. Integer Sum/Product wrap as in PyTorch;
  // Float16/BFloat16 accumulate in float over all ranks and round once.
  // Bit ops: integral and Bool only. Min/Max on Bool are And/Or.
  virtual void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) = 0;
  // Result in `data` on root only; other ranks' `data` is left unchanged.
  virtual void reduce(void* data, size_t count, DType dtype, ReduceOp op, int root) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // outputs[r] (size() pointers) receives rank r's `bytes` from `input`.
  // input may alias outputs[rank()].
  virtual void all_gather(const void* input, size_t bytes, void* const* outputs) = 0;
  // inputs[r] (size() pointers) is this rank's contribution to rank r's block;
  // `output` receives the reduction over ranks of their inputs[rank()].
  // output may alias inputs[rank()].
  virtual void reduce_scatter(const void* const* inputs, void* output, size_t count, DType dtype,
                              ReduceOp op) = 0;
  // outputs (size() pointers) is read on root only.
  virtual void gather(const void* input, size_t bytes, void* const* outputs, int root) = 0;
  // inputs (size() pointers) is read on root only.
  virtual void scatter(const void* const* inputs, void* output, size_t bytes, int root) = 0;
  // inputs[r] / input_bytes[r]: what this rank sends to rank r; outputs[r] /
  // output_bytes[r]: what it receives from r. Sizes may differ per pair; each
  // pair's sizes must agree (rank i's input_bytes[j] == rank j's output_bytes[i]),
  // checked, and a mismatch is a CollectiveError naming both ranks.
  virtual void all_to_all(const void* const* inputs, const size_t* input_bytes,
                          void* const* outputs, const size_t* output_bytes) = 0;
  virtual void barrier() = 0;

  // Point to point. send returns once the bytes are in the peer's ring (it
  // blocks only while the ring is full); recv returns once all bytes arrived.
  // A recv whose size or tag differs from the matching send is a CollectiveError.
  virtual void send(const void* data, size_t bytes, int dst, int tag) = 0;
  virtual void recv(void* data, size_t bytes, int src, int tag) = 0;
  // Receive from any rank: takes the first message with this tag that is next in
  // any peer's ring (each peer's messages stay in order, so one behind another tag
  // waits for that one to be received) and returns its sender. A size that differs
  // is a CollectiveError, as in recv. Peers that exited are skipped; it throws when
  // all have, on a timeout, or when a rank aborted.
  virtual int recv_any(void* data, size_t bytes, int tag) = 0;

  // Names of segments this process created and has not yet unlinked (empty
  // after create() returns); for the tests.
  virtual std::vector<std::string> linked_segments() const = 0;
  // Whether every rank mapped every peer's shareable memory at create().
  virtual bool peer_memory() const = 0;
  // Collectives that ran in place on the peers' memory so far.
  virtual uint64_t in_place_calls() const = 0;
  // After an all_reduce failed: whether a peer may still write into its
  // buffer (it was in place, and a peer still working on it when this rank gave
  // up, say on a timeout, may write its slice later). The caller must then
  // never reuse that memory.
  virtual bool buffer_may_still_be_written() const = 0;

 protected:
  ShmCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank_;
  int size_;
};

// The header every collective publishes before its data moves, so calls that
// differ across ranks (another collective, dtype, element count or root) fail
// with a CollectiveError naming the first differing rank instead of exchanging
// garbage. Exposed for the tests.
enum class CollectiveKind : uint8_t {
  None,
  AllReduce,
  Reduce,
  Broadcast,
  AllGather,
  ReduceScatter,
  Gather,
  Scatter,
  AllToAll,
  Barrier,
};
const char* collective_name(CollectiveKind kind);  // "all_reduce", ...

struct CallHeader {
  uint64_t seq = 0;    // per-communicator collective count, from 1
  uint8_t kind = 0;    // CollectiveKind
  uint8_t dtype = 0;   // DType, or 0xff when the call moves raw bytes
  uint8_t op = 0;      // ReduceOp (reductions)
  int32_t root = -1;   // rooted collectives
  uint64_t bytes = 0;  // this rank's payload (input bytes; per-rank block for gathers)
  // Where the buffer is in the rank's shareable memory, or kNotShared.
  uint64_t shared_offset = ~uint64_t{0};
  static constexpr uint64_t kNotShared = ~uint64_t{0};
};

// Removes /dev/shm segments named by this transport whose creating process no
// longer exists (a rank SIGKILLed between creating and unlinking its segment).
// Returns how many were removed. Called by create().
int remove_stale_segments();

}  // namespace openneuron::collectives
