// Softmax, log-softmax and their backward over any dim (PyTorch's
// SoftMaxKernel.cpp formulas and roundings). Each row is gathered into float
// scratch, so strided dims and half types share one code path; sums
// accumulate in double.
#include <vector>

#include "float_sum.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"
#include "vmath.h"

namespace openneuron::kernels {
namespace detail {
namespace {

struct RowIter {
  int n = 0;
  int64_t size[kMaxDims], st[3][kMaxDims];
};

template <SoftmaxOp OP, class In, class Out>
int softmax_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const SoftmaxParams*>(params);
  const TensorType& t0 = p.in0.type;
  const int dim = p.dim;
  const int64_t D = t0.ndim == 0 ? 1 : t0.sizes[dim];
  const int64_t numel = t0.numel();
  if (numel == 0) return 0;
  const bool backward = OP == SoftmaxOp::SoftmaxBackward || OP == SoftmaxOp::LogSoftmaxBackward;
  const In* x0 = reinterpret_cast<const In*>(p.in0.resolve(args));
  const In* x1 = backward ? reinterpret_cast<const In*>(p.in1.resolve(args)) : nullptr;
  Out* y = reinterpret_cast<Out*>(p.out.resolve(args));
  const int64_t s0 = t0.ndim ? t0.strides[dim] : 0;
  const int64_t s1 = backward && t0.ndim ? p.in1.type.strides[dim] : 0;
  const int64_t so = t0.ndim ? p.out.type.strides[dim] : 0;
  RowIter it;
  for (int d = t0.ndim - 1; d >= 0; --d) {
    if (d == dim || t0.sizes[d] == 1) continue;
    it.size[it.n] = t0.sizes[d];
    it.st[0][it.n] = t0.strides[d];
    it.st[1][it.n] = backward ? p.in1.type.strides[d] : 0;
    it.st[2][it.n] = p.out.type.strides[d];
    ++it.n;
  }
  const bool last_dim = t0.ndim == 0 || dim == t0.ndim - 1;
  const int64_t rows = numel / D;
  auto body = [&](int64_t b, int64_t e) {
    std::vector<float> a(D), g(D);
    for (int64_t r = b; r < e; ++r) {
      int64_t rem = r, o0 = 0, o1 = 0, oo = 0;
      for (int d = 0; d < it.n; ++d) {
        const int64_t x = rem % it.size[d];
        rem /= it.size[d];
        o0 += x * it.st[0][d];
        o1 += x * it.st[1][d];
        oo += x * it.st[2][d];
      }
      const In* r0 = x0 + o0;
      Out* ro = y + oo;
      if constexpr (!backward && std::is_same_v<In, float> && std::is_same_v<Out, float>) {
        if (s0 == 1 && so == 1) {  // float rows in place: no gather pass, same arithmetic
          const float mx = row_max(r0, D);
          if constexpr (OP == SoftmaxOp::Softmax) {
            vexp_shifted(r0, ro, D, mx);
            const float inv = static_cast<float>(1.0 / lane_sum8(ro, D));
            for (int64_t j = 0; j < D; ++j) ro[j] *= inv;
          } else {
            vexp_shifted(r0, g.data(), D, mx);
            const float lse = std::log(static_cast<float>(lane_sum8(g.data(), D)));
            for (int64_t j = 0; j < D; ++j) ro[j] = (r0[j] - mx) - lse;
          }
          continue;
        }
      }
      for (int64_t j = 0; j < D; ++j) a[j] = load(r0 + j * s0);
      if constexpr (!backward) {
        const float mx = row_max(a.data(), D);
        double sum = 0;
        if constexpr (OP == SoftmaxOp::Softmax) {
          vexp_shifted(a.data(), a.data(), D, mx);
          sum = lane_sum8(a.data(), D);
          const float inv = static_cast<float>(1.0 / sum);
          for (int64_t j = 0; j < D; ++j) store_cvt(ro + j * so, a[j] * inv);
        } else {
          vexp_shifted(a.data(), g.data(), D, mx);
          sum = lane_sum8(g.data(), D);
          // (x - max) - log(sum), in this order: x - (max + log(sum)) cancels when x is
          // near the max. Over the last dim in bfloat16/float16 the CPU rounds the sum and
          // its log to the input type first (its lastdim kernel keeps them in input-typed
          // buffers); doing the same gives its results bit for bit.
          float lse = std::log(static_cast<float>(sum));
          if constexpr (!std::is_same_v<In, float> && std::is_same_v<In, Out>) {
            if (last_dim) lse = round_to<In>(std::log(round_to<In>(static_cast<float>(sum))));
          }
          for (int64_t j = 0; j < D; ++j) store_cvt(ro + j * so, (a[j] - mx) - lse);
        }
      } else {
        // a = grad_out, g = forward output.
        const In* r1 = x1 + o1;
        for (int64_t j = 0; j < D; ++j) g[j] = load(r1 + j * s1);
        double acc = 0;
        if constexpr (OP == SoftmaxOp::SoftmaxBackward) {
          for (int64_t j = 0; j < D; ++j) acc += static_cast<double>(a[j]) * g[j];
          const float dot = static_cast<float>(acc);
          for (int64_t j = 0; j < D; ++j) store_cvt(ro + j * so, g[j] * (a[j] - dot));
        } else {
          acc = lane_sum8(a.data(), D);
          const float sum = static_cast<float>(acc);
          for (int64_t j = 0; j < D; ++j) store_cvt(ro + j * so, a[j] - vexp(g[j]) * sum);
        }
      }
    }
  };
  parallel_for(rows, std::max<int64_t>(1, kGrain / (4 * D)), body);
  return 0;
}

template <SoftmaxOp OP>
onrt_kernel_fn pick(DType out, DType in) {
  return visit(in, [&](auto ti) -> onrt_kernel_fn {
    using I = typename decltype(ti)::type;
    if constexpr (!is_float3_v<I>) {
      return nullptr;
    } else {
      if (out == in) return &softmax_entry<OP, I, I>;
      if (out == DType::Float32) return &softmax_entry<OP, I, float>;  // half_to_float
      if (std::is_same_v<I, float> && out == DType::BFloat16) return &softmax_entry<OP, I, bf16>;
      if (std::is_same_v<I, float> && out == DType::Float16) return &softmax_entry<OP, I, f16>;
      return nullptr;
    }
  });
}

}  // namespace
}  // namespace detail

onrt_kernel_fn softmax_kernel(SoftmaxOp op, DType out, DType in) {
  using namespace detail;
  switch (op) {
    case SoftmaxOp::Softmax: return pick<SoftmaxOp::Softmax>(out, in);
    case SoftmaxOp::LogSoftmax: return pick<SoftmaxOp::LogSoftmax>(out, in);
    case SoftmaxOp::SoftmaxBackward: return pick<SoftmaxOp::SoftmaxBackward>(out, in);
    case SoftmaxOp::LogSoftmaxBackward: return pick<SoftmaxOp::LogSoftmaxBackward>(out, in);
  }
  return nullptr;
}

}  // namespace openneuron::kernels
