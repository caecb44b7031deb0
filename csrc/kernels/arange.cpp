// arange: out[i] = start + i * step, in double for float outputs (like
// PyTorch's accumulate type) and in int64 for integer outputs.
#include "internal.h"

namespace openneuron::kernels {
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
