// Everything the oneDNN engines share (GEMM in gemm.cpp, convolution in
// conv.cpp): the process's one oneDNN CPU engine, a oneDNN stream per thread,
// the dtype mapping, the team size for a problem, and the one cache of built
// primitives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <dnnl.h>

#include "openneuron/kernels/types.h"

namespace openneuron::kernels::detail {

dnnl_engine_t dnnl_cpu_engine();    // nullptr if oneDNN cannot create it
dnnl_stream_t dnnl_thread_stream();  // this thread's stream on that engine
// f32/bf16/f16 map to oneDNN types; anything else is dnnl_data_type_undef.
dnnl_data_type_t dnnl_type(DType d);
// "oneDNN status N", for error messages.
std::string dnnl_status_str(dnnl_status_t s);

// oneDNN's CPU runtime is OpenMP: a primitive forks a team from the calling
// thread, whose threads then spin for milliseconds after the call on the cores the
// pool's next kernels need, and waking them costs tens of microseconds. So the
// engines run oneDNN on the calling thread alone and spread large problems over
// the kernel pool themselves (GEMM above kDnnlSerialFlops, attention tiles, the
// RNN recurrences: DnnlTeamFor()); convolutions keep oneDNN's team above
// kDnnlSerialFlops. DnnlTeamFor holds the calling thread's team size for one call:
// set before its primitive is built (oneDNN blocks for the threads it will have)
// and at every execution, from the problem's size only, so a cached primitive
// always runs with the team it was built for.
inline constexpr double kDnnlSerialFlops = 16e6;

class DnnlTeamFor {
 public:
  explicit DnnlTeamFor(double flops);
  DnnlTeamFor() : DnnlTeamFor(0.0) {}  // the calling thread alone
  ~DnnlTeamFor();
  DnnlTeamFor(const DnnlTeamFor&) = delete;
  DnnlTeamFor& operator=(const DnnlTeamFor&) = delete;

 private:
  int saved_ = 0;  // 0: left as it was
};

// A built primitive and the user-mode scratchpad it runs with; `prim` is null
// and `error` says why when oneDNN has no primitive for the problem. The
// engines derive from it to add the memory objects they bind on each call.
struct DnnlPrimitive {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_t scratch = nullptr;
  std::vector<uint64_t> scratch_buf;
  std::string error;

  DnnlPrimitive() = default;
  DnnlPrimitive(const DnnlPrimitive&) = delete;
  DnnlPrimitive& operator=(const DnnlPrimitive&) = delete;
  virtual ~DnnlPrimitive();

  // Creates `prim` from `pd` and the scratchpad memory `pd` asks for.
  dnnl_status_t create(const_dnnl_primitive_desc_t pd, dnnl_engine_t eng);
};

// The primitive cache, one per thread: a primitive and the memory objects
// whose data handles each call sets are then never used by two threads at
// once, so lookups and executions need no lock. Keys are a kind byte plus the
// bytes of the engine's problem struct (zeroed before it is filled, so equal
// problems have equal bytes). Past kDnnlPrimitiveCacheCap entries the thread's
// cache is emptied: a bound on memory for shape-churning workloads, set high
// enough that a model's working set of GEMM and convolution shapes stays.
inline constexpr size_t kDnnlPrimitiveCacheCap = 4096;

enum class DnnlPrimitiveKind : char { Matmul = 'm', Convolution = 'c' };

struct DnnlKeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using DnnlPrimitiveCache =
    std::unordered_map<std::string, std::unique_ptr<DnnlPrimitive>, DnnlKeyHash, std::equal_to<>>;
DnnlPrimitiveCache& dnnl_primitive_cache();  // this thread's

// This thread's primitive for `key`, built by build(key) on first use.
template <class Prim, class Key>
Prim& cached_primitive(DnnlPrimitiveKind kind, const Key& key,
                       std::unique_ptr<Prim> (*build)(const Key&)) {
  static_assert(std::is_base_of_v<DnnlPrimitive, Prim> && std::is_trivially_copyable_v<Key>);
  char bytes[1 + sizeof(Key)];
  bytes[0] = static_cast<char>(kind);
  std::memcpy(bytes + 1, &key, sizeof(Key));
  const std::string_view k(bytes, sizeof bytes);
  DnnlPrimitiveCache& cache = dnnl_primitive_cache();
  auto it = cache.find(k);
  if (it == cache.end()) {
    if (cache.size() > kDnnlPrimitiveCacheCap) cache.clear();
    it = cache.emplace(std::string(k), build(key)).first;
  }
  return static_cast<Prim&>(*it->second);
}

}  // namespace openneuron::kernels::detail
