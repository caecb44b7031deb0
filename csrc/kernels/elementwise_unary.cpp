// Unary elementwise ops' kernels (formulas in elementwise_functors.h, in compute
// type: float for half types).
#include "elementwise.h"
#include "elementwise_functors.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"
#include "vmath.h"
#include "wrapping.h"

namespace openneuron::kernels {
namespace detail {
namespace {

template <class OutT, class InT, template <class> class Op>
int unary_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  using C = compute_t<InT>;
  Elementwise<OutT, Op<C>, InT>::run(p, args, {scalar_in<C>(p, 0, args)}, Op<C>{});
  return 0;
}

// float32 over contiguous memory: vmath.h's 16-lane blocks, equal bit for bit to
// Op, which finishes the tail; other layouts run Op through the elementwise walker.
template <template <class> class Op, int64_t (*kBlocks)(const float*, float*, int64_t)>
int f32_array_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  const LoopPlan& pl = p.plan;
  if (pl.ndim != 1 || pl.strides[0][0] != 4 || pl.strides[1][0] != 4)
    return unary_entry<float, float, Op>(params, args, err, errlen);
  if (pl.numel <= 0) return 0;
  float* out = reinterpret_cast<float*>(static_cast<char*>(args[p.ops[0].slot].ptr) + p.ops[0].byte_offset);
  const float* in =
      reinterpret_cast<const float*>(static_cast<char*>(args[p.ops[1].slot].ptr) + p.ops[1].byte_offset);
  auto body = [&](int64_t b, int64_t e) {
    const Op<float> op{};
    for (int64_t i = b + kBlocks(in + b, out + b, e - b); i < e; ++i) out[i] = op(in[i]);
  };
  parallel_for(pl.numel, kGrain, body);
  return 0;
}
int64_t exp_blocks(const float* in, float* out, int64_t n) { return vexp_blocks(in, out, n, 0.0f); }

enum Domain { kFloat, kSignedNum, kNum, kAll };

template <template <class> class Op, Domain D>
onrt_kernel_fn pick_same(DType out, DType in) {
  if (out != in) return nullptr;
  return visit(in, [&](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    constexpr bool ok = D == kFloat ? is_float3_v<T>
                        : D == kAll ? is_real9_v<T>
                        : D == kNum ? is_real9_v<T> && !std::is_same_v<T, bool>
                                    : is_real9_v<T> && !std::is_same_v<T, bool> &&
                                          !std::is_same_v<T, uint8_t>;
    if constexpr (ok) return &unary_entry<T, T, Op>;
    else return nullptr;
  });
}

}  // namespace
}  // namespace detail

onrt_kernel_fn unary_kernel(UnaryOp op, DType out, DType in) {
  using namespace detail;
  switch (op) {
    case UnaryOp::Neg: return pick_same<NegF, kNum>(out, in);
    case UnaryOp::Abs: return pick_same<AbsF, kNum>(out, in);
    case UnaryOp::Exp:
      if (out == DType::Float32 && in == DType::Float32) return &f32_array_entry<ExpF, exp_blocks>;
      return pick_same<ExpF, kFloat>(out, in);
    case UnaryOp::Log: return pick_same<LogF, kFloat>(out, in);
    case UnaryOp::Sqrt: return pick_same<SqrtF, kFloat>(out, in);
    case UnaryOp::Rsqrt: return pick_same<RsqrtF, kFloat>(out, in);
    case UnaryOp::Reciprocal: return pick_same<ReciprocalF, kFloat>(out, in);
    case UnaryOp::Sin: return pick_same<SinF, kFloat>(out, in);
    case UnaryOp::Cos: return pick_same<CosF, kFloat>(out, in);
    case UnaryOp::Tanh: return pick_same<TanhF, kFloat>(out, in);
    case UnaryOp::Sigmoid: return pick_same<SigmoidF, kFloat>(out, in);
    case UnaryOp::Relu: return pick_same<ReluF, kNum>(out, in);
    case UnaryOp::Silu: return pick_same<SiluF, kFloat>(out, in);
    case UnaryOp::Erf: return pick_same<ErfF, kFloat>(out, in);
    case UnaryOp::Floor: return pick_same<FloorF, kNum>(out, in);
    case UnaryOp::Ceil: return pick_same<CeilF, kNum>(out, in);
    case UnaryOp::Round: return pick_same<RoundF, kNum>(out, in);
    case UnaryOp::Sign: return pick_same<SignF, kAll>(out, in);
    case UnaryOp::GeluErf:
      if (out == DType::Float32 && in == DType::Float32) return &f32_array_entry<GeluErfF, vgelu_erf_blocks>;
      return pick_same<GeluErfF, kFloat>(out, in);
    case UnaryOp::GeluTanh: return pick_same<GeluTanhF, kFloat>(out, in);
    case UnaryOp::LogicalNot:
      if (out != DType::Bool) return nullptr;  // the compiler converts other outputs
      return visit(in, [&](auto t) -> onrt_kernel_fn {
        using T = typename decltype(t)::type;
        if constexpr (is_real9_v<T>) return &unary_entry<bool, T, LogicalNotF>;
        else return nullptr;
      });
  }
  return nullptr;
}

}  // namespace openneuron::kernels
