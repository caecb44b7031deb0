// Creation and copy: copy/convert (the data movement engine every dtype or
// layout change goes through), fill, and arange (out[i] = start + i * step, in
// double for float outputs, like PyTorch's accumulate type, and in int64 for
// integer outputs).
#include "elementwise.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"
#include "wrapping.h"

namespace openneuron::kernels {

// ------------------------------------------------------------ copy and fill

namespace detail {
namespace {

template <class C>
struct Identity {
  C operator()(C v) const { return v; }
};

// A copy whose source is transposed against its destination (dim 0 packed in
// the destination, dim 1 packed in the source): x.t().contiguous(), attention's
// head permutes. Element-by-element, one side of every pair walks a stride and
// touches a new cache line per element; in square tiles both sides reuse each
// line they load.
template <class U>
bool copy_transposed(const LoopPlan& pl, char* dst, const char* src) {
  constexpr int64_t S = sizeof(U);
  if (pl.ndim < 2 || pl.strides[0][0] != S || pl.strides[1][1] != S || pl.strides[1][0] == S) return false;
  constexpr int64_t T = 64 / S * 2;  // two cache lines of elements per tile side
  const int64_t n0 = pl.sizes[0], n1 = pl.sizes[1];
  if (n0 < T || n1 < T) return false;
  const int64_t t0 = (n0 + T - 1) / T, t1 = (n1 + T - 1) / T;
  int64_t outer = 1;
  for (int d = 2; d < pl.ndim; ++d) outer *= pl.sizes[d];
  const int64_t dst1 = pl.strides[0][1], src0 = pl.strides[1][0];
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t i0 = (t % t0) * T, i1 = (t / t0 % t1) * T;
      int64_t rem = t / (t0 * t1), od = 0, os = 0;
      for (int d = 2; d < pl.ndim; ++d) {
        const int64_t x = rem % pl.sizes[d];
        rem /= pl.sizes[d];
        od += x * pl.strides[0][d];
        os += x * pl.strides[1][d];
      }
      const int64_t e0 = std::min(n0, i0 + T), e1 = std::min(n1, i1 + T);
      // Through a dense tile: the source's rows (and the destination's) are often a
      // power-of-two bytes apart, so walking one of them across rows would evict
      // its own lines from the few ways of one cache set.
      U tile[T][T];
      for (int64_t j0 = i0; j0 < e0; ++j0)
        std::memcpy(tile[j0 - i0], src + os + j0 * src0 + i1 * S, (e1 - i1) * S);
      for (int64_t j1 = i1; j1 < e1; ++j1) {
        U* d = reinterpret_cast<U*>(dst + od + j1 * dst1) + i0;
        for (int64_t j0 = 0; j0 < e0 - i0; ++j0) d[j0] = tile[j0][j1 - i1];
      }
    }
  };
  parallel_for(outer * t0 * t1, std::max<int64_t>(1, kGrain / (T * T)), body);
  return true;
}

// Same dtype: move bits (NaN payloads of narrow floats survive).
template <size_t S>
int copy_raw_entry(const void* params, const onrt_arg* args, char*, size_t) {
  using U = typename raw_bits<S>::type;
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  const LoopPlan& pl = p.plan;
  if (pl.numel <= 0) return 0;
  char* dst = static_cast<char*>(args[p.ops[0].slot].ptr) + p.ops[0].byte_offset;
  const char* src = static_cast<char*>(args[p.ops[1].slot].ptr) + p.ops[1].byte_offset;
  if (pl.ndim == 1 && pl.strides[0][0] == S && pl.strides[1][0] == S) {
    if (dst == src) return 0;
    auto body = [&](int64_t b, int64_t e) { std::memmove(dst + b * S, src + b * S, (e - b) * S); };
    parallel_for(pl.numel, kGrain * 8, body);
    return 0;
  }
  if (copy_transposed<U>(pl, dst, src)) return 0;
  Elementwise<U, Identity<U>, U>::run(p, args, {U{}}, Identity<U>{});
  return 0;
}

template <class OutT, class InT>
int copy_convert_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  using C = compute_t<InT>;
  Elementwise<OutT, Identity<C>, InT>::run(p, args, {C{}}, Identity<C>{});
  return 0;
}

template <class OutT>
int fill_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  using C = compute_t<OutT>;
  // The scalar is converted once, like c10's Scalar::to<T>().
  const C v = scalar_in<C>(p, 0, args);
  Elementwise<OutT, Identity<C>, OutT>::run(p, args, {v}, Identity<C>{});
  return 0;
}

template <class T>
inline constexpr bool copyable_v = is_real9_v<T> || is_fp8_v<T>;

}  // namespace
}  // namespace detail

onrt_kernel_fn copy_kernel(DType out, DType in) {
  using namespace detail;
  if (out == in) {
    switch (dtype_size(out)) {
      case 1: return &copy_raw_entry<1>;
      case 2: return &copy_raw_entry<2>;
      case 4: return &copy_raw_entry<4>;
      case 8: return &copy_raw_entry<8>;
      default: return nullptr;
    }
  }
  return visit(out, [&](auto to) -> onrt_kernel_fn {
    using O = typename decltype(to)::type;
    if constexpr (!copyable_v<O>) {
      return nullptr;
    } else {
      return visit(in, [&](auto from) -> onrt_kernel_fn {
        using I = typename decltype(from)::type;
        if constexpr (!copyable_v<I>) return nullptr;
        else return &copy_convert_entry<O, I>;
      });
    }
  });
}

onrt_kernel_fn fill_kernel(DType out) {
  using namespace detail;
  return visit(out, [&](auto to) -> onrt_kernel_fn {
    using O = typename decltype(to)::type;
    if constexpr (!copyable_v<O>) return nullptr;
    else return &fill_entry<O>;
  });
}

// ------------------------------------------------------------ arange

namespace detail {
namespace {

template <class T>
int arange_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const ArangeParams*>(params);
  const int64_t n = p.out.type.numel();
  if (n == 0) return 0;
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  const int64_t st = p.out.type.ndim ? p.out.type.strides[0] : 1;
  if constexpr (is_float_v<T>) {
    const double start = p.start.as_double(args), step = p.step.as_double(args);
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) store_cvt(out + i * st, start + static_cast<double>(i) * step);
    };
    parallel_for(n, kGrain, body);
  } else {
    const int64_t start = p.start.as_int(args), step = p.step.as_int(args);
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) store_cvt(out + i * st, add_w(start, mul_w(i, step)));
    };
    parallel_for(n, kGrain, body);
  }
  return 0;
}

}  // namespace
}  // namespace detail

onrt_kernel_fn arange_kernel(DType out) {
  using namespace detail;
  return visit(out, [](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_real9_v<T> && !std::is_same_v<T, bool>) return &arange_entry<T>;
    else return nullptr;
  });
}

}  // namespace openneuron::kernels
