// The elementwise engine: row loops over a LoopPlan for one output storage
// type, input storage types and a functor on compute values, plus the readers
// of ElementwiseParams' scalar inputs and coefficients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include "loop.h"
#include "openneuron/kernels/params.h"
#include "storage.h"

namespace openneuron::kernels::detail {

// Row loops over one output type, input storage types In..., and a functor on
// compute values. Bit I of M marks input I as constant along the row (a scalar
// or an inner-stride-0 tensor): its value comes from bv and is loaded once.
template <class T>
using cval_t = compute_t<T>;

template <unsigned M, size_t I, class T>
ON_INLINE cval_t<T> pick_c(const T* p, int64_t j, cval_t<T> b) {
  if constexpr ((M >> I) & 1u) return b;
  else return load(p + j);
}

template <unsigned M, class OutT, class F, class... In, size_t... I>
inline void row_contig(char* const* ptr, int64_t n, const F& f,
                       const std::tuple<cval_t<In>...>& bv, std::index_sequence<I...>) {
  OutT* out = reinterpret_cast<OutT*>(ptr[0]);
  const std::tuple<const In*...> in{reinterpret_cast<const In*>(ptr[I + 1])...};
  // Outputs either alias an input exactly (in-place) or not at all, so there
  // is no loop-carried dependence.
#pragma GCC ivdep
  for (int64_t j = 0; j < n; ++j)
    store_cvt(out + j, f(pick_c<M, I>(std::get<I>(in), j, std::get<I>(bv))...));
}

// The general path: any strides; broadcast inputs chosen at run time.
template <class OutT, class F, class... In, size_t... I>
inline void row_strided(char* const* ptr, const int64_t* s, int64_t n, const F& f,
                        const std::tuple<cval_t<In>...>& bv, unsigned mask,
                        std::index_sequence<I...>) {
  char* out = ptr[0];
  const int64_t so = s[0];
  for (int64_t j = 0; j < n; ++j)
    store_cvt(reinterpret_cast<OutT*>(out + j * so),
              f(((mask >> I) & 1u ? std::get<I>(bv)
                                  : load(reinterpret_cast<const In*>(ptr[I + 1] + j * s[I + 1])))...));
}

// Runs `f` elementwise over the plan. Scalar inputs arrive as compute values
// in `scal` (ops[k+1].kind == Scalar): they are never rounded to the tensor
// dtype, as in PyTorch's opmath. Tensors are read from the launch args.
template <class OutT, class F, class... In>
struct Elementwise {
  static constexpr int NIN = sizeof...(In);
  static constexpr int N = NIN + 1;
  using BV = std::tuple<cval_t<In>...>;
  using Seq = std::index_sequence_for<In...>;

  template <size_t... I>
  static void refresh(BV& bv, char* const* ptr, unsigned tensor_bcast, std::index_sequence<I...>) {
    (((tensor_bcast >> I) & 1u
          ? (void)(std::get<I>(bv) = load(reinterpret_cast<const In*>(ptr[I + 1])))
          : (void)0),
     ...);
  }

  template <unsigned M>
  static void run_contig(const LoopPlan& plan, char* const* base, const BV& scal,
                         unsigned tensor_bcast, const F& f) {
    auto row = [&](char* const* ptr, int64_t n) {
      BV bv = scal;
      if (M) refresh(bv, ptr, tensor_bcast, Seq{});
      row_contig<M, OutT, F, In...>(ptr, n, f, bv, Seq{});
    };
    walk<N>(plan, base, row);
  }

  template <unsigned... Ms>
  static void dispatch(unsigned mask, const LoopPlan& plan, char* const* base, const BV& scal,
                       unsigned tensor_bcast, const F& f, std::integer_sequence<unsigned, Ms...>) {
    ((mask == Ms ? run_contig<Ms>(plan, base, scal, tensor_bcast, f) : (void)0), ...);
  }

  static void run(const ElementwiseParams& p, const onrt_arg* args, const BV& scal, const F& f) {
    const LoopPlan& plan = p.plan;
    if (plan.numel <= 0) return;
    char* base[N];
    static char dummy[16];
    base[0] = static_cast<char*>(args[p.ops[0].slot].ptr) + p.ops[0].byte_offset;
    unsigned mask = 0, tensor_bcast = 0;
    bool contig = plan.strides[0][0] == static_cast<int64_t>(sizeof(OutT));
    constexpr int64_t elem[N] = {static_cast<int64_t>(sizeof(OutT)),
                                 static_cast<int64_t>(sizeof(In))...};
    for (int k = 0; k < NIN; ++k) {
      const Operand& o = p.ops[k + 1];
      const int64_t st = plan.strides[k + 1][0];
      if (o.kind == Operand::Tensor) {
        base[k + 1] = static_cast<char*>(args[o.slot].ptr) + o.byte_offset;
        if (st == 0) tensor_bcast |= 1u << k;
      } else {
        base[k + 1] = dummy;
      }
      if (st == 0) mask |= 1u << k;
      else if (st != elem[k + 1]) contig = false;
    }
    if (contig) {
      dispatch(mask, plan, base, scal, tensor_bcast, f,
               std::make_integer_sequence<unsigned, (1u << NIN)>{});
      return;
    }
    int64_t s[N];
    for (int k = 0; k < N; ++k) s[k] = plan.strides[k][0];
    auto row = [&](char* const* ptr, int64_t n) {
      BV bv = scal;
      refresh(bv, ptr, tensor_bcast, Seq{});
      row_strided<OutT, F, In...>(ptr, s, n, f, bv, mask, Seq{});
    };
    if (wants_tiles<N>(plan)) walk_tiled<N>(plan, base, row);
    else walk<N>(plan, base, row);
  }
};

// Reads input k's scalar (if it is one) as compute type C.
template <class C>
inline C scalar_in(const ElementwiseParams& p, int k, const onrt_arg* args) {
  const Operand& o = p.ops[k + 1];
  if (o.kind != Operand::Scalar) return C{};
  if (o.scalar.is_float) return cvt<C>(o.scalar.as_double(args));
  return cvt<C>(o.scalar.as_int(args));
}
template <class C>
inline C coef(const ScalarArg& s, const onrt_arg* args) {
  if (s.is_float) return cvt<C>(s.as_double(args));
  return cvt<C>(s.as_int(args));
}

}  // namespace openneuron::kernels::detail
