// Elementwise reduction of whole buffers for the collectives (all_reduce,
// reduce, reduce_scatter): dst = srcs[0] op srcs[1] op ... over `count`
// elements (optionally written to a second buffer in the same pass), and a
// pool-parallel memcpy for their staging copies.
//
// Each thread walks its range in tiles held in compute type: the accumulator
// lives on the stack, so dst may alias any source (a source is read before its
// tile of dst is written), the narrow float types are summed in float over all
// sources and rounded once, and the per-source loops are plain a = op(a, b)
// over contiguous arrays that GCC vectorises.
#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"

namespace openneuron::kernels {
namespace {

using detail::compute_t;

// Integer Sum/Product wrap as in PyTorch: computed in the unsigned type (no UB).
template <class C> ON_INLINE C wrap_add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else return a + b;
}
template <class C> ON_INLINE C wrap_mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    // uint16 * uint16 promotes to (signed) int and may overflow: widen first.
    using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else return a * b;
}

// Min/Max propagate NaN like torch.minimum/maximum.
template <BufferReduce Op, class C>
ON_INLINE C apply(C a, C b) {
  if constexpr (Op == BufferReduce::Sum) return wrap_add(a, b);
  else if constexpr (Op == BufferReduce::Product) return wrap_mul(a, b);
  else if constexpr (Op == BufferReduce::Min) {
    if constexpr (std::is_floating_point_v<C>)
      return (a != a || b != b) ? std::numeric_limits<C>::quiet_NaN() : (b < a ? b : a);
    else return b < a ? b : a;
  } else if constexpr (Op == BufferReduce::Max) {
    if constexpr (std::is_floating_point_v<C>)
      return (a != a || b != b) ? std::numeric_limits<C>::quiet_NaN() : (a < b ? b : a);
    else return a < b ? b : a;
  } else if constexpr (Op == BufferReduce::BitAnd) return static_cast<C>(a & b);
  else if constexpr (Op == BufferReduce::BitOr) return static_cast<C>(a | b);
  else return static_cast<C>(a ^ b);
}

// 8 KiB of float accumulators (16 KiB for 8-byte types): stays in L1 across sources.
constexpr int64_t kTile = 2048;

template <class T, BufferReduce Op>
void reduce_typed(void* dst_v, void* copy_v, const void* const* srcs_v, int nsrcs, size_t count) {
  using C = compute_t<T>;
  T* dst = static_cast<T*>(dst_v);
  T* copy_to = static_cast<T*>(copy_v);
  auto body = [&](int64_t b, int64_t e) {
    alignas(64) C acc[kTile];
    for (int64_t t = b; t < e; t += kTile) {
      const int64_t m = std::min(kTile, e - t);
      const T* s0 = static_cast<const T*>(srcs_v[0]) + t;
      for (int64_t i = 0; i < m; ++i) acc[i] = detail::load(s0 + i);
      for (int s = 1; s < nsrcs; ++s) {
        const T* p = static_cast<const T*>(srcs_v[s]) + t;
        for (int64_t i = 0; i < m; ++i) acc[i] = apply<Op>(acc[i], detail::load(p + i));
      }
      T* d = dst + t;
      for (int64_t i = 0; i < m; ++i) detail::store(d + i, acc[i]);
      if (copy_to != nullptr) std::memcpy(copy_to + t, d, static_cast<size_t>(m) * sizeof(T));
    }
  };
  detail::parallel_for(static_cast<int64_t>(count), detail::kGrain, body);
}

// Bool is reduced as bytes 0/1 (any nonzero byte reads as true): or / and.
template <bool IsOr>
void reduce_bool(void* dst_v, void* copy_v, const void* const* srcs_v, int nsrcs, size_t count) {
  uint8_t* dst = static_cast<uint8_t*>(dst_v);
  uint8_t* copy_to = static_cast<uint8_t*>(copy_v);
  auto body = [&](int64_t b, int64_t e) {
    alignas(64) uint8_t acc[kTile];
    for (int64_t t = b; t < e; t += kTile) {
      const int64_t m = std::min(kTile, e - t);
      const uint8_t* s0 = static_cast<const uint8_t*>(srcs_v[0]) + t;
      for (int64_t i = 0; i < m; ++i) acc[i] = s0[i] != 0;
      for (int s = 1; s < nsrcs; ++s) {
        const uint8_t* p = static_cast<const uint8_t*>(srcs_v[s]) + t;
        for (int64_t i = 0; i < m; ++i) {
          const uint8_t v = p[i] != 0;
          acc[i] = IsOr ? (acc[i] | v) : (acc[i] & v);
        }
      }
      std::memcpy(dst + t, acc, static_cast<size_t>(m));
      if (copy_to != nullptr) std::memcpy(copy_to + t, acc, static_cast<size_t>(m));
    }
  };
  detail::parallel_for(static_cast<int64_t>(count), detail::kGrain, body);
}

template <class T>
void reduce_dispatch(BufferReduce op, void* dst, void* copy_to, const void* const* srcs, int nsrcs,
                     size_t count) {
  switch (op) {
    case BufferReduce::Sum: return reduce_typed<T, BufferReduce::Sum>(dst, copy_to, srcs, nsrcs, count);
    case BufferReduce::Product: return reduce_typed<T, BufferReduce::Product>(dst, copy_to, srcs, nsrcs, count);
    case BufferReduce::Min: return reduce_typed<T, BufferReduce::Min>(dst, copy_to, srcs, nsrcs, count);
    case BufferReduce::Max: return reduce_typed<T, BufferReduce::Max>(dst, copy_to, srcs, nsrcs, count);
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case BufferReduce::BitAnd: return reduce_typed<T, BufferReduce::BitAnd>(dst, copy_to, srcs, nsrcs, count);
      case BufferReduce::BitOr: return reduce_typed<T, BufferReduce::BitOr>(dst, copy_to, srcs, nsrcs, count);
      case BufferReduce::BitXor: return reduce_typed<T, BufferReduce::BitXor>(dst, copy_to, srcs, nsrcs, count);
      default: break;
    }
  }
  throw std::invalid_argument("reduce_buffers: bitwise reduction of a floating-point type");
}

}  // namespace

void reduce_buffers(DType dtype, BufferReduce op, void* dst, const void* const* srcs, int nsrcs,
                    size_t count, void* copy_to) {
  if (nsrcs < 1) throw std::invalid_argument("reduce_buffers: no sources");
  if (count == 0) return;
  switch (dtype) {
    case DType::Bool:
      switch (op) {
        case BufferReduce::Sum:
        case BufferReduce::Max:
        case BufferReduce::BitOr: return reduce_bool<true>(dst, copy_to, srcs, nsrcs, count);
        case BufferReduce::Product:
        case BufferReduce::Min:
        case BufferReduce::BitAnd: return reduce_bool<false>(dst, copy_to, srcs, nsrcs, count);
        case BufferReduce::BitXor: break;  // torch rejects xor of bools in c10d too
      }
      break;
    case DType::UInt8: return reduce_dispatch<uint8_t>(op, dst, copy_to, srcs, nsrcs, count);
    case DType::Int8: return reduce_dispatch<int8_t>(op, dst, copy_to, srcs, nsrcs, count);
    case DType::Int16: return reduce_dispatch<int16_t>(op, dst, copy_to, srcs, nsrcs, count);
    case DType::Int32: return reduce_dispatch<int32_t>(op, dst, copy_to, srcs, nsrcs, count);
    case DType::Int64: return reduce_dispatch<int64_t>(op, dst, copy_to, srcs, nsrcs, count);
    case DType::Float16: return reduce_dispatch<detail::f16>(op, dst, copy_to, srcs, nsrcs, count);
    case DType::BFloat16: return reduce_dispatch<detail::bf16>(op, dst, copy_to, srcs, nsrcs, count);
    case DType::Float32: return reduce_dispatch<float>(op, dst, copy_to, srcs, nsrcs, count);
    case DType::Float64: return reduce_dispatch<double>(op, dst, copy_to, srcs, nsrcs, count);
    default: break;
  }
  throw std::invalid_argument(std::string("reduce_buffers: unsupported dtype/op: ") + dtype_name(dtype) +
                              " op " + std::to_string(static_cast<int>(op)));
}

void copy_buffer(void* dst, const void* src, size_t bytes) {
  // Below ~1 MiB one core's memcpy is as fast as the fork/join of the pool.
  constexpr int64_t kCopyGrain = int64_t{512} << 10;
  auto body = [&](int64_t b, int64_t e) {
    std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, static_cast<size_t>(e - b));
  };
  detail::parallel_for(static_cast<int64_t>(bytes), kCopyGrain, body);
}

}  // namespace openneuron::kernels
