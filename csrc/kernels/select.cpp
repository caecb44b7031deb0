// Index-pattern engines: tril/triu masks, arg reductions (max/min with their
// indices) and scans (cumsum/cumprod). Any strides; work splits over the
// independent lines.
#include <algorithm>
#include <cmath>
#include <vector>

#include "error.h"
#include "loop.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"
#include "wrapping.h"

namespace openneuron::kernels {
namespace detail {
namespace {

// The dims other than an op's own dim, walked in up to 3 layouts.
using Lines = OffsetWalk<3>;

// ------------------------------------------------------------ tril / triu

template <size_t S>
int tri_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const TriParams*>(params);
  const TensorType& it = p.in.type;
  const TensorType& ot = p.out.type;
  const int nd = ot.ndim;
  const int64_t R = ot.sizes[nd - 2], C = ot.sizes[nd - 1];
  if (ot.numel() == 0) return 0;
  const char* in = p.in.resolve(args);
  char* out = p.out.resolve(args);
  Lines ln;
  for (int d = 0; d < nd - 2; ++d) {
    ln.size[ln.n] = ot.sizes[d];
    ln.st[0][ln.n] = it.strides[d];
    ln.st[1][ln.n] = ot.strides[d];
    ++ln.n;
  }
  const int64_t isr = it.strides[nd - 2], isc = it.strides[nd - 1];
  const int64_t osr = ot.strides[nd - 2], osc = ot.strides[nd - 1];
  const bool lower = p.op == TriOp::Tril;
  const int64_t k = p.diagonal;
  const int64_t rows = ot.numel() / C;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t i = t % R;
      int64_t o[2];
      ln.offsets(t / R, o, 2);
      const char* src = in + (o[0] + i * isr) * static_cast<int64_t>(S);
      char* dst = out + (o[1] + i * osr) * static_cast<int64_t>(S);
      if (isc == 1 && osc == 1) {
        // Contiguous rows: one zeroed and one copied run per row.
        constexpr int64_t s = static_cast<int64_t>(S);
        if (lower) {
          const int64_t keep = std::clamp<int64_t>(i + k + 1, 0, C);
          if (dst != src) std::memmove(dst, src, keep * s);
          std::memset(dst + keep * s, 0, (C - keep) * s);
        } else {
          const int64_t zero = std::clamp<int64_t>(i + k, 0, C);
          std::memset(dst, 0, zero * s);
          if (dst != src) std::memmove(dst + zero * s, src + zero * s, (C - zero) * s);
        }
        continue;
      }
      for (int64_t j = 0; j < C; ++j) {
        const bool keep = lower ? (j - i <= k) : (j - i >= k);
        char* d = dst + j * osc * static_cast<int64_t>(S);
        if (keep) {
          if (d != src + j * isc * static_cast<int64_t>(S)) std::memcpy(d, src + j * isc * static_cast<int64_t>(S), S);
        } else {
          std::memset(d, 0, S);
        }
      }
    }
  };
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(C, 1)), body);
  return 0;
}

// ------------------------------------------------------------ arg reductions

template <class T, bool kMax>
int argreduce_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const ArgReduceParams*>(params);
  using C = compute_t<T>;
  const TensorType& it = p.in.type;
  const TensorType& xt = p.indices.type;
  const int dim = p.dim;
  const int64_t D = it.ndim ? it.sizes[dim] : 1;
  const int64_t sd = it.ndim ? it.strides[dim] : 0;
  const T* in = reinterpret_cast<const T*>(p.in.resolve(args));
  int64_t* idx = reinterpret_cast<int64_t*>(p.indices.resolve(args));
  T* val = p.values.present() ? reinterpret_cast<T*>(p.values.resolve(args)) : nullptr;
  if (D == 0) return fail(err, errlen, "cannot reduce over an empty dimension");
  Lines ln;
  for (int d = 0; d < it.ndim; ++d) {
    if (d == dim) continue;
    ln.size[ln.n] = it.sizes[d];
    ln.st[0][ln.n] = it.strides[d];
    ln.st[1][ln.n] = xt.strides[d];
    ln.st[2][ln.n] = val ? p.values.type.strides[d] : 0;
    ++ln.n;
  }
  const int64_t lines = D ? it.numel() / D : 0;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o[3];
      ln.offsets(t, o, 3);
      const T* src = in + o[0];
      C best = load(src);
      int64_t bi = 0;
      for (int64_t j = 1; j < D; ++j) {
        const C v = load(src + j * sd);
        if constexpr (std::is_floating_point_v<C>) {
          if (best != best) break;  // NaN found: it wins
          if (v != v || (kMax ? v > best : v < best)) {
            best = v;
            bi = j;
          }
        } else {
          if (kMax ? v > best : v < best) {
            best = v;
            bi = j;
          }
        }
      }
      idx[o[1]] = bi;
      if (val) store(val + o[2], best);
    }
  };
  parallel_for(lines, std::max<int64_t>(1, kGrain / std::max<int64_t>(D, 1)), body);
  return 0;
}

// ------------------------------------------------------------ scans

template <class T, bool kProd>
int scan_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const ScanParams*>(params);
  using A = std::conditional_t<is_float_v<T>, double, int64_t>;
  const TensorType& it = p.in.type;
  const TensorType& ot = p.out.type;
  const int dim = p.dim;
  const int64_t D = it.ndim ? it.sizes[dim] : 1;
  if (ot.numel() == 0) return 0;
  const int64_t sdi = it.ndim ? it.strides[dim] : 0, sdo = ot.ndim ? ot.strides[dim] : 0;
  const T* in = reinterpret_cast<const T*>(p.in.resolve(args));
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  Lines ln;
  for (int d = 0; d < it.ndim; ++d) {
    if (d == dim) continue;
    ln.size[ln.n] = it.sizes[d];
    ln.st[0][ln.n] = it.strides[d];
    ln.st[1][ln.n] = ot.strides[d];
    ++ln.n;
  }
  const int64_t lines = it.numel() / D;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o[2];
      ln.offsets(t, o, 2);
      A acc = kProd ? A(1) : A(0);
      for (int64_t j = 0; j < D; ++j) {
        const A v = static_cast<A>(load(in + o[0] + j * sdi));
        if constexpr (kProd) acc = mul_w(acc, v);
        else acc = add_w(acc, v);
        store_cvt(out + o[1] + j * sdo, acc);
      }
    }
  };
  parallel_for(lines, std::max<int64_t>(1, kGrain / std::max<int64_t>(D, 1)), body);
  return 0;
}

}  // namespace
}  // namespace detail

onrt_kernel_fn tri_kernel(DType dtype) {
  using namespace detail;
  if (dtype == DType::Float64) return nullptr;
  switch (dtype_size(dtype)) {
    case 1: return &tri_entry<1>;
    case 2: return &tri_entry<2>;
    case 4: return &tri_entry<4>;
    case 8: return &tri_entry<8>;
    default: return nullptr;
  }
}

onrt_kernel_fn argreduce_kernel(ArgReduceOp op, DType in) {
  using namespace detail;
  return visit(in, [&](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (!is_real9_v<T>) return nullptr;
    else return op == ArgReduceOp::Max ? &argreduce_entry<T, true> : &argreduce_entry<T, false>;
  });
}

onrt_kernel_fn scan_kernel(ScanOp op, DType dtype) {
  using namespace detail;
  return visit(dtype, [&](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (!is_real9_v<T> || std::is_same_v<T, bool>) return nullptr;
    else return op == ScanOp::Cumprod ? &scan_entry<T, true> : &scan_entry<T, false>;
  });
}

}  // namespace openneuron::kernels
