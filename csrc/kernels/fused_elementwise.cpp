// The fused elementwise kernel: a chain of elementwise steps run as one pass.
// Each row of the loop plan goes in tiles of kTile elements: the chain's inputs
// are loaded into float tiles (float32 rows in memory are read in place), every
// step runs over the tile with its op's own functor (elementwise_functors.h),
// and the stored results go back to memory, so intermediates never leave the
// cache and each element is computed exactly as by the unfused kernels.
#include <algorithm>

#include "elementwise.h"
#include "elementwise_functors.h"
#include "error.h"
#include "openneuron/kernels/kernels.h"

namespace openneuron::kernels {
namespace detail {
namespace {

constexpr int kTile = 128;
constexpr int kMaxRegs = kMaxFusedOperands + kMaxFusedSteps;

template <class F>
ON_INLINE void map1(const float* a, float* d, int m, const F& f) {
  for (int j = 0; j < m; ++j) d[j] = f(a[j]);
}
template <class F>
ON_INLINE void map2(const float* a, const float* b, float* d, int m, const F& f) {
  for (int j = 0; j < m; ++j) d[j] = f(a[j], b[j]);
}

template <class T>
void load_tile(const char* p, int64_t stride, int m, float* dst) {
  if (stride == 0) {
    std::fill(dst, dst + m, load(reinterpret_cast<const T*>(p)));
    return;
  }
  for (int j = 0; j < m; ++j) dst[j] = load(reinterpret_cast<const T*>(p + j * stride));
}

template <class T>
void store_tile(char* p, int64_t stride, int m, const float* src) {
  for (int j = 0; j < m; ++j) store_cvt(reinterpret_cast<T*>(p + j * stride), src[j]);
}

template <class T>
void round_tile(float* d, int m) {
  for (int j = 0; j < m; ++j) d[j] = round_to<T>(d[j]);
}

// Half types only: float32 values need no rounding.
template <class F>
void on_half(DType d, const F& f) {
  if (d == DType::BFloat16)
    f(tag<bf16>{});
  else if (d == DType::Float16)
    f(tag<f16>{});
}
template <class F>
void on_float(DType d, const F& f) {
  if (d == DType::Float32)
    f(tag<float>{});
  else
    on_half(d, f);
}

void run_step(const FusedStep& s, const float* a, const float* b, float coef, float* d, int m) {
  const Ctx ctx{};  // float ops never report division by zero
  switch (s.op) {
    case FusedOp::Copy:
      std::copy(a, a + m, d);
      break;
    case FusedOp::Neg:
      map1(a, d, m, NegF<float>{});
      break;
    case FusedOp::Abs:
      map1(a, d, m, AbsF<float>{});
      break;
    case FusedOp::Exp:
      map1(a, d, m, ExpF<float>{});
      break;
    case FusedOp::Sqrt:
      map1(a, d, m, SqrtF<float>{});
      break;
    case FusedOp::Rsqrt:
      map1(a, d, m, RsqrtF<float>{});
      break;
    case FusedOp::Reciprocal:
      map1(a, d, m, ReciprocalF<float>{});
      break;
    case FusedOp::Tanh:
      map1(a, d, m, TanhF<float>{});
      break;
    case FusedOp::Sigmoid:
      map1(a, d, m, SigmoidF<float>{});
      break;
    case FusedOp::Relu:
      map1(a, d, m, ReluF<float>{});
      break;
    case FusedOp::Silu:
      map1(a, d, m, SiluF<float>{});
      break;
    case FusedOp::Erf:
      map1(a, d, m, ErfF<float>{});
      break;
    case FusedOp::GeluErf:
      map1(a, d, m, GeluErfF<float>{});
      break;
    case FusedOp::GeluTanh:
      map1(a, d, m, GeluTanhF<float>{});
      break;
    case FusedOp::Add:
      map2(a, b, d, m, AddF<float>{coef, ctx});
      break;
    case FusedOp::Sub:
      map2(a, b, d, m, SubF<float>{coef, ctx});
      break;
    case FusedOp::Mul:
      map2(a, b, d, m, MulF<float>{coef, ctx});
      break;
    case FusedOp::Div:
      map2(a, b, d, m, DivF<float>{coef, ctx});
      break;
    case FusedOp::Maximum:
      map2(a, b, d, m, MaximumF<float>{coef, ctx});
      break;
    case FusedOp::Minimum:
      map2(a, b, d, m, MinimumF<float>{coef, ctx});
      break;
    case FusedOp::ThresholdBackward:
      map2(a, b, d, m, ThresholdBackwardF<float>{coef, ctx});
      break;
    case FusedOp::GeluErfBackward:
      map2(a, b, d, m, GeluErfBackwardF<float>{coef, ctx});
      break;
    case FusedOp::GeluTanhBackward:
      map2(a, b, d, m, GeluTanhBackwardF<float>{coef, ctx});
      break;
    case FusedOp::SigmoidBackward:
      map2(a, b, d, m, SigmoidBackwardF<float>{coef, ctx});
      break;
    case FusedOp::TanhBackward:
      map2(a, b, d, m, TanhBackwardF<float>{coef, ctx});
      break;
    case FusedOp::SiluBackward:
      map2(a, b, d, m, SiluBackwardF<float>{coef, ctx});
      break;
  }
  on_half(s.dtype, [&](auto t) { round_tile<typename decltype(t)::type>(d, m); });
}

struct Chain {
  const FusedElementwiseParams& p;
  float scalar[kMaxFusedScalars];
  float coef[kMaxFusedSteps];

  // One run of the innermost plan dim: ptr[k] is tensor operand k's first element.
  void row(char* const* ptr, int64_t n) const {
    const int nout = p.nout, nin = p.nin;
    alignas(64) float tiles[kMaxRegs][kTile];
    alignas(64) float scalars[kMaxFusedScalars][kTile];
    const float* reg[kMaxRegs];
    const int m0 = static_cast<int>(std::min<int64_t>(n, kTile));
    for (int s = 0; s < p.nscalars; ++s) std::fill(scalars[s], scalars[s] + m0, scalar[s]);
    auto source = [&](int8_t r) -> const float* { return r >= 0 ? reg[r] : scalars[-1 - r]; };
    for (int64_t at = 0; at < n; at += kTile) {
      const int m = static_cast<int>(std::min<int64_t>(n - at, kTile));
      for (int i = 0; i < nin; ++i) {
        const Operand& o = p.tensors[nout + i];
        const int64_t stride = p.plan.strides[nout + i][0];
        const char* src = ptr[nout + i] + at * stride;
        if (o.dtype == DType::Float32 && stride == 4) {
          reg[i] = reinterpret_cast<const float*>(src);  // read in place
          continue;
        }
        on_float(o.dtype,
                 [&](auto t) { load_tile<typename decltype(t)::type>(src, stride, m, tiles[i]); });
        reg[i] = tiles[i];
      }
      for (int k = 0; k < p.nsteps; ++k) {
        const FusedStep& s = p.steps[k];
        float* d = tiles[nin + k];
        run_step(s, source(s.a), source(s.b), coef[k], d, m);
        reg[nin + k] = d;
      }
      for (int k = 0; k < nout; ++k) {
        const int64_t stride = p.plan.strides[k][0];
        char* dst = ptr[k] + at * stride;
        const float* v = reg[p.out_reg[k]];
        on_float(p.tensors[k].dtype,
                 [&](auto t) { store_tile<typename decltype(t)::type>(dst, stride, m, v); });
      }
    }
  }
};

}  // namespace
}  // namespace detail

int fused_elementwise(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  using namespace detail;
  const auto& p = *static_cast<const FusedElementwiseParams*>(params);
  if (p.nout + p.nin > kMaxFusedOperands || p.nsteps > kMaxFusedSteps ||
      p.nscalars > kMaxFusedScalars || p.nout == 0)
    return fail(err, errlen, "fused elementwise: malformed parameters");
  if (p.plan.numel <= 0) return 0;
  Chain chain{p, {}, {}};
  for (int s = 0; s < p.nscalars; ++s) chain.scalar[s] = coef<float>(p.scalars[s], args);
  for (int k = 0; k < p.nsteps; ++k)
    chain.coef[k] = p.steps[k].coef >= 0 ? chain.scalar[p.steps[k].coef] : 1.0f;
  static char dummy[16];
  char* base[kMaxFusedOperands];
  for (int k = 0; k < kMaxFusedOperands; ++k) {
    const Operand& o = p.tensors[k];
    base[k] = k < p.nout + p.nin ? static_cast<char*>(args[o.slot].ptr) + o.byte_offset : dummy;
  }
  walk<kMaxFusedOperands>(p.plan, base, [&](char* const* ptr, int64_t n) { chain.row(ptr, n); });
  return 0;
}

}  // namespace openneuron::kernels
