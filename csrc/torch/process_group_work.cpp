// How a c10d call of the "neuron" backend runs: enqueued as a host function on
// one of the backend's streams after the caller's current stream, completed
// through a WorkState, and waited for by NeuronWork with NCCL's stream
// semantics. The collectives themselves are in process_group.cpp.
#include <ATen/core/ivalue.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <cstdio>

#include "bridge.h"
#include "graph_capture.h"
#include "process_group.h"

namespace openneuron::bridge {

// ------------------------------------------------------------------ WorkState

void WorkState::finish(std::string error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

bool WorkState::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto finished = [&] { return done_.load(std::memory_order_acquire); };
  // No deadline: wait_for(milliseconds::max()) would overflow the clock.
  if (timeout == ::kNoTimeout) {
    cv_.wait(lock, finished);
    return true;
  }
  return cv_.wait_for(lock, timeout, finished);
}

std::string WorkState::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

// ----------------------------------------------------------------- NeuronWork

namespace {

// Runs on the waiting stream after the collective's end: puts that stream in
// its error state when the collective failed, so the failure surfaces at the
// caller's next synchronisation instead of as silently wrong values.
struct FailureCheck {
  std::shared_ptr<WorkState> state;
};

int check_failure(void* user_data, char* err, size_t errlen) {
  std::unique_ptr<FailureCheck> check(static_cast<FailureCheck*>(user_data));
  const std::string error = check->state->error();
  if (error.empty()) return 0;
  std::snprintf(err, errlen, "%s", error.c_str());
  return 1;
}

}  // namespace

NeuronWork::NeuronWork(int rank, c10d::OpType type, std::string description, uint64_t seq,
                       c10::Device device, std::shared_ptr<WorkState> state, onrt_event_t done,
                       std::vector<at::Tensor> outputs, bool blocking,
                       c10::intrusive_ptr<c10::ivalue::Future> future,
                       std::shared_ptr<std::atomic<int>> source)
    : Work(rank, type),
      description_(std::move(description)),
      seq_(seq),
      device_(device),
      state_(std::move(state)),
      done_(done),
      outputs_(std::move(outputs)),
      blocking_(blocking),
      future_(std::move(future)),
      source_(std::move(source)) {}

NeuronWork::~NeuronWork() { onrt_event_destroy(done_); }

bool NeuronWork::isCompleted() { return state_->done() && onrt_event_query(done_) == ONRT_OK; }

bool NeuronWork::isSuccess() const { return state_->done() && state_->error().empty(); }

std::exception_ptr NeuronWork::exception() const {
  if (!state_->done() || state_->error().empty()) return nullptr;
  try {
    raise_failure();
  } catch (...) {
    return std::current_exception();
  }
}

void NeuronWork::raise_failure() const { C10_THROW_ERROR(DistBackendError, state_->error()); }

std::vector<at::Tensor> NeuronWork::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> NeuronWork::getFuture() { return future_; }

int NeuronWork::sourceRank() const {
  if (!source_) return Work::sourceRank();  // raises: not a recv from any rank
  // dist.recv(t) asks right after wait(), which only ordered the current stream.
  state_->wait_for(::kNoTimeout);
  if (!state_->error().empty()) raise_failure();
  return source_->load(std::memory_order_acquire);
}

void NeuronWork::blockCurrentStream() {
  if (state_->done() && !state_->error().empty()) raise_failure();
  onrt_stream_t current = current_runtime_stream(device_.index());
  ONRT_CHECK(onrt_stream_wait_event(current, done_));
  // A success already known needs no check on the stream. The collective may
  // have finished, with an error, since the first look: ask again.
  if (state_->done()) {
    if (!state_->error().empty()) raise_failure();
    return;
  }
  auto* check = new FailureCheck{state_};
  const onrt_status st = onrt_launch_host_fn(current, "c10d", check_failure, check);
  if (st != ONRT_OK) {
    delete check;
    raise_status(st, "onrt_launch_host_fn");
  }
}

void NeuronWork::synchronize() { blockCurrentStream(); }

bool NeuronWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == ::kNoTimeout && !blocking_) {
    blockCurrentStream();
    return true;
  }
  const bool finished = state_->wait_for(timeout);
  if (!finished) {
    C10_THROW_ERROR(DistBackendError,
                    description_ + ": timed out after " + std::to_string(timeout.count()) +
                        " ms waiting for the collective to complete (it keeps running; "
                        "the process group timeout bounds it)");
  }
  if (!state_->error().empty()) raise_failure();
  ONRT_CHECK(onrt_event_synchronize(done_));
  blockCurrentStream();
  return true;
}

// --------------------------------------------------------------- enqueueing

namespace {

struct Job {
  NeuronBackend* backend;
  std::function<void()> body;
  std::vector<at::Tensor> keep;  // the call's tensors, alive until the body ran
  std::shared_ptr<WorkState> state;
  std::string description;
  std::function<void(const std::string&)> on_failure;
};

std::string message_of(const std::exception& e) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

// The body's errors never fail the lane's stream: they are recorded in the
// WorkState (raised by Work::wait or by the waiting stream's check) and make
// the backend unusable, so the lane stays free to run the backend's shutdown.
int run_job(void* user_data, char*, size_t) {
  std::unique_ptr<Job> job(static_cast<Job*>(user_data));
  std::string error;
  try {
    job->body();
  } catch (const std::exception& e) {
    error = message_of(e);
    if (error.rfind(job->description, 0) != 0) error = job->description + ": " + error;
  }
  if (!error.empty()) job->on_failure(error);
  job->keep.clear();
  job->state->finish(std::move(error));
  return 0;
}

}  // namespace

onrt_stream_t NeuronBackend::lane_stream(c10::DeviceIndex device, Lane lane) {
  std::lock_guard<std::mutex> lock(mutex_);
  Streams* entry = nullptr;
  for (auto& s : streams_) {
    if (s.device == device) entry = &s;
  }
  if (entry == nullptr) {
    streams_.push_back(Streams{device, {nullptr, nullptr, nullptr}});
    entry = &streams_.back();
  }
  onrt_stream_t& s = entry->lanes[static_cast<int>(lane)];
  if (s == nullptr) ONRT_CHECK(onrt_stream_create(device, 0, &s));
  return s;
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::enqueue(Call call) {
  capture_unsupported("a collective");
  check_usable(call.name);
  ensure_initialized();
  const uint64_t seq = ++seq_;
  const c10::DeviceIndex device = call.device.index();
  onrt_stream_t lane = lane_stream(device, call.lane);
  onrt_stream_t current = current_runtime_stream(device);

  // The lane waits for the work that produced the inputs.
  onrt_event_t ready = nullptr;
  ONRT_CHECK(onrt_event_create(ONRT_EVENT_DEFAULT, &ready));
  onrt_status st = onrt_event_record(ready, current);
  if (st == ONRT_OK) st = onrt_stream_wait_event(lane, ready);
  onrt_event_destroy(ready);
  if (st != ONRT_OK) raise_status(st, "ordering a collective after the current stream");

  auto state = std::make_shared<WorkState>();
  // The transport's messages carry the collective's number within the group.
  std::string description =
      std::string(call.name) + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  auto* job =
      new Job{this,  std::move(call.body), std::move(call.keep),
              state, description,          [this](const std::string& error) { fail(error); }};
  st = onrt_launch_host_fn(lane, call.name, run_job, job);
  if (st != ONRT_OK) {
    delete job;
    raise_status(st, "onrt_launch_host_fn");
  }

  const c10::Stream lane_stream_c10(c10::Stream::UNSAFE, call.device, onrt_stream_id(lane));
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    c10::StreamGuard guard(lane_stream_c10);
    if (call.epilogue) call.epilogue();
    // Marked complete on the lane: its users (DDP's reducer, FSDP) wait through
    // the Future's event, which orders their stream after the collective.
    future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                      std::vector<c10::Device>{call.device});
    future->markCompleted(c10::IValue(call.outputs));
  }
  onrt_event_t done = nullptr;
  ONRT_CHECK(onrt_event_create(ONRT_EVENT_DEFAULT, &done));
  st = onrt_event_record(done, lane);
  if (st != ONRT_OK) {
    onrt_event_destroy(done);
    raise_status(st, "onrt_event_record");
  }
  return c10::make_intrusive<NeuronWork>(rank_, call.type, std::move(description), seq, call.device,
                                         std::move(state), done, std::move(call.outputs),
                                         call.blocking, std::move(future), std::move(call.source));
}

void NeuronBackend::check_usable(const char* name) const {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  C10_THROW_ERROR(DistBackendError, std::string(name) +
                                        ": the neuron process group failed earlier and cannot be "
                                        "used again (destroy it and create a new one): " +
                                        error_);
}

void NeuronBackend::fail(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty()) error_ = message;
  }
  failed_.store(true, std::memory_order_release);
  if (comm_) comm_->abort(message);
}

void NeuronBackend::abort() { fail("the process group was aborted"); }

void NeuronBackend::shutdown() {
  std::vector<Streams> streams;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams.swap(streams_);
  }
  // Destroying a stream waits for its pending calls; each is bounded by the
  // process group timeout.
  for (auto& s : streams) {
    for (onrt_stream_t lane : s.lanes) {
      if (lane != nullptr) onrt_stream_destroy(lane);
    }
  }
  comm_.reset();
  if (gloo_) gloo_->shutdown();
}

NeuronBackend::~NeuronBackend() {
  try {
    shutdown();
  } catch (...) {
  }
}

}  // namespace openneuron::bridge
