// The collectives of the c10d backend "neuron": argument checks in c10d's words,
// then a body run on the backend's stream (process_group_work.cpp) that hands raw
// device pointers to the shared-memory transport, or CPU views of them to Gloo
// when the group spans hosts. Also the split for DeviceMesh and the Python binding.
#include "process_group.h"

#include <ATen/ATen.h>
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "bridge.h"
#include "engine.h"

namespace py = pybind11;
PYBIND11_DECLARE_HOLDER_TYPE(T, c10::intrusive_ptr<T>, true);

namespace openneuron::bridge {

namespace {

using collectives::ReduceOp;

// ---------------------------------------------------------------- arguments

void check_tensor(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.defined(), name, ": undefined tensor");
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, name,
              ": the neuron backend takes neuron tensors, got a tensor on ", t.device(),
              " (use backend=\"cpu:gloo,neuron:neuron\" for CPU tensors)");
  TORCH_CHECK(!t.is_sparse(), name, ": sparse tensors are not supported by the neuron backend");
  TORCH_CHECK(t.is_non_overlapping_and_dense(), name, ": Tensors must be contiguous");
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* name) {
  TORCH_CHECK(tensors.size() == 1, name,
              ": the neuron backend takes one tensor per process (one device per rank), got ",
              tensors.size());
  check_tensor(tensors[0], name);
  return tensors[0];
}

void check_same(const at::Tensor& a, const at::Tensor& b, const char* name) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), name, ": tensors must have the same dtype, got ",
              a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.device() == b.device(), name, ": tensors must be on the same device, got ",
              a.device(), " and ", b.device());
}

size_t bytes_of(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }
size_t count_of(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }
void* ptr_of(const at::Tensor& t) { return t.numel() == 0 ? nullptr : t.data_ptr(); }

// What a c10d ReduceOp becomes: the transport's reduction, then (AVG,
// PREMUL_SUM) a scale applied on the stream after it.
struct Reduction {
  ReduceOp op = ReduceOp::Sum;
  bool average = false;
  std::optional<double> factor;
  at::Tensor tensor_factor;
};

Reduction reduction_of(const c10d::ReduceOp& op, const char* name) {
  Reduction r;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: r.op = ReduceOp::Sum; break;
    case c10d::ReduceOp::AVG: r.average = true; break;
    case c10d::ReduceOp::PRODUCT: r.op = ReduceOp::Product; break;
    case c10d::ReduceOp::MIN: r.op = ReduceOp::Min; break;
    case c10d::ReduceOp::MAX: r.op = ReduceOp::Max; break;
    case c10d::ReduceOp::BAND: r.op = ReduceOp::BitAnd; break;
    case c10d::ReduceOp::BOR: r.op = ReduceOp::BitOr; break;
    case c10d::ReduceOp::BXOR: r.op = ReduceOp::BitXor; break;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(s != nullptr, name, ": PREMUL_SUM without its factor");
      if (s->tensor_factor.defined()) {
        r.tensor_factor = s->tensor_factor;
      } else {
        r.factor = s->double_factor;
      }
      break;
    }
    default:
      TORCH_CHECK(false, name, ": reduce op ", static_cast<int>(op.op_),
                  " is not supported by the neuron backend");
  }
  return r;
}

// The scale AVG and PREMUL_SUM apply to the reduced tensor (PREMUL_SUM is
// applied after the sum: the same value up to rounding, one pass fewer).
std::function<void()> scale_epilogue(const Reduction& r, at::Tensor out, int size) {
  if (r.average) {
    return [out, size]() mutable {
      if (at::isIntegralType(out.scalar_type(), /*includeBool=*/true)) {
        out.div_(size, "trunc");
      } else if (out.is_complex()) {
        // Each part divided, as for the complex tensors c10d hands over as real.
        at::view_as_real(out).div_(size);
      } else {
        out.div_(size);
      }
    };
  }
  if (r.tensor_factor.defined()) {
    return [out, f = r.tensor_factor]() mutable { out.mul_(f.to(out.device())); };
  }
  if (r.factor) return [out, f = *r.factor]() mutable { out.mul_(f); };
  return nullptr;
}

// CPU tensors over the same memory, for Gloo (device memory is host memory on
// virtual cores; the views are only used inside the stream's host function).
at::Tensor cpu_view(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}
std::vector<at::Tensor> cpu_views(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(cpu_view(t));
  return out;
}
c10d::ReduceOp gloo_op(const Reduction& r, const c10d::ReduceOp& original) {
  return (r.average || r.factor || r.tensor_factor.defined()) ? c10d::ReduceOp(c10d::ReduceOp::SUM)
                                                              : original;
}

std::vector<void*> block_pointers(const at::Tensor& t, int blocks, size_t block_bytes) {
  std::vector<void*> out(blocks);
  auto* base = static_cast<char*>(ptr_of(t));
  for (int r = 0; r < blocks; ++r) out[r] = base == nullptr ? nullptr : base + r * block_bytes;
  return out;
}

std::vector<at::Tensor> concat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class StoreRendezvous : public collectives::Rendezvous {
 public:
  explicit StoreRendezvous(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::string& value) override {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string get(const std::string& key) override {
    const auto v = store_->get(key);
    return std::string(v.begin(), v.end());
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

std::atomic<uint64_t> g_instances{0};

}  // namespace

// ------------------------------------------------------------------ backend

NeuronBackend::NeuronBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                             std::chrono::milliseconds timeout, std::string group_name,
                             c10::intrusive_ptr<c10d::Backend> gloo)
    : Backend(rank, size),
      store_(std::move(store)),
      timeout_(timeout),
      group_name_(std::move(group_name)),
      gloo_(std::move(gloo)) {
  if (!gloo_) {
    StoreRendezvous rdv(store_);
    collectives::ShmOptions options;
    options.group_key = group_name_ + "." + std::to_string(g_instances.fetch_add(1));
    options.rank = rank;
    options.size = size;
    options.timeout = timeout;
    // The rank's core (torchrun scripts set it before init_process_group): the
    // large all_reduces of tensors allocated on it from now on work in place
    // on the peers' memory.
    options.device = current_device();
    try {
      comm_ = collectives::ShmCommunicator::create(rdv, options);
    } catch (const collectives::CollectiveError& e) {
      C10_THROW_ERROR(DistBackendError,
                      std::string("creating the neuron process group: ") + e.what());
    }
  }
}

c10::intrusive_ptr<c10d::Backend::Options> NeuronBackend::getBackendOptions() {
  auto options = c10::make_intrusive<Options>("neuron", timeout_);
  options->group_name = group_name_;
  return options;
}

c10::intrusive_ptr<c10d::Backend> NeuronBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                       const std::vector<int>& ranks,
                                                       const c10::intrusive_ptr<Options>& opts) {
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) return nullptr;
  const int new_rank = static_cast<int>(it - ranks.begin());
  std::string name = opts && !opts->group_name.empty() ? opts->group_name : group_name_ + ".split";
  const auto timeout = opts ? opts->timeout : timeout_;
  c10::intrusive_ptr<c10d::Backend> gloo;
  if (gloo_) {
    gloo = gloo_->split(c10::make_intrusive<c10d::PrefixStore>("gloo/", store), ranks,
                        gloo_->getBackendOptions());
  }
  auto backend = c10::make_intrusive<NeuronBackend>(store, new_rank, static_cast<int>(ranks.size()),
                                                    timeout, std::move(name), std::move(gloo));
  return backend;
}

// --------------------------------------------------------------- reductions

// A failed all_reduce whose peers may still write into the tensor (it ran in
// place on their memory, and one was still at work when this rank gave up):
// the tensor's memory must never be handed out again, so it is kept for the
// rest of the process.
void NeuronBackend::shm_all_reduce(const at::Tensor& t, collectives::ReduceOp op) {
  try {
    comm_->all_reduce(ptr_of(t), count_of(t), to_dtype(t.scalar_type()), op);
  } catch (const collectives::CollectiveError& e) {
    if (!comm_->buffer_may_still_be_written()) throw;
    static std::mutex mu;
    static auto* kept = new std::vector<c10::Storage>;  // never freed, on purpose
    {
      std::lock_guard<std::mutex> lock(mu);
      kept->push_back(t.storage());
    }
    throw collectives::CollectiveError(
        std::string(e.what()) +
        " (the tensor's memory stays allocated for the rest of the process: a peer may still "
        "write into it)");
  }
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "all_reduce");
  const Reduction r = reduction_of(opts.reduceOp, "all_reduce");
  Call call{c10d::OpType::ALLREDUCE, "all_reduce", t.device(), {t}, {t}};
  if (gloo_) {
    call.body = [this, t, op = gloo_op(r, opts.reduceOp)] {
      std::vector<at::Tensor> v{cpu_view(t)};
      c10d::AllreduceOptions o;
      o.reduceOp = op;
      gloo_->allreduce(v, o)->wait();
    };
  } else {
    call.body = [this, t, r] { shm_all_reduce(t, r.op); };
  }
  call.epilogue = scale_epilogue(r, t, size_);
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "allreduce_coalesced: no tensors");
  for (const auto& t : tensors) {
    check_tensor(t, "allreduce_coalesced");
    check_same(t, tensors[0], "allreduce_coalesced");
  }
  const Reduction r = reduction_of(opts.reduceOp, "allreduce_coalesced");
  Call call{c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors[0].device(),
            tensors, tensors};
  if (gloo_) {
    call.body = [this, tensors, op = gloo_op(r, opts.reduceOp)] {
      for (const auto& t : tensors) {
        std::vector<at::Tensor> v{cpu_view(t)};
        c10d::AllreduceOptions o;
        o.reduceOp = op;
        gloo_->allreduce(v, o)->wait();
      }
    };
  } else {
    call.body = [this, tensors, r] {
      for (const auto& t : tensors) shm_all_reduce(t, r.op);
    };
  }
  std::vector<std::function<void()>> scales;
  for (const auto& t : tensors) {
    if (auto f = scale_epilogue(r, t, size_)) scales.push_back(std::move(f));
  }
  if (!scales.empty()) call.epilogue = [scales] {
    for (const auto& f : scales) f();
  };
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  const Reduction r = reduction_of(opts.reduceOp, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "reduce: invalid root rank ", root);
  Call call{c10d::OpType::REDUCE, "reduce", t.device(), {t}, {t}};
  if (gloo_) {
    call.body = [this, t, root, op = gloo_op(r, opts.reduceOp)] {
      std::vector<at::Tensor> v{cpu_view(t)};
      c10d::ReduceOptions o;
      o.reduceOp = op;
      o.rootRank = root;
      gloo_->reduce(v, o)->wait();
    };
  } else {
    call.body = [this, t, r, root] {
      comm_->reduce(ptr_of(t), count_of(t), to_dtype(t.scalar_type()), r.op, root);
    };
  }
  if (rank_ == root) call.epilogue = scale_epilogue(r, t, size_);
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return reduce_scatter_tensor_coalesced(outs, ins, opts);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor";
  TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(), name,
              ": expected as many outputs as inputs, got ", outputs.size(), " and ",
              inputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_tensor(outputs[i], name);
    check_tensor(inputs[i], name);
    check_same(outputs[i], inputs[i], name);
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_, name,
                ": input tensor must be the same size as output size times world size (input ",
                inputs[i].numel(), " elements, output ", outputs[i].numel(), ", world size ",
                size_, ")");
  }
  const Reduction r = reduction_of(opts.reduceOp, name);
  Call call{c10d::OpType::_REDUCE_SCATTER_BASE, name, outputs[0].device(),
            concat(inputs, outputs), outputs};
  if (gloo_) {
    call.body = [this, outputs, inputs, op = gloo_op(r, opts.reduceOp)] {
      for (size_t i = 0; i < outputs.size(); ++i) {
        at::Tensor out = cpu_view(outputs[i]), in = cpu_view(inputs[i]);
        c10d::ReduceScatterOptions o;
        o.reduceOp = op;
        gloo_->_reduce_scatter_base(out, in, o)->wait();
      }
    };
  } else {
    call.body = [this, outputs, inputs, r] {
      for (size_t i = 0; i < outputs.size(); ++i) {
        const auto blocks = block_pointers(inputs[i], size_, bytes_of(outputs[i]));
        comm_->reduce_scatter(blocks.data(), ptr_of(outputs[i]), count_of(outputs[i]),
                              to_dtype(outputs[i].scalar_type()), r.op);
      }
    };
  }
  std::vector<std::function<void()>> scales;
  for (const auto& t : outputs) {
    if (auto f = scale_epilogue(r, t, size_)) scales.push_back(std::move(f));
  }
  if (!scales.empty()) call.epilogue = [scales] {
    for (const auto& f : scales) f();
  };
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter";
  const at::Tensor& out = single(outputs, name);
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, name,
              ": expected one list of ", size_, " input tensors");
  for (const auto& t : inputs[0]) {
    check_tensor(t, name);
    check_same(t, out, name);
    TORCH_CHECK(t.numel() == out.numel(), name, ": input tensors must have the output's size (",
                out.numel(), " elements), got ", t.numel());
  }
  const Reduction r = reduction_of(opts.reduceOp, name);
  std::vector<at::Tensor> ins = inputs[0];
  Call call{c10d::OpType::REDUCE_SCATTER, name, out.device(), concat(ins, {out}), {out}};
  if (gloo_) {
    // Gloo's list form goes through its own staging; the base form is enough.
    call.body = [this, ins, out, op = gloo_op(r, opts.reduceOp)] {
      at::Tensor flat = at::cat(cpu_views(ins));
      at::Tensor o = cpu_view(out);
      c10d::ReduceScatterOptions ro;
      ro.reduceOp = op;
      gloo_->_reduce_scatter_base(o, flat, ro)->wait();
    };
  } else {
    call.body = [this, ins, out, r] {
      std::vector<const void*> blocks;
      for (const auto& t : ins) blocks.push_back(ptr_of(t));
      comm_->reduce_scatter(blocks.data(), ptr_of(out), count_of(out), to_dtype(out.scalar_type()),
                            r.op);
    };
  }
  call.epilogue = scale_epilogue(r, out, size_);
  return enqueue(std::move(call));
}

// ------------------------------------------------------------ data movement

c10::intrusive_ptr<c10d::Work> NeuronBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "broadcast: invalid root rank ", root);
  Call call{c10d::OpType::BROADCAST, "broadcast", t.device(), {t}, {t}};
  if (gloo_) {
    call.body = [this, t, root] {
      std::vector<at::Tensor> v{cpu_view(t)};
      c10d::BroadcastOptions o;
      o.rootRank = root;
      gloo_->broadcast(v, o)->wait();
    };
  } else {
    call.body = [this, t, root] { comm_->broadcast(ptr_of(t), bytes_of(t), root); };
  }
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* name = "all_gather";
  const at::Tensor& in = single(inputs, name);
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, name,
              ": expected one list of ", size_, " output tensors");
  for (const auto& t : outputs[0]) {
    check_tensor(t, name);
    check_same(t, in, name);
    TORCH_CHECK(t.numel() == in.numel(), name,
                ": output tensors must have the input's size (", in.numel(),
                " elements), got ", t.numel(), "; all ranks must pass the same size");
  }
  std::vector<at::Tensor> outs = outputs[0];
  Call call{c10d::OpType::ALLGATHER, name, in.device(), concat(outs, {in}), outs};
  if (gloo_) {
    call.body = [this, outs, in] {
      std::vector<std::vector<at::Tensor>> o{cpu_views(outs)};
      std::vector<at::Tensor> i{cpu_view(in)};
      gloo_->allgather(o, i)->wait();
    };
  } else {
    call.body = [this, outs, in] {
      std::vector<void*> ptrs;
      for (const auto& t : outs) ptrs.push_back(ptr_of(t));
      comm_->all_gather(ptr_of(in), bytes_of(in), ptrs.data());
    };
  }
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "allgather_coalesced: expected one output list per input");
  std::vector<at::Tensor> flat_outputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(static_cast<int>(outputs[i].size()) == size_, "allgather_coalesced: expected ",
                size_, " outputs per input");
    check_tensor(inputs[i], "allgather_coalesced");
    at::Tensor flat = at::empty({size_, inputs[i].numel()}, inputs[i].options());
    flat_outputs.push_back(flat);
  }
  auto work = allgather_into_tensor_coalesced(flat_outputs, inputs, opts);
  // Copy into the caller's list on the current stream, after the gather.
  work->wait();
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (int r = 0; r < size_; ++r) outputs[i][r].copy_(flat_outputs[i][r].view_as(outputs[i][r]));
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_allgather_base(at::Tensor& output,
                                                              at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return allgather_into_tensor_coalesced(outs, ins, opts);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* name = "all_gather_into_tensor";
  TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(), name,
              ": expected as many outputs as inputs, got ", outputs.size(), " and ",
              inputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_tensor(outputs[i], name);
    check_tensor(inputs[i], name);
    check_same(outputs[i], inputs[i], name);
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size_, name,
                ": output tensor size must be equal to world_size times input tensor size (",
                "output ", outputs[i].numel(), " elements, input ", inputs[i].numel(),
                ", world size ", size_, ")");
  }
  Call call{c10d::OpType::_ALLGATHER_BASE, name, outputs[0].device(), concat(inputs, outputs),
            outputs};
  if (gloo_) {
    call.body = [this, outputs, inputs] {
      for (size_t i = 0; i < outputs.size(); ++i) {
        at::Tensor o = cpu_view(outputs[i]), in = cpu_view(inputs[i]);
        gloo_->_allgather_base(o, in)->wait();
      }
    };
  } else {
    call.body = [this, outputs, inputs] {
      for (size_t i = 0; i < outputs.size(); ++i) {
        const auto blocks = block_pointers(outputs[i], size_, bytes_of(inputs[i]));
        comm_->all_gather(ptr_of(inputs[i]), bytes_of(inputs[i]), blocks.data());
      }
    };
  }
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::GatherOptions& opts) {
  const char* name = "gather";
  const at::Tensor& in = single(inputs, name);
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, name, ": invalid root rank ", root);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, name,
                ": requires a list of ", size_, " output tensors on the root");
    outs = outputs[0];
    for (const auto& t : outs) {
      check_tensor(t, name);
      check_same(t, in, name);
      TORCH_CHECK(t.numel() == in.numel(), name, ": output tensors must have the input's size");
    }
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), name,
                ": requires empty output on non-root");
  }
  Call call{c10d::OpType::GATHER, name, in.device(), concat(outs, {in}), outs};
  if (gloo_) {
    call.body = [this, outs, in, root] {
      std::vector<std::vector<at::Tensor>> o;
      if (!outs.empty()) o.push_back(cpu_views(outs));
      std::vector<at::Tensor> i{cpu_view(in)};
      c10d::GatherOptions go;
      go.rootRank = root;
      gloo_->gather(o, i, go)->wait();
    };
  } else {
    call.body = [this, outs, in, root] {
      std::vector<void*> ptrs;
      for (const auto& t : outs) ptrs.push_back(ptr_of(t));
      comm_->gather(ptr_of(in), bytes_of(in), ptrs.empty() ? nullptr : ptrs.data(), root);
    };
  }
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::scatter(std::vector<at::Tensor>& outputs,
                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                      const c10d::ScatterOptions& opts) {
  const char* name = "scatter";
  const at::Tensor& out = single(outputs, name);
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, name, ": invalid root rank ", root);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, name,
                ": requires a list of ", size_, " input tensors on the root");
    ins = inputs[0];
    for (const auto& t : ins) {
      check_tensor(t, name);
      check_same(t, out, name);
      TORCH_CHECK(t.numel() == out.numel(), name, ": input tensors must have the output's size");
    }
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), name,
                ": requires empty input on non-root");
  }
  Call call{c10d::OpType::SCATTER, name, out.device(), concat(ins, {out}), {out}};
  if (gloo_) {
    call.body = [this, ins, out, root] {
      std::vector<std::vector<at::Tensor>> i;
      if (!ins.empty()) i.push_back(cpu_views(ins));
      std::vector<at::Tensor> o{cpu_view(out)};
      c10d::ScatterOptions so;
      so.rootRank = root;
      gloo_->scatter(o, i, so)->wait();
    };
  } else {
    call.body = [this, ins, out, root] {
      std::vector<const void*> ptrs;
      for (const auto& t : ins) ptrs.push_back(ptr_of(t));
      comm_->scatter(ptrs.empty() ? nullptr : ptrs.data(), ptr_of(out), bytes_of(out), root);
    };
  }
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                            std::vector<int64_t>& output_splits,
                                                            std::vector<int64_t>& input_splits,
                                                            const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all_single";
  check_tensor(output, name);
  check_tensor(input, name);
  check_same(output, input, name);
  TORCH_CHECK(output.is_contiguous() && input.is_contiguous(), name, ": Tensors must be contiguous");
  // Splits count rows (dim 0); none means equal parts.
  auto row_bytes = [](const at::Tensor& t) -> size_t {
    return t.dim() == 0 || t.size(0) == 0 ? t.element_size() : bytes_of(t) / t.size(0);
  };
  auto layout = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* which) {
    std::vector<size_t> bytes(size_), offsets(size_);
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (splits.empty()) {
      TORCH_CHECK(rows % size_ == 0, name, ": tensor's dim 0 (", rows,
                  ") does not divide equally across group size ", size_);
    } else {
      TORCH_CHECK(static_cast<int>(splits.size()) == size_, name, ": ", which,
                  " split sizes must have ", size_, " entries, got ", splits.size());
      int64_t total = 0;
      for (int64_t s : splits) {
        TORCH_CHECK(s >= 0, name, ": negative split size");
        total += s;
      }
      TORCH_CHECK(total == rows, name, ": ", which, " split sizes sum to ", total,
                  " but the tensor has ", rows, " rows");
    }
    size_t at = 0;
    for (int r = 0; r < size_; ++r) {
      const int64_t n = splits.empty() ? rows / size_ : splits[r];
      bytes[r] = static_cast<size_t>(n) * row_bytes(t);
      offsets[r] = at;
      at += bytes[r];
    }
    return std::make_pair(bytes, offsets);
  };
  const auto in_layout = layout(input, input_splits, "input");
  const auto out_layout = layout(output, output_splits, "output");
  const std::vector<size_t> in_bytes = in_layout.first, in_off = in_layout.second;
  const std::vector<size_t> out_bytes = out_layout.first, out_off = out_layout.second;
  Call call{c10d::OpType::ALLTOALL_BASE, name, output.device(), {input, output}, {output}};
  if (gloo_) {
    call.body = [this, output, input, output_splits, input_splits] {
      at::Tensor o = cpu_view(output), i = cpu_view(input);
      auto os = output_splits, is = input_splits;
      gloo_->alltoall_base(o, i, os, is)->wait();
    };
  } else {
    call.body = [this, output, input, in_bytes, in_off, out_bytes, out_off] {
      std::vector<const void*> ins(size_);
      std::vector<void*> outs(size_);
      for (int r = 0; r < size_; ++r) {
        ins[r] = static_cast<const char*>(input.data_ptr()) + in_off[r];
        outs[r] = static_cast<char*>(output.data_ptr()) + out_off[r];
      }
      comm_->all_to_all(ins.data(), in_bytes.data(), outs.data(), out_bytes.data());
    };
  }
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all";
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
              name, ": expected ", size_, " input and output tensors");
  for (int r = 0; r < size_; ++r) {
    check_tensor(outputs[r], name);
    check_tensor(inputs[r], name);
    check_same(outputs[r], inputs[0], name);
    check_same(inputs[r], inputs[0], name);
  }
  Call call{c10d::OpType::ALLTOALL, name, inputs[0].device(), concat(inputs, outputs), outputs};
  if (gloo_) {
    call.body = [this, outputs, inputs] {
      auto o = cpu_views(outputs), i = cpu_views(inputs);
      gloo_->alltoall(o, i)->wait();
    };
  } else {
    call.body = [this, outputs, inputs] {
      std::vector<const void*> ins;
      std::vector<void*> outs;
      std::vector<size_t> in_bytes, out_bytes;
      for (int r = 0; r < size_; ++r) {
        ins.push_back(ptr_of(inputs[r]));
        outs.push_back(ptr_of(outputs[r]));
        in_bytes.push_back(bytes_of(inputs[r]));
        out_bytes.push_back(bytes_of(outputs[r]));
      }
      comm_->all_to_all(ins.data(), in_bytes.data(), outs.data(), out_bytes.data());
    };
  }
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::barrier(const c10d::BarrierOptions& opts) {
  c10::DeviceIndex device = current_device();
  if (opts.device && opts.device->type() == c10::DeviceType::PrivateUse1) {
    device = opts.device->index();
  } else if (!opts.device_ids.empty()) {
    device = static_cast<c10::DeviceIndex>(opts.device_ids[0]);
  }
  check_device_index(device);
  Call call{c10d::OpType::BARRIER, "barrier", c10::Device(c10::DeviceType::PrivateUse1, device)};
  if (gloo_) {
    call.body = [this] { gloo_->barrier()->wait(); };
  } else {
    call.body = [this] { comm_->barrier(); };
  }
  call.blocking = true;  // barrier() returns once every rank arrived, as with NCCL
  return enqueue(std::move(call));
}

// ----------------------------------------------------------- point to point

c10::intrusive_ptr<c10d::Work> NeuronBackend::send(std::vector<at::Tensor>& tensors, int dst,
                                                   int tag) {
  const at::Tensor& t = single(tensors, "send");
  TORCH_CHECK(dst >= 0 && dst < size_ && dst != rank_, "send: invalid destination rank ", dst);
  Call call{c10d::OpType::SEND, "send", t.device(), {t}, {t}};
  call.lane = Lane::Send;
  if (gloo_) {
    call.body = [this, t, dst, tag] {
      std::vector<at::Tensor> v{cpu_view(t)};
      gloo_->send(v, dst, tag)->wait();
    };
  } else {
    call.body = [this, t, dst, tag] { comm_->send(ptr_of(t), bytes_of(t), dst, tag); };
  }
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::recv(std::vector<at::Tensor>& tensors, int src,
                                                   int tag) {
  const at::Tensor& t = single(tensors, "recv");
  TORCH_CHECK(src >= 0 && src < size_ && src != rank_, "recv: invalid source rank ", src);
  Call call{c10d::OpType::RECV, "recv", t.device(), {t}, {t}};
  call.lane = Lane::Recv;
  if (gloo_) {
    call.body = [this, t, src, tag] {
      std::vector<at::Tensor> v{cpu_view(t)};
      gloo_->recv(v, src, tag)->wait();
    };
  } else {
    call.body = [this, t, src, tag] { comm_->recv(ptr_of(t), bytes_of(t), src, tag); };
  }
  return enqueue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                            int tag) {
  const at::Tensor& t = single(tensors, "recv");
  TORCH_CHECK(size_ > 1, "recv: no other rank to receive from in a group of 1");
  Call call{c10d::OpType::RECVANYSOURCE, "recv", t.device(), {t}, {t}};
  call.lane = Lane::Recv;
  call.source = std::make_shared<std::atomic<int>>(-1);
  if (gloo_) {
    call.body = [this, t, tag, source = call.source] {
      std::vector<at::Tensor> v{cpu_view(t)};
      auto work = gloo_->recvAnysource(v, tag);
      work->wait();
      source->store(work->sourceRank(), std::memory_order_release);
    };
  } else {
    call.body = [this, t, tag, source = call.source] {
      source->store(comm_->recv_any(ptr_of(t), bytes_of(t), tag), std::memory_order_release);
    };
  }
  return enqueue(std::move(call));
}

// ------------------------------------------------------------------- Python

void bind_distributed(py::module_& m) {
  // The base class's pybind type is registered by torch.distributed.
  py::module_::import("torch.distributed");
  py::class_<NeuronBackend, c10d::Backend, c10::intrusive_ptr<NeuronBackend>>(m, "NeuronBackend")
      // split_group deep-copies `options`; nothing of ours needs to travel.
      .def_property_readonly("options", [](NeuronBackend&) { return py::none(); })
      .def("perform_nocolor_split", [](NeuronBackend&, py::object) {})
      .def_property_readonly("uses_shared_memory", &NeuronBackend::uses_shared_memory)
      .def_property_readonly("uses_peer_memory", &NeuronBackend::uses_peer_memory)
      .def_property_readonly("in_place_collectives", &NeuronBackend::in_place_collectives);
  m.def(
      "_create_neuron_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, const std::string& group_name,
         std::optional<c10::intrusive_ptr<c10d::Backend>> gloo) {
        return c10::make_intrusive<NeuronBackend>(store, rank, size, timeout, group_name,
                                                  gloo ? *gloo : nullptr);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("group_name"), py::arg("gloo") = py::none(),
      py::call_guard<py::gil_scoped_release>());
}

}  // namespace openneuron::bridge
