// The RNG engines: counter-based Philox4x32-10 keyed by the 64-bit seed.
// Element e of the output (row-major logical order) draws from block
// (offset + e / per_block), so results do not depend on threads or strides,
// and a caller that advances offset by random_offset_increment() or
// random_extra_offset_increment() never reuses numbers.
//
// Uniform, Normal, Bernoulli (scalar p), RandInt (RandomParams); dropout (and
// its backward), Bernoulli with per-element p, exponential, geometric,
// log-normal, randperm, multinomial (RandomExtraParams).
#include <cmath>
#include <limits>
#include <vector>

#include "elementwise.h"
#include "error.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "philox.h"
#include "storage.h"

namespace openneuron::kernels {

// ------------------------------------------------------------ RandomParams ops

namespace detail {
namespace {

using Block = PhiloxBlock;

// A standard normal value for `lane` of a block: Box-Muller on the lane
// pairs (0, 1) and (2, 3).
inline float normal_draw(const Block& blk, int lane) {
  const int base = lane & 2;
  const float r = std::sqrt(-2.0f * std::log(u01_open0(blk.v[base])));
  const float th = 2.0f * static_cast<float>(M_PI) * u01(blk.v[base + 1]);
  return (lane & 1) ? r * std::sin(th) : r * std::cos(th);
}

template <RandomOp OP, class T>
int random_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const RandomParams*>(params);
  const TensorType& ot = p.out.type;
  const int64_t numel = ot.numel();
  if (numel == 0) return 0;
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  const uint64_t seed = static_cast<uint64_t>(p.seed.as_int(args));
  const uint64_t offset = static_cast<uint64_t>(p.offset.as_int(args));
  const double a = p.a.as_double(args), b = p.b.as_double(args);
  int64_t lo = 0;
  uint64_t range = 0;
  if constexpr (OP == RandomOp::RandInt) {
    lo = p.a.as_int(args);
    const int64_t hi = p.b.as_int(args);
    if (hi <= lo) return fail(err, errlen, "random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                              static_cast<long long>(lo), static_cast<long long>(hi));
    range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  }
  const bool wide = OP == RandomOp::RandInt && range >= (uint64_t{1} << 32);
  const int per_block = wide ? 2 : 4;
  const float fa = static_cast<float>(a), fb = static_cast<float>(b);
  auto value = [&](const Block& blk, int lane) -> compute_t<T> {
    using C = compute_t<T>;
    if constexpr (OP == RandomOp::Uniform) {
      return cvt<C>(u01(blk.v[lane]) * (fb - fa) + fa);
    } else if constexpr (OP == RandomOp::Normal) {
      return cvt<C>(fa + fb * normal_draw(blk, lane));
    } else if constexpr (OP == RandomOp::Bernoulli) {
      return cvt<C>(static_cast<double>(u01(blk.v[lane])) < a ? 1 : 0);
    } else {
      uint64_t x;
      if (wide) x = (static_cast<uint64_t>(blk.v[2 * lane]) << 32) | blk.v[2 * lane + 1];
      else x = blk.v[lane];
      return cvt<C>(static_cast<int64_t>(static_cast<uint64_t>(lo) + x % range));
    }
  };
  const bool contig = ot.is_contiguous();
  auto body = [&](int64_t b0, int64_t e0) {
    int64_t e = b0;
    while (e < e0) {
      const uint64_t blk_index = static_cast<uint64_t>(e / per_block);
      const Block blk = philox(seed, offset + blk_index);
      for (int lane = static_cast<int>(e % per_block); lane < per_block && e < e0; ++lane, ++e) {
        int64_t off = e;
        if (!contig) {
          int64_t rem = e;
          off = 0;
          for (int d = ot.ndim - 1; d >= 0; --d) {
            off += (rem % ot.sizes[d]) * ot.strides[d];
            rem /= ot.sizes[d];
          }
        }
        store(out + off, value(blk, lane));
      }
    }
  };
  parallel_for(numel, kGrain / 4, body);
  return 0;
}

template <RandomOp OP, bool FloatOnly>
onrt_kernel_fn pick(DType out) {
  return visit(out, [](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (FloatOnly ? is_float3_v<T> : is_real9_v<T>) return &random_entry<OP, T>;
    else return nullptr;
  });
}

}  // namespace
}  // namespace detail

onrt_kernel_fn random_kernel(RandomOp op, DType out) {
  using namespace detail;
  switch (op) {
    case RandomOp::Uniform: return pick<RandomOp::Uniform, true>(out);
    case RandomOp::Normal: return pick<RandomOp::Normal, true>(out);
    case RandomOp::Bernoulli: return pick<RandomOp::Bernoulli, false>(out);
    case RandomOp::RandInt: return pick<RandomOp::RandInt, false>(out);
  }
  return nullptr;
}

int64_t random_offset_increment(RandomOp op, DType, int64_t numel) {
  // RandInt may draw 64-bit values (2 per block) depending on its range.
  const int64_t per_block = op == RandomOp::RandInt ? 2 : 4;
  return (numel + per_block - 1) / per_block;
}

// ------------------------------------------------------------ RandomExtraParams ops

namespace detail {
namespace {

inline double u01_d(uint32_t hi, uint32_t lo) {  // [0, 1) with 53 bits
  return static_cast<double>((static_cast<uint64_t>(hi) << 21) ^ (lo >> 11)) * 0x1.0p-53;
}

// Calls f(e, block, lane) for e in [b, e0), one Philox call per 4 elements.
template <class F>
inline void for_lanes(uint64_t seed, uint64_t offset, int64_t b, int64_t e0, F&& f) {
  int64_t e = b;
  while (e < e0) {
    const Block blk = philox(seed, offset + static_cast<uint64_t>(e / 4));
    for (int lane = static_cast<int>(e % 4); lane < 4 && e < e0; ++lane, ++e) f(e, blk, lane);
  }
}

template <RandomExtraOp OP, class T, class In>
int random_extra_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const RandomExtraParams*>(params);
  const int64_t n = p.out.type.numel();
  if (n == 0) return 0;
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  const uint64_t seed = static_cast<uint64_t>(p.seed.as_int(args));
  const uint64_t offset = static_cast<uint64_t>(p.offset.as_int(args));
  const double a = p.a.as_double(args), b = p.b.as_double(args);
  const In* in = p.in.present() ? reinterpret_cast<const In*>(p.in.resolve(args)) : nullptr;
  bool* mask = p.mask.present() ? reinterpret_cast<bool*>(p.mask.resolve(args)) : nullptr;
  using C = compute_t<T>;
  const float keep_p = static_cast<float>(1.0 - a);
  const float scale = a >= 1.0 ? 0.0f : static_cast<float>(1.0 / (1.0 - a));
  const double log1mp = OP == RandomExtraOp::Geometric ? std::log1p(-a) : 0.0;
  auto body = [&](int64_t b0, int64_t e0) {
    for_lanes(seed, offset, b0, e0, [&](int64_t e, const Block& blk, int lane) {
      if constexpr (OP == RandomExtraOp::Dropout) {
        const bool keep = u01(blk.v[lane]) < keep_p;
        mask[e] = keep;
        store(out + e, cvt<C>(keep ? static_cast<float>(load(in + e)) * scale : 0.0f));
      } else if constexpr (OP == RandomExtraOp::BernoulliTensor) {
        const float pv = static_cast<float>(load(in + e));
        store(out + e, cvt<C>(u01(blk.v[lane]) < pv ? 1 : 0));
      } else if constexpr (OP == RandomExtraOp::Exponential) {
        // -log(1 - u) with 1 - u in (0, 1]; lambda = a.
        const double u = u01_open0(blk.v[lane]);
        store(out + e, cvt<C>(static_cast<float>(-std::log(u) / a)));
      } else if constexpr (OP == RandomExtraOp::Geometric) {
        const double u = u01_open0(blk.v[lane]);
        double k = std::ceil(std::log(u) / log1mp);
        if (!(k >= 1)) k = 1;
        store(out + e, cvt<C>(k));
      } else {  // LogNormal
        store(out + e, cvt<C>(static_cast<float>(std::exp(a + b * normal_draw(blk, lane)))));
      }
    });
  };
  parallel_for(n, kGrain / 4, body);
  return 0;
}

template <class T>
int randperm_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const RandomExtraParams*>(params);
  const int64_t n = p.out.type.numel();
  if (n == 0) return 0;
  const uint64_t seed = static_cast<uint64_t>(p.seed.as_int(args));
  const uint64_t offset = static_cast<uint64_t>(p.offset.as_int(args));
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  // Fisher-Yates: swap i with a uniform j in [0, i], one 64-bit draw per i.
  for (int64_t i = n - 1; i > 0; --i) {
    const Block blk = philox(seed, offset + static_cast<uint64_t>(i / 2));
    const int l = static_cast<int>(i % 2) * 2;
    const uint64_t x = (static_cast<uint64_t>(blk.v[l]) << 32) | blk.v[l + 1];
    const int64_t j = static_cast<int64_t>(x % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  const int64_t st = p.out.type.ndim ? p.out.type.strides[0] : 1;
  for (int64_t i = 0; i < n; ++i) store(out + i * st, cvt<compute_t<T>>(perm[i]));
  return 0;
}

// Rows of probs [N, C] (contiguous) -> out [N, S] Int64. Row r draws from
// blocks offset + r * blocks_per_row + j / 2 (64-bit draws, two per block).
template <class In>
int multinomial_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const RandomExtraParams*>(params);
  const TensorType& pt = p.in.type;
  const TensorType& ot = p.out.type;
  const int64_t C = pt.sizes[pt.ndim - 1];
  const int64_t N = pt.ndim == 2 ? pt.sizes[0] : 1;
  const int64_t S = ot.sizes[ot.ndim - 1];
  if (N == 0 || S == 0) return 0;
  const In* probs = reinterpret_cast<const In*>(p.in.resolve(args));
  int64_t* out = reinterpret_cast<int64_t*>(p.out.resolve(args));
  const uint64_t seed = static_cast<uint64_t>(p.seed.as_int(args));
  const uint64_t offset = static_cast<uint64_t>(p.offset.as_int(args));
  const int64_t per_row = (std::max(C, S) + 1) / 2;
  const bool repl = p.replacement != 0;
  // Validate every row first (PyTorch's messages).
  for (int64_t r = 0; r < N; ++r) {
    double sum = 0;
    int64_t nonzero = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double v = load(probs + r * C + c);
      if (!(v >= 0) || std::isinf(v))
        return fail(err, errlen, "probability tensor contains either `inf`, `nan` or element < 0");
      sum += v;
      nonzero += v > 0;
    }
    if (!(sum > 0)) return fail(err, errlen, "invalid multinomial distribution (sum of probabilities <= 0)");
    if (!repl && nonzero < S)
      return fail(err, errlen, "invalid multinomial distribution (with replacement=False, not enough "
                               "non-negative category to sample)");
  }
  auto draw = [&](int64_t r, int64_t j) {
    const Block blk = philox(seed, offset + static_cast<uint64_t>(r * per_row + j / 2));
    const int l = static_cast<int>(j % 2) * 2;
    return u01_d(blk.v[l], blk.v[l + 1]);
  };
  auto rows = [&](int64_t rb, int64_t re) {
    std::vector<double> buf(C);
    std::vector<int64_t> idx;
    for (int64_t r = rb; r < re; ++r) {
      const In* pr = probs + r * C;
      if (repl) {
        double acc = 0;
        for (int64_t c = 0; c < C; ++c) buf[c] = acc += static_cast<double>(load(pr + c));
        for (int64_t j = 0; j < S; ++j) {
          const double u = draw(r, j) * acc;
          int64_t k = std::upper_bound(buf.begin(), buf.end(), u) - buf.begin();
          if (k >= C) k = C - 1;
          while (k > 0 && load(pr + k) == 0) --k;  // never pick a zero-probability class
          out[r * S + j] = k;
        }
      } else {
        // Exponential race: the S smallest E_c / p_c (E_c ~ Exp(1)) without replacement.
        for (int64_t c = 0; c < C; ++c) {
          const double pv = load(pr + c);
          const double e = -std::log1p(-draw(r, c));
          buf[c] = pv > 0 ? e / pv : std::numeric_limits<double>::infinity();
        }
        idx.resize(C);
        for (int64_t c = 0; c < C; ++c) idx[c] = c;
        std::partial_sort(idx.begin(), idx.begin() + S, idx.end(),
                          [&](int64_t x, int64_t y) { return buf[x] < buf[y] || (buf[x] == buf[y] && x < y); });
        for (int64_t j = 0; j < S; ++j) out[r * S + j] = idx[j];
      }
    }
  };
  parallel_for(N, std::max<int64_t>(1, kGrain / std::max<int64_t>(C, 1)), rows);
  return 0;
}

template <class T>
struct DropoutBackwardF {
  float scale;
  ON_INLINE float operator()(float g, bool m) const { return m ? g * scale : 0.0f; }
};

template <class T>
int dropout_backward_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  const float scale = static_cast<float>(p.coef[0].as_double(args));
  using Ew = Elementwise<T, DropoutBackwardF<T>, T, bool>;
  Ew::run(p, args, typename Ew::BV{}, DropoutBackwardF<T>{scale});
  return 0;
}

template <RandomExtraOp OP>
onrt_kernel_fn pick_elementwise(DType out, DType in) {
  return visit(out, [in, out](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (!is_real9_v<T>) {
      return nullptr;
    } else if constexpr (OP == RandomExtraOp::Dropout || OP == RandomExtraOp::Exponential ||
                         OP == RandomExtraOp::LogNormal) {
      if constexpr (is_float3_v<T>) {
        if (OP == RandomExtraOp::Dropout && in != out) return nullptr;
        return &random_extra_entry<OP, T, T>;
      } else {
        return nullptr;
      }
    } else if constexpr (OP == RandomExtraOp::BernoulliTensor) {
      if (in != DType::Float32) return nullptr;
      return &random_extra_entry<OP, T, float>;
    } else {  // Geometric: any real type
      return &random_extra_entry<OP, T, T>;
    }
  });
}

}  // namespace
}  // namespace detail

onrt_kernel_fn random_extra_kernel(RandomExtraOp op, DType out, DType in) {
  using namespace detail;
  switch (op) {
    case RandomExtraOp::Dropout: return pick_elementwise<RandomExtraOp::Dropout>(out, in);
    case RandomExtraOp::BernoulliTensor: return pick_elementwise<RandomExtraOp::BernoulliTensor>(out, in);
    case RandomExtraOp::Exponential: return pick_elementwise<RandomExtraOp::Exponential>(out, in);
    case RandomExtraOp::Geometric: return pick_elementwise<RandomExtraOp::Geometric>(out, in);
    case RandomExtraOp::LogNormal: return pick_elementwise<RandomExtraOp::LogNormal>(out, in);
    case RandomExtraOp::Randperm:
      return visit(out, [](auto t) -> onrt_kernel_fn {
        using T = typename decltype(t)::type;
        if constexpr (is_real9_v<T> && !std::is_same_v<T, bool>) return &randperm_entry<T>;
        else return nullptr;
      });
    case RandomExtraOp::Multinomial:
      if (out != DType::Int64) return nullptr;
      return visit(in, [](auto t) -> onrt_kernel_fn {
        using T = typename decltype(t)::type;
        if constexpr (is_float3_v<T>) return &multinomial_entry<T>;
        else return nullptr;
      });
  }
  return nullptr;
}

int64_t random_extra_offset_increment(RandomExtraOp op, int64_t numel) {
  // Randperm and Multinomial use 2 draws per block; the callers pass the
  // number of draws they need as numel.
  if (op == RandomExtraOp::Randperm || op == RandomExtraOp::Multinomial) return (numel + 1) / 2 + 1;
  return (numel + 3) / 4;
}

onrt_kernel_fn dropout_backward_kernel(DType out) {
  using namespace detail;
  return visit(out, [](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_float3_v<T>) return &dropout_backward_entry<T>;
    else return nullptr;
  });
}

}  // namespace openneuron::kernels
