// Reductions over a set of dims. Float inputs accumulate in double, integers
// in (wrapping) int64, so float32 sums match PyTorch CPU within ~1e-7 relative
// regardless of order. Var/Std square deviations in double, as the CPU's
// Welford accumulation does, so a float32 std never overflows. Results do not depend on the thread
// count: long reductions are split into fixed-size chunks whose partials combine in order.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "float_sum.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"
#include "wrapping.h"

namespace openneuron::kernels {
namespace detail {
namespace {

constexpr int64_t kChunk = 16384;  // reduction elements per partial
constexpr int64_t kColBlock = 512; // kept-dim block of the column strategy

template <class In>
using acc_t = std::conditional_t<is_float_v<In>, double, int64_t>;

template <ReduceOp R, class A>
struct Combine {
  static A init() {
    if constexpr (R == ReduceOp::Prod) return A(1);
    else if constexpr (R == ReduceOp::Amax)
      return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity()
                                         : std::numeric_limits<A>::lowest();
    else if constexpr (R == ReduceOp::Amin)
      return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity()
                                         : std::numeric_limits<A>::max();
    else return A(0);
  }
  static A apply(A a, A b) {
    if constexpr (R == ReduceOp::Sum || R == ReduceOp::Mean || R == ReduceOp::Var ||
                  R == ReduceOp::Std)
      return add_w(a, b);
    else if constexpr (R == ReduceOp::Prod) return mul_w(a, b);
    else if constexpr (R == ReduceOp::Amax) {
      if constexpr (std::is_floating_point_v<A>) return (a != a || b != b) ? a + b : (b > a ? b : a);
      else return b > a ? b : a;
    } else {
      if constexpr (std::is_floating_point_v<A>) return (a != a || b != b) ? a + b : (b < a ? b : a);
      else return b < a ? b : a;
    }
  }
};

template <ReduceOp R, class In>
struct Reducer {
  // max/min are exact in the input's compute type; sums of floats go through
  // double (see kFloatBlocks).
  using A = std::conditional_t<R == ReduceOp::Amax || R == ReduceOp::Amin, compute_t<In>, acc_t<In>>;
  using Cmb = Combine<R, A>;
  // Float sums add blocks of 8 values in float before each double addition.
  static constexpr bool kFloatBlocks =
      std::is_same_v<compute_t<In>, float> && (R == ReduceOp::Sum || R == ReduceOp::Mean);

  static constexpr bool kSquares = R == ReduceOp::Var || R == ReduceOp::Std;

  static A ld(const In* p) {
    const A v = static_cast<A>(load(p));
    if constexpr (kSquares)
      return v * v;
    else
      return v;
  }

  // One contiguous or strided run. A contiguous float or half sum goes through
  // float_row_sum (float blocks, see kFloatBlocks); other contiguous runs keep
  // several lanes so they vectorise with a fixed association order. 16 lanes:
  // with 8, GCC widened half types to double two at a time (xmm), at a third
  // of the memory bandwidth.
  static A row(const In* p, int64_t n, int64_t stride) {
    if constexpr (kFloatBlocks) {
      if (stride == 1) return float_row_sum(p, n);
    }
    if (stride == 1) {
      constexpr int L = 16;
      A lanes[L];
      for (int l = 0; l < L; ++l) lanes[l] = Cmb::init();
      int64_t j = 0;
      for (; j + L <= n; j += L)
        for (int l = 0; l < L; ++l) lanes[l] = Cmb::apply(lanes[l], ld(p + j + l));
      for (; j < n; ++j) lanes[0] = Cmb::apply(lanes[0], ld(p + j));
      for (int w = L / 2; w > 0; w /= 2)
        for (int l = 0; l < w; ++l) lanes[l] = Cmb::apply(lanes[l], lanes[l + w]);
      return lanes[0];
    }
    A acc = Cmb::init();
    for (int64_t j = 0; j < n; ++j) acc = Cmb::apply(acc, ld(p + j * stride));
    return acc;
  }

  struct Dims {
    int n = 0;
    int64_t size[kMaxDims], in_stride[kMaxDims], out_stride[kMaxDims];
    int64_t numel = 1;
  };

  // Accumulates reduced-linear range [b, e) from base.
  static A range(const In* base, const Dims& rd, int64_t b, int64_t e) {
    A acc = Cmb::init();
    if (rd.n == 0) return b < e ? Cmb::apply(acc, ld(base)) : acc;
    int64_t idx[kMaxDims];
    int64_t rem = b;
    const In* p = base;
    for (int d = 0; d < rd.n; ++d) {
      idx[d] = rem % rd.size[d];
      rem /= rd.size[d];
      p += idx[d] * rd.in_stride[d];
    }
    int64_t left = e - b;
    while (left > 0) {
      const int64_t n = std::min(rd.size[0] - idx[0], left);
      acc = Cmb::apply(acc, row(p, n, rd.in_stride[0]));
      left -= n;
      if (left <= 0) break;
      p -= idx[0] * rd.in_stride[0];
      idx[0] = 0;
      for (int d = 1; d < rd.n; ++d) {
        p += rd.in_stride[d];
        if (++idx[d] < rd.size[d]) break;
        p -= rd.size[d] * rd.in_stride[d];
        idx[d] = 0;
      }
    }
    return acc;
  }

  static A full(const In* base, const Dims& rd) {
    if (rd.numel <= kChunk) return range(base, rd, 0, rd.numel);
    const int64_t chunks = (rd.numel + kChunk - 1) / kChunk;
    // One element per chunk, written by different threads: not std::vector<A>, whose bool
    // specialisation packs the elements into shared words (all() lost chunk results).
    std::unique_ptr<A[]> part = std::make_unique<A[]>(chunks);
    auto body = [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c)
        part[c] = range(base, rd, c * kChunk, std::min(rd.numel, (c + 1) * kChunk));
    };
    parallel_for(chunks, 2, body);
    A acc = Cmb::init();
    for (int64_t c = 0; c < chunks; ++c) acc = Cmb::apply(acc, part[c]);
    return acc;
  }
};

template <class Out, class A>
inline void put(Out* o, A v, ReduceOp r, int64_t count, double divisor) {
  if (r == ReduceOp::Mean) {
    store_cvt(o, static_cast<double>(v) / static_cast<double>(count));
  } else if (r == ReduceOp::Var) {
    store_cvt(o, static_cast<double>(v) / divisor);
  } else if (r == ReduceOp::Std) {
    store_cvt(o, std::sqrt(static_cast<double>(v) / divisor));
  } else {
    store_cvt(o, v);
  }
}

template <ReduceOp R, class Out, class In>
int reduce_entry(const void* params, const onrt_arg* args, char*, size_t) {
  using Red = Reducer<R, In>;
  using A = typename Red::A;
  using Dims = typename Red::Dims;
  const auto& p = *static_cast<const ReduceParams*>(params);
  const ReducePlan& pl = p.plan;
  if (pl.out_numel == 0) return 0;
  const In* in = reinterpret_cast<const In*>(p.in.resolve(args));
  Out* out = reinterpret_cast<Out*>(p.out.resolve(args));
  const int64_t count = pl.reduce_numel;
  const double divisor = Red::kSquares ? p.divisor.as_double(args) : 1.0;

  Dims rd, kd;
  for (int d = 0; d < pl.ndim; ++d) {
    Dims& t = (pl.reduced_mask >> d) & 1u ? rd : kd;
    t.size[t.n] = pl.sizes[d];
    t.in_stride[t.n] = pl.in_strides[d];
    t.out_stride[t.n] = pl.out_strides[d];
    t.numel *= pl.sizes[d];
    ++t.n;
  }
  if (count == 0) {  // empty reduction: the identity (Mean: 0/0)
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t rem = i, off = 0;
        for (int d = 0; d < kd.n; ++d) {
          off += (rem % kd.size[d]) * kd.out_stride[d];
          rem /= kd.size[d];
        }
        put(out + off, Red::Cmb::init(), R, count, divisor);
      }
    };
    parallel_for(kd.numel, kGrain, body);
    return 0;
  }

  const bool column = kd.n > 0 && !(pl.reduced_mask & 1u) && rd.n > 0;
  if (!column) {
    // Each output reduces its own (inner) run.
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t rem = i, ioff = 0, ooff = 0;
        for (int d = 0; d < kd.n; ++d) {
          const int64_t x = rem % kd.size[d];
          rem /= kd.size[d];
          ioff += x * kd.in_stride[d];
          ooff += x * kd.out_stride[d];
        }
        put(out + ooff, Red::full(in + ioff, rd), R, count, divisor);
      }
    };
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(count, 1));
    if (kd.numel == 1) body(0, 1);
    else parallel_for(kd.numel, grain, body);
    return 0;
  }

  // Column strategy: the innermost dim is kept; accumulate blocks of it
  // across the reduced dims (sequential reads, vectorised adds).
  const int64_t k0 = kd.size[0];
  const int64_t blocks0 = (k0 + kColBlock - 1) / kColBlock;
  int64_t outer = 1;
  for (int d = 1; d < kd.n; ++d) outer *= kd.size[d];
  auto body = [&](int64_t b, int64_t e) {
    A acc[kColBlock];
    float facc[kColBlock] = {};
    for (int64_t t = b; t < e; ++t) {
      const int64_t blk = t % blocks0;
      int64_t rem = t / blocks0, ioff = 0, ooff = 0;
      for (int d = 1; d < kd.n; ++d) {
        const int64_t x = rem % kd.size[d];
        rem /= kd.size[d];
        ioff += x * kd.in_stride[d];
        ooff += x * kd.out_stride[d];
      }
      const int64_t j0 = blk * kColBlock, nj = std::min(kColBlock, k0 - j0);
      const int64_t ks = kd.in_stride[0];
      for (int64_t j = 0; j < nj; ++j) acc[j] = Red::Cmb::init();
      const In* base = in + ioff + j0 * ks;
      int64_t idx[kMaxDims] = {};
      const In* rp = base;
      for (int64_t r = 0; r < rd.numel; ++r) {
        if constexpr (Red::kFloatBlocks) {
          // Rows in blocks of 8 added in float, each block into double (as in row()).
          if (ks == 1) {
            for (int64_t j = 0; j < nj; ++j) facc[j] += load(rp + j);
          } else {
            for (int64_t j = 0; j < nj; ++j) facc[j] += load(rp + j * ks);
          }
          if ((r & 7) == 7 || r + 1 == rd.numel) {
            for (int64_t j = 0; j < nj; ++j) {
              acc[j] += facc[j];
              facc[j] = 0.0f;
            }
          }
        } else if (ks == 1) {
          for (int64_t j = 0; j < nj; ++j) acc[j] = Red::Cmb::apply(acc[j], Red::ld(rp + j));
        } else {
          for (int64_t j = 0; j < nj; ++j) acc[j] = Red::Cmb::apply(acc[j], Red::ld(rp + j * ks));
        }
        for (int d = 0; d < rd.n; ++d) {
          rp += rd.in_stride[d];
          if (++idx[d] < rd.size[d]) break;
          rp -= rd.size[d] * rd.in_stride[d];
          idx[d] = 0;
        }
      }
      Out* o = out + ooff + j0 * kd.out_stride[0];
      for (int64_t j = 0; j < nj; ++j) put(o + j * kd.out_stride[0], acc[j], R, count, divisor);
    }
  };
  const int64_t tasks = outer * blocks0;
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(count * kColBlock, 1));
  parallel_for(tasks, grain, body);
  return 0;
}

template <ReduceOp R>
onrt_kernel_fn pick(DType out, DType in) {
  return visit(in, [&](auto ti) -> onrt_kernel_fn {
    using I = typename decltype(ti)::type;
    if constexpr (!is_real9_v<I>) {
      return nullptr;
    } else if constexpr ((R == ReduceOp::Var || R == ReduceOp::Std) && !is_float_v<I>) {
      return nullptr;
    } else {
      return visit(out, [&](auto to) -> onrt_kernel_fn {
        using O = typename decltype(to)::type;
        if constexpr (!is_real9_v<O>) return nullptr;
        // Same dtype, or a widening the bridge asks for (sum(dtype=...), ints -> Int64,
        // half -> float). Floats into integers are converted first (the lowering
        // does it), as the CPU sums sum(x, out=int64 tensor) in the out's dtype.
        else if constexpr (std::is_same_v<O, I> || (std::is_same_v<O, int64_t> && !is_float_v<I>) ||
                           std::is_same_v<O, float>)
          return &reduce_entry<R, O, I>;
        else return nullptr;
      });
    }
  });
}

}  // namespace
}  // namespace detail

onrt_kernel_fn reduce_kernel(ReduceOp op, DType out, DType in) {
  using namespace detail;
  switch (op) {
    case ReduceOp::Sum: return pick<ReduceOp::Sum>(out, in);
    case ReduceOp::Mean:
      if (!is_floating(out)) return nullptr;
      return pick<ReduceOp::Mean>(out, in);
    case ReduceOp::Prod: return pick<ReduceOp::Prod>(out, in);
    case ReduceOp::Amax: return out == in ? pick<ReduceOp::Amax>(out, in) : nullptr;
    case ReduceOp::Amin: return out == in ? pick<ReduceOp::Amin>(out, in) : nullptr;
    case ReduceOp::Var:
      if (!is_floating(out) || !is_floating(in)) return nullptr;
      return pick<ReduceOp::Var>(out, in);
    case ReduceOp::Std:
      if (!is_floating(out) || !is_floating(in)) return nullptr;
      return pick<ReduceOp::Std>(out, in);
  }
  return nullptr;
}

}  // namespace openneuron::kernels
