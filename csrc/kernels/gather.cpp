// Gather/scatter engine: gather, scatter (+ reductions), index_add/copy,
// advanced indexing (index / index_put), sort/topk, nonzero and isin. Any
// strides; work splits over independent lines, and every output position is
// updated by one thread in index order (deterministic, like the CPU).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "elementwise.h"
#include "error.h"
#include "loop.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"
#include "wrapping.h"

namespace openneuron::kernels {
namespace detail {
namespace {

// Up to 4 layouts: index, src, out, self.
using Walk = OffsetWalk<4>;

template <class T>
ON_INLINE bool is_nan_v(compute_t<T> v) {
  if constexpr (std::is_floating_point_v<compute_t<T>>) return v != v;
  else return false;
}

// Copies `src` into `dst` (same sizes, same dtype of size S, any strides).
template <size_t S>
void copy_strided(const TensorType& dt, char* dst, const TensorType& st, const char* src) {
  if (dst == src) return;
  const int64_t n = dt.numel();
  if (n == 0) return;
  if (dt.is_contiguous() && st.is_contiguous()) {
    auto body = [&](int64_t b, int64_t e) { std::memcpy(dst + b * S, src + b * S, (e - b) * S); };
    parallel_for(n, kGrain * 4, body);
    return;
  }
  Walk w;
  w.n = dt.ndim;
  for (int d = 0; d < dt.ndim; ++d) {
    w.size[d] = dt.sizes[d];
    w.st[0][d] = dt.strides[d];
    w.st[1][d] = st.strides[d];
  }
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t o[2];
      w.offsets(i, o, 2);
      std::memcpy(dst + o[0] * static_cast<int64_t>(S), src + o[1] * static_cast<int64_t>(S), S);
    }
  };
  parallel_for(n, kGrain, body);
}

// ------------------------------------------------------------ scatter family

// Float accumulators for the destinations one scatter line touches, loaded on first
// touch and rounded back by flush(): O(touches) per line, whatever the target size.
template <class T>
class WideAccumulator {
 public:
  explicit WideAccumulator(int64_t size) : value_(size), seen_(size, 0) {}
  void bind(T* base, int64_t stride) {
    base_ = base;
    stride_ = stride;
  }
  float& at(int64_t i) {
    if (!seen_[i]) {
      seen_[i] = 1;
      value_[i] = static_cast<float>(load(base_ + i * stride_));
      touched_.push_back(i);
    }
    return value_[i];
  }
  void flush() {
    for (const int64_t i : touched_) {
      store(base_ + i * stride_, value_[i]);
      seen_[i] = 0;
    }
    touched_.clear();
  }

 private:
  std::vector<float> value_;
  std::vector<char> seen_;
  std::vector<int64_t> touched_;
  T* base_ = nullptr;
  int64_t stride_ = 0;
};

// One gather line, elements copied as bits like PyTorch's gather, each index
// range-checked as it is read. A separate vectorised check pass over the line
// before the copy cost 1.8x on 1024-wide float lines (index streamed twice,
// C++ loop paired in one process); the copy itself is a scalar load/store
// either way. Returns false at the first out-of-range index (the line is then
// partly written, as PyTorch's CPU gather leaves it); the caller reports it.
constexpr int64_t kPrefetchRowBytes = 32 * 1024;  // an L1 data cache

template <class T, class I>
bool gather_line(T* out, int64_t osd, const T* self, int64_t ssd, const I* x, int64_t xsd,
                 int64_t D, int64_t tsize) {
  // Unsigned compare: negative indices wrap above tsize.
  const uint64_t limit = static_cast<uint64_t>(tsize);
  auto in_range = [limit](I v) { return static_cast<uint64_t>(static_cast<int64_t>(v)) < limit; };
  if (osd == 1 && ssd == 1 && xsd == 1) {
    // A line that reads most of a small self row in random order would miss on
    // each of its cache lines in turn; asking for the whole row up front
    // overlaps those misses (1024x1024 float32 along dim 1, single-threaded:
    // CPU time 1.16x -> 0.6x PyTorch's gather over the same calls).
    const int64_t row_bytes = tsize * static_cast<int64_t>(sizeof(T));
    if (row_bytes <= kPrefetchRowBytes && D * 8 >= tsize)
      for (int64_t b = 0; b < row_bytes; b += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(self) + b, 0, 3);
    for (int64_t j = 0; j < D; ++j) {
      const I v = x[j];
      if (!in_range(v)) [[unlikely]] return false;
      out[j] = self[v];
    }
  } else {
    for (int64_t j = 0; j < D; ++j) {
      const I v = x[j * xsd];
      if (!in_range(v)) [[unlikely]] return false;
      out[j * osd] = self[v * ssd];
    }
  }
  return true;
}

template <class T>
int scatter_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const ScatterParams*>(params);
  using C = compute_t<T>;
  const ScatterOp op = p.op;
  const bool index_op = op == ScatterOp::IndexAdd || op == ScatterOp::IndexCopy;
  const TensorType& selft = p.self.type;
  const TensorType& ot = p.out.type;
  const TensorType& xt = p.index.type;
  const int dim = p.dim;
  const T* self = reinterpret_cast<const T*>(p.self.resolve(args));
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  const char* index = p.index.resolve(args);
  const T* src = p.src.present() ? reinterpret_cast<const T*>(p.src.resolve(args)) : nullptr;
  const C value = coef<C>(p.value, args);
  if (op != ScatterOp::Gather)
    copy_strided<sizeof(T)>(ot, reinterpret_cast<char*>(out), selft, reinterpret_cast<const char*>(self));
  // Loop domain: index's sizes (scatter/gather) or src's (index_add/copy).
  const TensorType& dom = index_op ? p.src.type : xt;
  if (dom.numel() == 0) return 0;
  const int nd = std::max(dom.ndim, 1);
  auto size_of = [](const TensorType& t, int d) { return t.ndim ? t.sizes[d] : 1; };
  auto stride_of = [](const TensorType& t, int d) { return t.ndim ? t.strides[d] : 0; };
  const TensorType& target = op == ScatterOp::Gather ? selft : ot;
  const int64_t tsize = size_of(target, dim);
  const int64_t D = size_of(dom, dim);
  Walk w;  // st[0] index, st[1] src, st[2] out, st[3] self (gather)
  for (int d = 0; d < nd; ++d) {
    if (d == dim) continue;
    w.size[w.n] = size_of(dom, d);
    w.st[0][w.n] = index_op ? 0 : stride_of(xt, d);
    w.st[1][w.n] = src ? stride_of(p.src.type, d) : 0;
    w.st[2][w.n] = stride_of(ot, d);
    w.st[3][w.n] = stride_of(selft, d);
    ++w.n;
  }
  const int64_t xsd = index_op ? (xt.ndim ? xt.strides[0] : 0) : stride_of(xt, dim);
  const int64_t ssd = src ? stride_of(p.src.type, dim) : 0;
  const int64_t osd = stride_of(ot, dim), selfsd = stride_of(selft, dim);
  const bool is32 = xt.dtype == DType::Int32;
  std::atomic<bool> bad{false};
  std::atomic<int64_t> bad_idx{0};
  const int64_t lines = dom.numel() / D;
  const bool needs_count = op == ScatterOp::ScatterMean ||
                           (!p.include_self && (op == ScatterOp::ScatterProd || op == ScatterOp::ScatterAmax ||
                                                op == ScatterOp::ScatterAmin || op == ScatterOp::ScatterAdd));
  // Sums and products in bfloat16/float16 accumulate in float and round once per
  // destination element, as the CPU's scatter_add, scatter_reduce and index_add_ (over
  // slices) do: bit-equal to the CPU there, and more accurate than rounding per addition.
  // The CPU's index_add_ into a 0-d or 1-d self rounds each addition: so does this one.
  constexpr bool kWideAcc = !std::is_same_v<T, C> && std::is_floating_point_v<C>;
  const bool wide = kWideAcc && ((op == ScatterOp::IndexAdd && selft.ndim > 1) ||
                                 op == ScatterOp::ScatterAdd || op == ScatterOp::ScatterMean ||
                                 op == ScatterOp::ScatterProd);
  auto body = [&](int64_t b, int64_t e) {
    std::vector<int64_t> cnt;
    if (needs_count) cnt.resize(tsize);
    WideAccumulator<T> acc(wide ? tsize : 0);
    for (int64_t t = b; t < e; ++t) {
      int64_t o[4];
      w.offsets(t, o, 4);
      acc.bind(out + o[2], osd);
      if (needs_count) std::fill(cnt.begin(), cnt.end(), p.include_self ? 1 : 0);
      if (op == ScatterOp::Gather) {
        const bool line_ok =
            is32 ? gather_line(out + o[2], osd, self + o[3], selfsd,
                               reinterpret_cast<const int32_t*>(index) + o[0], xsd, D, tsize)
                 : gather_line(out + o[2], osd, self + o[3], selfsd,
                               reinterpret_cast<const int64_t*>(index) + o[0], xsd, D, tsize);
        if (line_ok) continue;  // else the loop below finds and reports the bad index
      }
      for (int64_t j = 0; j < D; ++j) {
        const int64_t xo = (index_op ? 0 : o[0]) + j * xsd;
        const int64_t idx = is32 ? reinterpret_cast<const int32_t*>(index)[xo]
                                 : reinterpret_cast<const int64_t*>(index)[xo];
        if (idx < 0 || idx >= tsize) {
          bad_idx.store(idx, std::memory_order_relaxed);
          bad.store(true, std::memory_order_relaxed);
          return;
        }
        if (op == ScatterOp::Gather) {
          store(out + o[2] + j * osd, load(self + o[3] + idx * selfsd));
          continue;
        }
        const C s = src ? load(src + o[1] + j * ssd) : value;
        T* dst = out + o[2] + idx * osd;
        if constexpr (kWideAcc) {
          if (wide) {
            const bool first = needs_count && cnt[idx] == 0;
            if (needs_count) ++cnt[idx];
            float& a = acc.at(idx);
            if (first) a = s;
            else if (op == ScatterOp::IndexAdd) a += value * s;
            else if (op == ScatterOp::ScatterProd) a *= s;
            else a += s;
            continue;
          }
        }
        switch (op) {
          case ScatterOp::Scatter:
          case ScatterOp::IndexCopy: store(dst, s); break;
          case ScatterOp::IndexAdd: store(dst, add_w(load(dst), mul_w(value, s))); break;
          case ScatterOp::ScatterAdd:
            if (!needs_count) {
              store(dst, add_w(load(dst), s));
              break;
            }
            [[fallthrough]];
          default: {
            const bool first = needs_count && cnt[idx] == 0;
            if (needs_count) ++cnt[idx];
            if (first) {
              store(dst, s);
              break;
            }
            const C a = load(dst);
            C r;
            if (op == ScatterOp::ScatterProd) r = mul_w(a, s);
            else if (op == ScatterOp::ScatterMean || op == ScatterOp::ScatterAdd) r = add_w(a, s);
            else if (op == ScatterOp::ScatterAmax) r = is_nan_v<T>(s) ? s : (a < s ? s : a);
            else r = is_nan_v<T>(s) ? s : (s < a ? s : a);
            store(dst, r);
          }
        }
      }
      if constexpr (kWideAcc) acc.flush();
      if (op == ScatterOp::ScatterMean) {
        for (int64_t q = 0; q < tsize; ++q) {
          if (cnt[q] <= 1) continue;
          T* dst = out + o[2] + q * osd;
          if constexpr (std::is_floating_point_v<C>) {
            store(dst, load(dst) / static_cast<C>(cnt[q]));
          } else if constexpr (std::is_same_v<C, bool>) {
            store(dst, load(dst));
          } else {
            const C a = load(dst), c = static_cast<C>(cnt[q]);
            C qt = static_cast<C>(a / c);
            if ((a % c != 0) && ((a < 0) != (c < 0))) qt = static_cast<C>(qt - 1);
            store(dst, qt);
          }
        }
      }
    }
  };
  parallel_for(lines, std::max<int64_t>(1, kGrain / std::max<int64_t>(D, 1)), body);
  if (bad.load())
    return fail(err, errlen, "index %lld is out of bounds for dimension %d with size %lld",
                static_cast<long long>(bad_idx.load()), dim, static_cast<long long>(tsize));
  return 0;
}

// ------------------------------------------------------------ advanced indexing

// Offsets in `sel` (elements) of the `count` index tuples of Index/IndexPut:
// tuple c is ind[k * count + c] on dim pos + k, k < m (negative values wrap).
// Fails on the first index out of bounds.
int index_tuple_offsets(const TensorType& sel, const int64_t* ind, int m, int pos, int64_t count,
                        int64_t* coff, char* err, size_t errlen) {
  for (int64_t c = 0; c < count; ++c) {
    int64_t off = 0;
    for (int k = 0; k < m; ++k) {
      int64_t x = ind[k * count + c];
      const int64_t size = sel.sizes[pos + k];
      if (x < -size || x >= size)
        return fail(err, errlen, "index %lld is out of bounds for dimension %d with size %lld",
                    static_cast<long long>(x), pos + k, static_cast<long long>(size));
      if (x < 0) x += size;
      off += x * sel.strides[pos + k];
    }
    coff[c] = off;
  }
  return 0;
}

template <size_t S>
int index_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const IndexParams*>(params);
  const TensorType& st = p.self.type;
  const int m = p.nidx;
  const int pos = p.pos;  // first indexed dim (see lowering)
  const int64_t count = p.indices.type.sizes[1];
  const int64_t* ind = reinterpret_cast<const int64_t*>(p.indices.resolve(args));
  char* selfp = p.put ? p.out.resolve(args) : p.self.resolve(args);
  const TensorType& sel = p.put ? p.out.type : st;
  // The other operand: out (get) or values (put), shaped [pre.., count, post..].
  const TensorType& vt = p.put ? p.values.type : p.out.type;
  char* vp = p.put ? p.values.resolve(args) : p.out.resolve(args);
  Walk pre, post;
  for (int d = 0; d < pos; ++d) {
    pre.size[pre.n] = sel.sizes[d];
    pre.st[0][pre.n] = sel.strides[d];
    pre.st[1][pre.n] = vt.strides[d];
    ++pre.n;
  }
  for (int d = pos + m; d < sel.ndim; ++d) {
    post.size[post.n] = sel.sizes[d];
    post.st[0][post.n] = sel.strides[d];
    post.st[1][post.n] = vt.strides[d - m + 1];
    ++post.n;
  }
  int64_t npre = 1, npost = 1;
  for (int d = 0; d < pre.n; ++d) npre *= pre.size[d];
  for (int d = 0; d < post.n; ++d) npost *= post.size[d];
  if (npre * count * npost == 0) return 0;
  const int64_t vcs = vt.strides[pos];
  // Self offset of each index tuple (validated once).
  std::vector<int64_t> coff(count);
  if (index_tuple_offsets(sel, ind, m, pos, count, coff.data(), err, errlen)) return 1;
  // Offsets stepping back one element at a time (flip, x[..., ::-1]-style indices).
  bool reversed = m == 1 && count > 1;
  for (int64_t c = 1; c < count && reversed; ++c) reversed = coff[c] == coff[0] - c;
  std::vector<int64_t> so(npost), vo(npost);
  bool dense = true;
  for (int64_t q = 0; q < npost; ++q) {
    int64_t o[2];
    post.offsets(q, o, 2);
    so[q] = o[0];
    vo[q] = o[1];
    dense = dense && o[0] == q && o[1] == q;
  }
  constexpr int64_t s = static_cast<int64_t>(S);
  if (!p.put) {
    using U = typename raw_bits<S>::type;
    // Runs of one pre position at a time: its offsets are computed once per run,
    // and single elements (npost == 1: flip, x[..., idx]) move as typed words.
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e;) {
        const int64_t r = t / count;
        const int64_t c0 = t % count, c1 = std::min(count, c0 + (e - t));
        int64_t o[2];
        pre.offsets(r, o, 2);
        const char* src0 = selfp + o[0] * s;
        char* dst0 = vp + o[1] * s;
        if (npost == 1 && reversed && vcs == 1) {  // flip of a packed dim: vectorisable
          const U* sp = reinterpret_cast<const U*>(src0 + so[0] * s) + coff[0];
          U* dp = reinterpret_cast<U*>(dst0 + vo[0] * s);
          for (int64_t c = c0; c < c1; ++c) dp[c] = sp[-c];
        } else if (npost == 1) {
          const int64_t vs = vcs * s, s0 = so[0] * s, v0 = vo[0] * s;
          for (int64_t c = c0; c < c1; ++c) {
            U v;
            std::memcpy(&v, src0 + coff[c] * s + s0, S);
            std::memcpy(dst0 + c * vs + v0, &v, S);
          }
        } else {
          for (int64_t c = c0; c < c1; ++c) {
            const char* src = src0 + coff[c] * s;
            char* dst = dst0 + c * vcs * s;
            if (dense) {
              std::memcpy(dst, src, npost * S);
            } else {
              for (int64_t q = 0; q < npost; ++q) std::memcpy(dst + vo[q] * s, src + so[q] * s, S);
            }
          }
        }
        t += c1 - c0;
      }
    };
    parallel_for(npre * count, std::max<int64_t>(1, kGrain / npost), body);
  }
  return 0;  // put is index_put_entry
}

template <class T>
int index_put_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const IndexParams*>(params);
  const int m = p.nidx;
  const int pos = p.pos;
  const TensorType& sel = p.out.type;
  const TensorType& vt = p.values.type;
  const int64_t count = p.indices.type.sizes[1];
  const int64_t* ind = reinterpret_cast<const int64_t*>(p.indices.resolve(args));
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  const T* val = reinterpret_cast<const T*>(p.values.resolve(args));
  copy_strided<sizeof(T)>(sel, reinterpret_cast<char*>(out), p.self.type, p.self.resolve(args));
  Walk w;  // over (pre, post) positions: st[0] self, st[1] values
  for (int d = 0; d < sel.ndim; ++d) {
    if (d >= pos && d < pos + m) continue;
    w.size[w.n] = sel.sizes[d];
    w.st[0][w.n] = sel.strides[d];
    w.st[1][w.n] = vt.strides[d < pos ? d : d - m + 1];
    ++w.n;
  }
  int64_t npos = 1;
  for (int d = 0; d < w.n; ++d) npos *= w.size[d];
  if (npos * count == 0) return 0;
  const int64_t vcs = vt.strides[pos];
  std::vector<int64_t> coff(count);
  if (index_tuple_offsets(sel, ind, m, pos, count, coff.data(), err, errlen)) return 1;
  const bool acc = p.accumulate;
  auto body = [&](int64_t b, int64_t e) {
    std::vector<int64_t> so(e - b), vo(e - b);
    for (int64_t u = b; u < e; ++u) {
      int64_t o[2];
      w.offsets(u, o, 2);
      so[u - b] = o[0];
      vo[u - b] = o[1];
    }
    for (int64_t c = 0; c < count; ++c) {
      T* dst = out + coff[c];
      const T* src = val + c * vcs;
      for (int64_t u = 0; u < e - b; ++u) {
        if (acc) store(dst + so[u], add_w(load(dst + so[u]), load(src + vo[u])));
        else store(dst + so[u], load(src + vo[u]));
      }
    }
  };
  parallel_for(npos, std::max<int64_t>(1, kGrain / std::max<int64_t>(count, 1)), body);
  return 0;
}

// ------------------------------------------------------------ sort / topk

template <class T>
int sort_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const SortParams*>(params);
  using C = compute_t<T>;
  const TensorType& it = p.in.type;
  const TensorType& vt = p.values.type;
  const TensorType& xt = p.indices.type;
  const int dim = p.dim;
  const int64_t D = it.ndim ? it.sizes[dim] : 1;
  const int64_t K = p.k;
  if (D == 0 || K == 0) return 0;
  const T* in = reinterpret_cast<const T*>(p.in.resolve(args));
  T* val = reinterpret_cast<T*>(p.values.resolve(args));
  int64_t* idx = reinterpret_cast<int64_t*>(p.indices.resolve(args));
  Walk w;
  for (int d = 0; d < it.ndim; ++d) {
    if (d == dim) continue;
    w.size[w.n] = it.sizes[d];
    w.st[0][w.n] = it.strides[d];
    w.st[1][w.n] = vt.strides[d];
    w.st[2][w.n] = xt.strides[d];
    ++w.n;
  }
  const int64_t sd = it.ndim ? it.strides[dim] : 0, vsd = vt.ndim ? vt.strides[dim] : 0,
                xsd = xt.ndim ? xt.strides[dim] : 0;
  const bool desc = p.descending;
  const int64_t lines = it.numel() / D;
  // at::sort(stable=false) on the CPU (SortingKernel.cpp sort_kernel): indices 0..D-1,
  // untouched when the input's stride along dim is 0; 1-D integral inputs of >= 32768
  // elements ascending go to fbgemm's radix sort (stable); everything else std::sort with a
  // key-only comparator. std::sort here, with the same comparator on the same initial
  // sequence, reproduces its tie order (the algorithm depends on comparison outcomes only).
  // (Both exceptions give the stable order.)
  const bool integral = std::is_integral_v<C> && !std::is_same_v<T, bool>;
  const bool cpu_unstable = !p.stable && K == D && !(it.ndim && sd == 0) &&
                            !(integral && it.ndim == 1 && D >= 32768 && !desc);
  auto body = [&](int64_t b, int64_t e) {
    std::vector<std::pair<C, int64_t>> v(D);
    for (int64_t t = b; t < e; ++t) {
      int64_t o[3];
      w.offsets(t, o, 3);
      for (int64_t j = 0; j < D; ++j) v[j] = {load(in + o[0] + j * sd), j};
      if (cpu_unstable) {
        if (desc)
          std::sort(v.begin(), v.end(), [](const std::pair<C, int64_t>& a, const std::pair<C, int64_t>& c) {
            return (is_nan_v<T>(a.first) && !is_nan_v<T>(c.first)) || c.first < a.first;
          });
        else
          std::sort(v.begin(), v.end(), [](const std::pair<C, int64_t>& a, const std::pair<C, int64_t>& c) {
            return (!is_nan_v<T>(a.first) && is_nan_v<T>(c.first)) || a.first < c.first;
          });
        for (int64_t j = 0; j < K; ++j) {
          store(val + o[1] + j * vsd, v[j].first);
          idx[o[2] + j * xsd] = v[j].second;
        }
        continue;
      }
      // Strict total order: NaN largest, ties by position (= a stable sort).
      auto less = [desc](const std::pair<C, int64_t>& a, const std::pair<C, int64_t>& c) {
        const bool an = is_nan_v<T>(a.first), cn = is_nan_v<T>(c.first);
        if (an || cn) {
          if (an && cn) return a.second < c.second;
          return desc ? an : cn;
        }
        if (a.first != c.first) return desc ? c.first < a.first : a.first < c.first;
        return a.second < c.second;
      };
      if (K < D) std::partial_sort(v.begin(), v.begin() + K, v.end(), less);
      else std::sort(v.begin(), v.end(), less);
      for (int64_t j = 0; j < K; ++j) {
        store(val + o[1] + j * vsd, v[j].first);
        idx[o[2] + j * xsd] = v[j].second;
      }
    }
  };
  parallel_for(lines, std::max<int64_t>(1, kGrain / (D * 8)), body);
  return 0;
}

// ------------------------------------------------------------ nonzero / isin

template <class T>
int nonzero_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const NonzeroParams*>(params);
  const TensorType& it = p.in.type;
  const int64_t n = it.numel();
  const int nd = it.ndim;
  const int64_t want = p.out.type.sizes[0];
  const T* in = reinterpret_cast<const T*>(p.in.resolve(args));
  int64_t* out = reinterpret_cast<int64_t*>(p.out.resolve(args));
  auto nz = [&](int64_t i, int64_t* coord) {
    int64_t off = 0, rem = i;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t x = rem % it.sizes[d];
      rem /= it.sizes[d];
      off += x * it.strides[d];
      if (coord) coord[d] = x;
    }
    return load(in + off) != compute_t<T>(0);
  };
  // Two passes over the same fixed chunks: counts, then each chunk writes
  // from its prefix offset (row-major order overall).
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(pool_threads(), n / kGrain));
  std::vector<int64_t> counts(chunks + 1, 0);
  auto count_fn = [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      int64_t k = 0;
      for (int64_t i = c * n / chunks; i < (c + 1) * n / chunks; ++i) k += nz(i, nullptr);
      counts[c + 1] = k;
    }
  };
  parallel_for(chunks, 1, count_fn);
  for (int64_t c = 0; c < chunks; ++c) counts[c + 1] += counts[c];
  if (counts[chunks] != want)
    return fail(err, errlen, "nonzero: the input changed between counting and writing");
  auto write_fn = [&](int64_t cb, int64_t ce) {
    int64_t coord[kMaxDims];
    for (int64_t c = cb; c < ce; ++c) {
      int64_t r = counts[c];
      for (int64_t i = c * n / chunks; i < (c + 1) * n / chunks; ++i) {
        if (!nz(i, coord)) continue;
        for (int d = 0; d < nd; ++d) out[r * nd + d] = coord[d];
        ++r;
      }
    }
  };
  if (nd > 0) parallel_for(chunks, 1, write_fn);
  return 0;
}

template <class T>
int isin_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const IsinParams*>(params);
  using C = compute_t<T>;
  const TensorType& et = p.elements.type;
  const TensorType& tt = p.test.type;
  const T* el = reinterpret_cast<const T*>(p.elements.resolve(args));
  const T* te = reinterpret_cast<const T*>(p.test.resolve(args));
  bool* out = reinterpret_cast<bool*>(p.out.resolve(args));
  std::vector<C> sorted;
  sorted.reserve(tt.numel());
  for (int64_t i = 0; i < tt.numel(); ++i) {
    int64_t off = 0, rem = i;
    for (int d = tt.ndim - 1; d >= 0; --d) {
      off += (rem % tt.sizes[d]) * tt.strides[d];
      rem /= tt.sizes[d];
    }
    const C v = load(te + off);
    if (!is_nan_v<T>(v)) sorted.push_back(v);
  }
  std::sort(sorted.begin(), sorted.end());
  const bool inv = p.invert;
  Walk w;
  w.n = et.ndim;
  for (int d = 0; d < et.ndim; ++d) {
    w.size[d] = et.sizes[d];
    w.st[0][d] = et.strides[d];
    w.st[1][d] = p.out.type.strides[d];
  }
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t o[2];
      w.offsets(i, o, 2);
      const C v = load(el + o[0]);
      const bool found = !is_nan_v<T>(v) && std::binary_search(sorted.begin(), sorted.end(), v);
      out[o[1]] = found != inv;
    }
  };
  parallel_for(et.numel(), kGrain / 8, body);
  return 0;
}

template <template <class> class E>
onrt_kernel_fn pick9(DType d) {
  return visit(d, [](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_real9_v<T>) return &E<T>::fn;
    else return nullptr;
  });
}
template <class T> struct ScatterE { static int fn(const void* a, const onrt_arg* b, char* c, size_t d) { return scatter_entry<T>(a, b, c, d); } };
template <class T> struct SortE { static int fn(const void* a, const onrt_arg* b, char* c, size_t d) { return sort_entry<T>(a, b, c, d); } };
template <class T> struct NonzeroE { static int fn(const void* a, const onrt_arg* b, char* c, size_t d) { return nonzero_entry<T>(a, b, c, d); } };
template <class T> struct IsinE { static int fn(const void* a, const onrt_arg* b, char* c, size_t d) { return isin_entry<T>(a, b, c, d); } };
template <class T> struct PutE { static int fn(const void* a, const onrt_arg* b, char* c, size_t d) { return index_put_entry<T>(a, b, c, d); } };

}  // namespace
}  // namespace detail

onrt_kernel_fn scatter_kernel(DType dtype) { return detail::pick9<detail::ScatterE>(dtype); }
onrt_kernel_fn sort_kernel(DType dtype) { return detail::pick9<detail::SortE>(dtype); }
onrt_kernel_fn nonzero_kernel(DType dtype) { return detail::pick9<detail::NonzeroE>(dtype); }
onrt_kernel_fn isin_kernel(DType dtype) { return detail::pick9<detail::IsinE>(dtype); }

onrt_kernel_fn index_kernel(bool put, DType dtype) {
  using namespace detail;
  if (put) return pick9<PutE>(dtype);
  if (dtype == DType::Float64) return nullptr;
  switch (dtype_size(dtype)) {
    case 1: return &index_entry<1>;
    case 2: return &index_entry<2>;
    case 4: return &index_entry<4>;
    case 8: return &index_entry<8>;
    default: return nullptr;
  }
}

}  // namespace openneuron::kernels
