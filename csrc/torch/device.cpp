// Runtime glue: errors, lazy initialisation, current device and streams, the
// device guard, the PrivateUse1 hooks and the per-device generators.
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_set>
#include <vector>

#include "bridge.h"
#include "generator.h"
#include "graph_capture.h"

namespace openneuron::bridge {

[[noreturn]] void raise_status(onrt_status status, const char* what) {
  std::string msg = onrt_last_error();
  if (msg.empty()) msg = std::string(onrt_status_name(status)) + " in " + what;
  switch (status) {
    case ONRT_ERROR_OUT_OF_MEMORY:
      TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    case ONRT_ERROR_INVALID_DEVICE:
      TORCH_CHECK_INDEX(false, msg);
    case ONRT_ERROR_INVALID_ARGUMENT:
      TORCH_CHECK_VALUE(false, msg);
    case ONRT_ERROR_UNSUPPORTED:
      TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
    case ONRT_ERROR_INTERRUPTED:
      raise_interrupted(msg);
    case ONRT_ERROR_EXECUTION_FAILED:
      // The failing op was enqueued earlier than the line that waited (CUDA's hint).
      TORCH_CHECK(false, msg,
                  "\nDevice errors are reported at a later synchronisation; with "
                  "NEURON_LAUNCH_BLOCKING=1 each is raised at the Python line of its op.");
    default:
      TORCH_CHECK(false, msg);
  }
}

void ensure_initialized() {
  // onrt_is_initialized is a relaxed load: the common case costs nothing.
  if (onrt_is_initialized()) return;
  ONRT_CHECK(onrt_init());
}

int device_count() noexcept {
  int n = 0;
  if (onrt_device_count(&n) != ONRT_OK) return 0;
  return n;
}

namespace {
thread_local c10::DeviceIndex tls_device = 0;

// Current stream per device and thread, as the runtime stream id (0 = default).
constexpr int kMaxDevices = 64;
thread_local int64_t tls_stream_ids[kMaxDevices] = {};

// Streams handed out by getNewStream come from a small per-device pool used
// round-robin (as CUDA does): each runtime stream owns a worker thread, so
// creating one per request would exhaust the host.
constexpr int kStreamPoolSize = 4;
struct StreamPool {
  std::mutex mutex;
  std::vector<int64_t> ids;
  size_t next = 0;
};
StreamPool& stream_pool(c10::DeviceIndex index) {
  static std::vector<StreamPool> pools(kMaxDevices);
  return pools[index];
}
}  // namespace

void check_device_index(c10::DeviceIndex index) {
  const int n = device_count();
  if (index < 0 || index >= n) {
    TORCH_CHECK_INDEX(false, "neuron device index ", static_cast<int>(index),
                      " is out of range: ", n, " cores are available",
                      n > 0 ? " (neuron:0..neuron:" + std::to_string(n - 1) + ")" : std::string(),
                      ". Set OPENNEURON_NUM_CORES or NEURON_RT_VISIBLE_CORES to change them.");
  }
}

c10::DeviceIndex current_device() { return tls_device; }

void set_device(c10::DeviceIndex index) {
  check_device_index(index);
  tls_device = index;
}

onrt_stream_t runtime_stream(const c10::Stream& stream) {
  ensure_initialized();
  onrt_stream_t s = nullptr;
  ONRT_CHECK(onrt_stream_from_id(stream.device_index(), stream.id(), &s));
  return s;
}

c10::Stream current_stream(c10::DeviceIndex index) {
  if (index < 0) index = tls_device;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, index),
                     tls_stream_ids[index]);
}

onrt_stream_t current_runtime_stream(c10::DeviceIndex index) {
  ensure_initialized();
  onrt_stream_t s = nullptr;
  const int64_t id = tls_stream_ids[index];
  if (id == 0) {
    ONRT_CHECK(onrt_stream_get_default(index, &s));
  } else {
    ONRT_CHECK(onrt_stream_from_id(index, id, &s));
  }
  return s;
}

void set_current_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "expected a neuron stream, got a stream of ", stream.device());
  tls_stream_ids[stream.device_index()] = stream.id();
}

c10::Stream default_stream(c10::DeviceIndex index) {
  if (index < 0) index = tls_device;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, index), 0);
}

c10::Stream new_stream(c10::DeviceIndex index, int priority) {
  if (index < 0) index = tls_device;
  check_device_index(index);
  ensure_initialized();
  auto& pool = stream_pool(index);
  std::lock_guard<std::mutex> lock(pool.mutex);
  if (pool.ids.size() < kStreamPoolSize) {
    onrt_stream_t s = nullptr;
    ONRT_CHECK(onrt_stream_create(index, priority, &s));
    pool.ids.push_back(onrt_stream_id(s));
  }
  const int64_t id = pool.ids[pool.next++ % pool.ids.size()];
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, index), id);
}

// ------------------------------------------------------------- device guard

namespace {

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return static_type; }

  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(static_type, tls_device); }
  void setDevice(c10::Device d) const override { set_device(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override { tls_device = d.index(); }

  c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(d.index()); }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return new_stream(d.index(), priority);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return new_stream(d.index(), high_priority ? 1 : 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = current_stream(s.device_index());
    set_current_stream(s);
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count());
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ",
                static_cast<int>(device_index), " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    auto ev = static_cast<onrt_event_t>(*event);
    if (!ev) {
      const unsigned flags =
          flag == c10::EventFlag::BACKEND_DEFAULT ? ONRT_EVENT_TIMING : ONRT_EVENT_DEFAULT;
      ensure_initialized();
      ONRT_CHECK(onrt_event_create(flags, &ev));
      *event = ev;
    }
    ONRT_CHECK(onrt_event_record(ev, runtime_stream(stream)));
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    ONRT_CHECK(onrt_stream_wait_event(runtime_stream(stream), static_cast<onrt_event_t>(event)));
  }
  bool queryEvent(void* event) const override {
    if (!event) return true;
    const onrt_status st = onrt_event_query(static_cast<onrt_event_t>(event));
    if (st == ONRT_ERROR_NOT_READY) return false;
    ONRT_CHECK(st);
    return true;
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (event) onrt_event_destroy(static_cast<onrt_event_t>(event));
  }
  void synchronizeEvent(void* event) const override {
    if (!event) return;
    ONRT_CHECK(onrt_event_synchronize(static_cast<onrt_event_t>(event)));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    float ms = 0;
    ONRT_CHECK(onrt_event_elapsed_ms(static_cast<onrt_event_t>(start),
                                     static_cast<onrt_event_t>(end), &ms));
    return ms;
  }
  bool queryStream(const c10::Stream& stream) const override {
    const onrt_status st = onrt_stream_query(runtime_stream(stream));
    if (st == ONRT_ERROR_NOT_READY) return false;
    ONRT_CHECK(st);
    return true;
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    ONRT_CHECK(onrt_stream_synchronize(runtime_stream(stream)));
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    ensure_initialized();
    ONRT_CHECK(onrt_device_synchronize(device_index < 0 ? tls_device : device_index));
  }
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                             const c10::Stream& stream) const override {
    if (data_ptr.get()) ONRT_CHECK(onrt_record_stream(data_ptr.get(), runtime_stream(stream)));
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

// ------------------------------------------------------------------- hooks

// Pinned host memory: device memory is host memory on virtual cores, so pageable
// memory copies as fast as pinned would; the allocator only remembers what it
// handed out, so is_pinned() is true for it (DDP's Reducer asserts that).
class PinnedAllocator final : public at::Allocator {
 public:
  at::DataPtr allocate(size_t bytes) override {
    at::DataPtr p = c10::GetCPUAllocator()->allocate(bytes);
    void* ptr = p.get();
    if (ptr != nullptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.insert(ptr);
    }
    // The CPU allocator's deleter frees through its context; keep it and forget the pointer.
    auto* ctx = new Context{p.release_context(), p.get_deleter(), ptr, this};
    return {ptr, ctx, &PinnedAllocator::free, at::Device(at::kCPU)};
  }
  at::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  bool is_pinned(const void* ptr) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.count(ptr) != 0;
  }

 private:
  struct Context {
    void* inner;
    c10::DeleterFnPtr inner_free;
    void* ptr;
    PinnedAllocator* owner;
  };
  static void free(void* raw) {
    auto* ctx = static_cast<Context*>(raw);
    {
      std::lock_guard<std::mutex> lock(ctx->owner->mutex_);
      ctx->owner->live_.erase(ctx->ptr);
    }
    if (ctx->inner_free != nullptr) ctx->inner_free(ctx->inner);
    delete ctx;
  }
  mutable std::mutex mutex_;
  std::unordered_set<const void*> live_;
};

PinnedAllocator& pinned_allocator() {
  static PinnedAllocator* allocator = new PinnedAllocator();  // outlives every tensor
  return *allocator;
}

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return make_generator(index);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    int dev = 0;
    ONRT_CHECK(onrt_pointer_get_device(data, &dev));
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(dev));
  }
  bool isPinnedPtr(const void* ptr) const override { return pinned_allocator().is_pinned(ptr); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return onrt_is_initialized(); }
  void init() const override { ensure_initialized(); }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(device_count());
  }
  void setCurrentDevice(c10::DeviceIndex index) const override { set_device(index); }
  c10::DeviceIndex getCurrentDevice() const override { return tls_device; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    auto old = tls_device;
    set_device(index);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    return exchangeDevice(index);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    resize_storage_bytes(storage, new_bytes);
  }
};

struct HooksRegistrar {
  HooksRegistrar() {
    static NeuronHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  }
};
HooksRegistrar hooks_registrar;

}  // namespace

void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes) {
  auto* impl = storage.unsafeGetStorageImpl();
  const size_t old_bytes = impl->nbytes();
  if (new_bytes == old_bytes) return;
  c10::DataPtr fresh = impl->allocator()->allocate(new_bytes);
  const size_t keep = std::min(old_bytes, new_bytes);
  if (keep > 0) {
    capture_unsupported("a storage resize that keeps its contents");
    ONRT_CHECK(onrt_memcpy_async(fresh.get(), impl->data(), keep, ONRT_COPY_DEVICE_TO_DEVICE,
                                 current_runtime_stream(fresh.device().index())));
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(new_bytes);
}

// ---------------------------------------------------------------- generator

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::once_flag once;
  static std::vector<at::Generator> generators;
  std::call_once(once, [] {
    const int n = device_count();
    for (int i = 0; i < n; ++i) {
      generators.push_back(make_generator(static_cast<c10::DeviceIndex>(i)));
      generators.back().set_current_seed(c10::detail::getNonDeterministicRandom());
    }
  });
  if (index < 0) index = tls_device;
  check_device_index(index);
  return generators[index];
}

at::Generator make_generator(c10::DeviceIndex index) {
  if (index < 0) index = tls_device;
  return at::make_generator<NeuronGeneratorImpl>(index);
}

std::pair<uint64_t, uint64_t> philox_reserve(const std::optional<at::Generator>& gen,
                                             c10::DeviceIndex index, uint64_t increment) {
  at::Generator g = gen.has_value() && gen->defined() ? *gen : default_generator(index);
  auto* impl = at::check_generator<NeuronGeneratorImpl>(g);
  std::lock_guard<std::mutex> lock(g.mutex());
  return impl->reserve(increment);
}

}  // namespace openneuron::bridge
