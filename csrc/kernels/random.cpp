// Counter-based RNG: Philox4x32-10 keyed by the 64-bit seed. Element e of the
// output (row-major logical order) draws from block (offset + e / per_block),
// so results do not depend on threads or strides, and a caller that advances
// offset by random_offset_increment() never reuses numbers.
#include <cmath>

#include "internal.h"
#include "philox.h"

namespace openneuron::kernels {
namespace detail {
namespace {

using Block = PhiloxBlock;


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
      // Box-Muller on lane pairs (0,1) and (2,3).
      const int base = lane & 2;
      const float r = std::sqrt(-2.0f * std::log(u01_open0(blk.v[base])));
      const float th = 2.0f * static_cast<float>(M_PI) * u01(blk.v[base + 1]);
      const float z = (lane & 1) ? r * std::sin(th) : r * std::cos(th);
      return cvt<C>(fa + fb * z);
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

}  // namespace openneuron::kernels
