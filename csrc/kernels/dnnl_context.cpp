// The oneDNN CPU engine, the per-thread streams and primitive caches, and
// what every cached primitive owns (dnnl_context.h).
#include "dnnl_context.h"

#include <omp.h>

namespace openneuron::kernels::detail {

dnnl_engine_t dnnl_cpu_engine() {
  static dnnl_engine_t e = [] {
    dnnl_engine_t eng = nullptr;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) eng = nullptr;
    return eng;
  }();
  return e;
}

namespace {
struct StreamHolder {
  dnnl_stream_t s = nullptr;
  ~StreamHolder() {
    if (s) dnnl_stream_destroy(s);
  }
};
}  // namespace

dnnl_stream_t dnnl_thread_stream() {
  thread_local StreamHolder h;
  if (!h.s && dnnl_cpu_engine()) {
    dnnl_stream_create(&h.s, dnnl_cpu_engine(), dnnl_stream_default_flags);
  }
  return h.s;
}

dnnl_data_type_t dnnl_type(DType d) {
  switch (d) {
    case DType::Float32: return dnnl_f32;
    case DType::BFloat16: return dnnl_bf16;
    case DType::Float16: return dnnl_f16;
    default: return dnnl_data_type_undef;
  }
}

std::string dnnl_status_str(dnnl_status_t s) {
  return "oneDNN status " + std::to_string(static_cast<int>(s));
}

DnnlTeamFor::DnnlTeamFor(double flops) {
  if (flops >= kDnnlSerialFlops) return;
  saved_ = omp_get_max_threads();  // this thread's own setting (an OpenMP ICV)
  if (saved_ > 1)
    omp_set_num_threads(1);
  else
    saved_ = 0;
}

DnnlTeamFor::~DnnlTeamFor() {
  if (saved_ > 0) omp_set_num_threads(saved_);
}

DnnlPrimitive::~DnnlPrimitive() {
  if (scratch) dnnl_memory_destroy(scratch);
  if (prim) dnnl_primitive_destroy(prim);
}

dnnl_status_t DnnlPrimitive::create(const_dnnl_primitive_desc_t pd, dnnl_engine_t eng) {
  const dnnl_status_t s = dnnl_primitive_create(&prim, pd);
  const dnnl_memory_desc_t* sp_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (s == dnnl_success && sp_md) {
    const size_t bytes = dnnl_memory_desc_get_size(sp_md);
    if (bytes > 0) {
      scratch_buf.resize(bytes / 8 + 8);
      dnnl_memory_create(&scratch, sp_md, eng, scratch_buf.data());
    }
  }
  return s;
}

DnnlPrimitiveCache& dnnl_primitive_cache() {
  thread_local DnnlPrimitiveCache cache;
  return cache;
}

}  // namespace openneuron::kernels::detail
