#include "dnnl_context.h"

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

}  // namespace openneuron::kernels::detail
