// The one oneDNN CPU engine of the process and a oneDNN stream per thread,
// shared by every engine entry point that uses oneDNN (GEMM, convolution).
#pragma once

#include <cstddef>
#include <cstdint>

#include <dnnl.h>

#include "openneuron/kernels/types.h"

namespace openneuron::kernels::detail {

dnnl_engine_t dnnl_cpu_engine();    // nullptr if oneDNN cannot create it
dnnl_stream_t dnnl_thread_stream();  // this thread's stream on that engine
// f32/bf16/f16 map to oneDNN types; anything else is dnnl_data_type_undef.
dnnl_data_type_t dnnl_type(DType d);

// FNV-1a over a primitive cache key's bytes: the keys are plain structs
// compared with memcmp, so hashing their bytes agrees with their equality.
template <class Key>
struct BytesHash {
  size_t operator()(const Key& k) const {
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(Key); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
  }
};

}  // namespace openneuron::kernels::detail
