// Float32 GEMM through BLIS on the kernel pool (gemm_blis.cpp); gemm.cpp
// sends every problem it can take there and the rest to oneDNN.
#pragma once

#include "openneuron/kernels/params.h"
#include "openneuron/runtime.h"

namespace openneuron::kernels::detail {

// C = alpha * A @ B + beta * C per batch item (C is not read when beta == 0)
// for Float32 with each of A, B, C unit-stride along rows or columns. False,
// with nothing written, for any other dtype or layout.
bool blis_gemm(const GemmParams& p, const onrt_arg* args, float alpha, float beta);

}  // namespace openneuron::kernels::detail
