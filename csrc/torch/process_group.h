// The c10d backend "neuron" (docs/distributed.md): torch.distributed's collectives
// on neuron tensors. Ranks on one host exchange through the shared-memory
// transport (csrc/collectives); a group spanning hosts goes through a Gloo group
// the Python creator makes, over CPU views of the device memory.
//
// Every call is ordered on the device stream like NCCL's: the collective runs as
// a host function on a stream of the backend's own, which first waits for the
// caller's current stream; Work::wait() makes the current stream wait for it
// without blocking the Python thread (wait(timeout) and barrier block it).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "openneuron/collectives/shm_communicator.h"
#include "openneuron/runtime.h"

namespace openneuron::bridge {

// Completion of one enqueued call, shared by its Work and the host function
// that runs it.
class WorkState {
 public:
  void finish(std::string error);  // "" on success
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Waits until done or the deadline (none for kNoTimeout); false on timeout.
  bool wait_for(std::chrono::milliseconds timeout);
  std::string error() const;  // "" unless it failed; valid once done()

 private:
  std::atomic<bool> done_{false};
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::string error_;
};

class NeuronWork : public c10d::Work {
 public:
  NeuronWork(int rank, c10d::OpType type, std::string description, uint64_t seq,
             c10::Device device, std::shared_ptr<WorkState> state, onrt_event_t done,
             std::vector<at::Tensor> outputs, bool blocking,
             c10::intrusive_ptr<c10::ivalue::Future> future,
             std::shared_ptr<std::atomic<int>> source = nullptr);
  ~NeuronWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  // Without a timeout: the current stream waits for the collective (the host
  // does not block), and a failure surfaces at that stream's next
  // synchronisation. With one (and for barrier): the host blocks, and a
  // timeout or failure raises DistBackendError here.
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override;
  void blockCurrentStream() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return seq_; }
  // A recv from any rank: the sender, once it arrived (blocks until then;
  // raises DistBackendError if the recv failed).
  int sourceRank() const override;

 private:
  [[noreturn]] void raise_failure() const;

  std::string description_;
  uint64_t seq_;
  c10::Device device_;
  std::shared_ptr<WorkState> state_;
  onrt_event_t done_;
  std::vector<at::Tensor> outputs_;
  bool blocking_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<std::atomic<int>> source_;  // set by a recv from any rank
};

class NeuronBackend : public c10d::Backend {
 public:
  // `gloo` is set when the group spans hosts: every call then goes through it.
  NeuronBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                std::chrono::milliseconds timeout, std::string group_name,
                c10::intrusive_ptr<c10d::Backend> gloo);
  ~NeuronBackend() override;

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsSplitting() const override { return true; }
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  void shutdown() override;
  void abort() override;
  bool uses_shared_memory() const { return !gloo_; }
  bool uses_peer_memory() const { return comm_ && comm_->peer_memory(); }
  uint64_t in_place_collectives() const { return comm_ ? comm_->in_place_calls() : 0; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;

 private:
  // all_reduce of one tensor on shared memory (the body of allreduce and
  // allreduce_coalesced).
  void shm_all_reduce(const at::Tensor& t, collectives::ReduceOp op);

  // Where a call runs: collectives in order on one stream; sends and receives
  // each on a stream of their own, so a rank that sends before it receives
  // never waits for a peer doing the same.
  enum class Lane { Collective, Send, Recv };
  using Body = std::function<void()>;
  struct Call {
    c10d::OpType type;
    const char* name;
    c10::Device device;
    std::vector<at::Tensor> keep;     // alive until the body has run
    std::vector<at::Tensor> outputs;  // Work::result() and the Future's value
    Body body{};
    Lane lane = Lane::Collective;
    bool blocking = false;
    // Applied on the lane's stream after the body (AVG, PREMUL_SUM): ordinary
    // device ops, so they run on the vector engines in stream order.
    std::function<void()> epilogue{};
    // A recv from any rank: the body stores the sender here for Work::sourceRank.
    std::shared_ptr<std::atomic<int>> source{};
  };
  c10::intrusive_ptr<c10d::Work> enqueue(Call call);
  onrt_stream_t lane_stream(c10::DeviceIndex device, Lane lane);
  void check_usable(const char* name) const;
  void fail(const std::string& message);

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  std::string group_name_;
  c10::intrusive_ptr<c10d::Backend> gloo_;
  std::atomic<uint64_t> seq_{0};

  mutable std::mutex mutex_;  // guards streams_ and error_
  // Set for a group on one host (created with the backend: init_process_group and
  // new_group are collective, so every member arrives); null when gloo_ is set.
  std::unique_ptr<collectives::ShmCommunicator> comm_;
  struct Streams {
    c10::DeviceIndex device;
    onrt_stream_t lanes[3];
  };
  std::vector<Streams> streams_;
  std::atomic<bool> failed_{false};
  std::string error_;
};

}  // namespace openneuron::bridge
