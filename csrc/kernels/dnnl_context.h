// The one oneDNN CPU engine of the process and a oneDNN stream per thread,
// shared by every engine entry point that uses oneDNN (GEMM, convolution).
#pragma once

#include <dnnl.h>

#include "openneuron/kernels/types.h"

namespace openneuron::kernels::detail {

dnnl_engine_t dnnl_cpu_engine();    // nullptr if oneDNN cannot create it
dnnl_stream_t dnnl_thread_stream();  // this thread's stream on that engine
// f32/bf16/f16 map to oneDNN types; anything else is dnnl_data_type_undef.
dnnl_data_type_t dnnl_type(DType d);

}  // namespace openneuron::kernels::detail
