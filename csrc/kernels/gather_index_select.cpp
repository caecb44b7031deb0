// index_select and embedding backward (the gather and index family; the
// other gather/scatter engines are in gather.cpp).
#include <vector>

#include "error.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"

namespace openneuron::kernels {
namespace detail {
namespace {

inline int64_t index_at(const TensorArg& ia, const char* base, int64_t i) {
  // Indices may be any-strided 1-d (or 0-d).
  int64_t off = 0, rem = i;
  for (int d = ia.type.ndim - 1; d >= 0; --d) {
    off += (rem % ia.type.sizes[d]) * ia.type.strides[d];
    rem /= ia.type.sizes[d];
  }
  if (ia.type.dtype == DType::Int32) return reinterpret_cast<const int32_t*>(base)[off];
  return reinterpret_cast<const int64_t*>(base)[off];
}

template <size_t S>
int index_select_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const IndexSelectParams*>(params);
  const TensorType& st = p.self.type;
  const TensorType& ot = p.out.type;
  const char* self = p.self.resolve(args);
  const char* index = p.index.resolve(args);
  char* out = p.out.resolve(args);
  const int64_t nidx = p.index.type.numel();
  if (ot.numel() == 0) return 0;
  const int dim = p.dim;
  const int64_t dsize = st.ndim ? st.sizes[dim] : 1;
  std::vector<int64_t> idx(nidx);
  for (int64_t j = 0; j < nidx; ++j) {
    idx[j] = index_at(p.index, index, j);
    if (idx[j] < 0 || idx[j] >= dsize) return fail(err, errlen, "index out of range in self");
  }
  // out element (pre, j, post) <- self element (pre, idx[j], post).
  int64_t post = 1;
  bool post_contig = true;
  int64_t expect_s = 1, expect_o = 1;
  for (int d = st.ndim - 1; d > dim; --d) {
    post *= st.sizes[d];
    if (st.sizes[d] != 1 && (st.strides[d] != expect_s || ot.strides[d] != expect_o)) post_contig = false;
    expect_s *= st.sizes[d];
    expect_o *= ot.sizes[d];
  }
  int64_t pre = 1;
  for (int d = 0; d < dim; ++d) pre *= st.sizes[d];
  const int64_t sd = st.ndim ? st.strides[dim] : 0, od = ot.ndim ? ot.strides[dim] : 0;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t j = t % nidx;
      int64_t rem = t / nidx, so = 0, oo = 0;
      for (int d = dim - 1; d >= 0; --d) {
        const int64_t x = rem % st.sizes[d];
        rem /= st.sizes[d];
        so += x * st.strides[d];
        oo += x * ot.strides[d];
      }
      const char* src = self + (so + idx[j] * sd) * static_cast<int64_t>(S);
      char* dst = out + (oo + j * od) * static_cast<int64_t>(S);
      if (post_contig) {
        std::memcpy(dst, src, post * S);
        continue;
      }
      for (int64_t q = 0; q < post; ++q) {
        int64_t r2 = q, so2 = 0, oo2 = 0;
        for (int d = st.ndim - 1; d > dim; --d) {
          const int64_t x = r2 % st.sizes[d];
          r2 /= st.sizes[d];
          so2 += x * st.strides[d];
          oo2 += x * ot.strides[d];
        }
        std::memcpy(dst + oo2 * static_cast<int64_t>(S), src + so2 * static_cast<int64_t>(S), S);
      }
    }
  };
  parallel_for(pre * nidx, std::max<int64_t>(1, kGrain / std::max<int64_t>(post, 1)), body);
  return 0;
}

template <class G>
int embedding_backward_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const EmbeddingBackwardParams*>(params);
  const TensorType& g = p.grad.type;
  const TensorType& ot = p.out.type;
  const G* grad = reinterpret_cast<const G*>(p.grad.resolve(args));
  const char* indices = p.indices.resolve(args);
  float* out = reinterpret_cast<float*>(p.out.resolve(args));
  const int64_t W = ot.sizes[0], D = ot.sizes[1];
  const int64_t ors = ot.strides[0], ocs = ot.strides[1];
  const int64_t n = p.indices.type.numel();
  const int64_t gcs = g.strides[g.ndim - 1];
  std::vector<int64_t> rows(n), goff(n);
  for (int64_t i = 0; i < n; ++i) {
    rows[i] = index_at(p.indices, indices, i);
    if (rows[i] != p.padding_idx && (rows[i] < 0 || rows[i] >= W))
      return fail(err, errlen, "index out of range in self");
    int64_t rem = i, off = 0;
    for (int d = g.ndim - 2; d >= 0; --d) {
      off += (rem % g.sizes[d]) * g.strides[d];
      rem /= g.sizes[d];
    }
    goff[i] = off;
  }
  // Each task owns a range of weight rows: no two threads write one row, and
  // every row sums its gradients in index order.
  auto body = [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r)
      for (int64_t j = 0; j < D; ++j) out[r * ors + j * ocs] = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = rows[i];
      if (r < rb || r >= re || r == p.padding_idx) continue;
      float* o = out + r * ors;
      const G* src = grad + goff[i];
      if (ocs == 1 && gcs == 1) {
        for (int64_t j = 0; j < D; ++j) o[j] += load(src + j);
      } else {
        for (int64_t j = 0; j < D; ++j) o[j * ocs] += load(src + j * gcs);
      }
    }
  };
  parallel_for(W, std::max<int64_t>(1, (n * D >= 65536) ? W / 64 + 1 : W), body);
  return 0;
}

}  // namespace
}  // namespace detail

onrt_kernel_fn index_select_kernel(DType self, DType index) {
  using namespace detail;
  if (index != DType::Int64 && index != DType::Int32) return nullptr;
  if (self == DType::Float64) return nullptr;
  switch (dtype_size(self)) {
    case 1: return &index_select_entry<1>;
    case 2: return &index_select_entry<2>;
    case 4: return &index_select_entry<4>;
    case 8: return &index_select_entry<8>;
    default: return nullptr;
  }
}

onrt_kernel_fn embedding_backward_kernel(DType out, DType grad, DType index) {
  using namespace detail;
  if (out != DType::Float32 || (index != DType::Int64 && index != DType::Int32)) return nullptr;
  return visit(grad, [](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_float3_v<T>) return &embedding_backward_entry<T>;
    else return nullptr;
  });
}

}  // namespace openneuron::kernels
