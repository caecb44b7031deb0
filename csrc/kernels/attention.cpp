// Memory-efficient scaled dot-product attention (flash-attention style) and its
// backward. Scores exist only one tile at a time: the forward keeps a running
// max and sum per query row (online softmax), the backward recomputes the tile
// probabilities from the saved log-sum-exp. Tile products go through oneDNN's
// sgemm (never a hand-written GEMM) with float32 accumulation; half inputs are
// widened tile by tile (their products are exact in float32).
//
// Threads: the tiles are spread over the kernel thread pool, and each tile GEMM
// runs on the thread that has the tile (DnnlTeamFor), not on an OpenMP team of
// oneDNN's own.
#include <dnnl.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <vector>

#include "dnnl_context.h"
#include "error.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "philox.h"
#include "storage.h"
#include "vmath.h"

namespace openneuron::kernels {
namespace detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Row-major [b, h, row, col] addressing with unit column stride (the compiler
// copies other layouts); strides in elements.
struct View4 {
  char* base = nullptr;
  int64_t st[4] = {};
  size_t elem = 0;
  View4() = default;
  View4(const TensorArg& t, const onrt_arg* args)
      : base(t.present() ? t.resolve(args) : nullptr), elem(dtype_size(t.type.dtype)) {
    for (int d = 0; d < 4; ++d) st[d] = d < t.type.ndim ? t.type.strides[d] : 0;
  }
  template <class T>
  T* row(int64_t b, int64_t h, int64_t r) const {
    return reinterpret_cast<T*>(base +
                                (b * st[0] + h * st[1] + r * st[2]) * static_cast<int64_t>(elem));
  }
};

// A [rows, cols] tile of T rows as float: the rows themselves when T is float,
// else widened into `buf`. Returns the pointer and its leading dimension.
template <class T>
const float* as_float_tile(const View4& v, int64_t b, int64_t h, int64_t r0, int64_t rows,
                           int64_t cols, float* buf, int64_t& ld) {
  if constexpr (std::is_same_v<T, float>) {
    ld = v.st[2];
    if (rows == 1 || ld >= cols) return v.row<float>(b, h, r0);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = v.row<T>(b, h, r0 + r);
    float* dst = buf + r * cols;
    for (int64_t c = 0; c < cols; ++c) dst[c] = load(src + c);
  }
  ld = cols;
  return buf;
}

// Rounds probabilities (and their gradients) to T before they meet V, K or Q
// in a product, as PyTorch's CPU flash attention does for half types: results
// then agree with PyTorch's to the rounding of T, not just to its accuracy.
template <class T>
ON_INLINE void round_to(float* x, int64_t n) {
  if constexpr (!std::is_same_v<T, float>) {
    for (int64_t i = 0; i < n; ++i) {
      T t;
      store(&t, x[i]);
      x[i] = load(&t);
    }
  }
}

// x <- exp(x - m) (0 where x is -inf); returns the sum, in 16 fixed lanes: a
// single accumulator would serialise every element on the add latency (no
// reassociation without -ffast-math), and fixed lanes keep the result
// independent of threads. The row max m comes from vmath.h's row_max.
inline float exp_sum(float* x, int64_t n, float m) {
  float l[16] = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k) {
      const float e = x[j + k] == kNegInf ? 0.0f : vexp(x[j + k] - m);
      x[j + k] = e;
      l[k] += e;
    }
  for (; j < n; ++j) {
    const float e = x[j] == kNegInf ? 0.0f : vexp(x[j] - m);
    x[j] = e;
    l[0] += e;
  }
  float s = 0;
  for (float v : l) s += v;
  return s;
}

// dnnl_sgemm is row-major: C = alpha * op(A) * op(B) + beta * C. A matrix
// stored as a single row may come with any row stride (a size-1 dim of a
// tensor has an arbitrary stride); oneDNN still wants ld >= its row length.
inline bool gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return true;
  auto ld = [](int64_t ld, int64_t rows, int64_t cols) {
    return std::max<int64_t>(rows == 1 ? std::max(ld, cols) : ld, 1);
  };
  const bool at = ta == 'T', bt = tb == 'T';
  return dnnl_sgemm(ta, tb, m, n, k, alpha, a, ld(lda, at ? k : m, at ? m : k), b,
                    ld(ldb, bt ? n : k, bt ? k : n), beta, c, ld(ldc, m, n)) == dnnl_success;
}

// Adds the mask and the causal limit to a score tile S[rows, Bk] whose first
// element is (query r0, key c0). Bool masks keep `true`; additive masks add.
void apply_mask(float* S, int64_t ldS, int64_t rows, int64_t cols, int64_t r0, int64_t c0,
                bool causal, const View4& mask, DType mdt, int64_t b, int64_t h) {
  for (int64_t r = 0; r < rows; ++r) {
    float* s = S + r * ldS;
    if (mask.base) {
      const int64_t cs = mask.st[3];
      const char* mrow =
          mask.base + (b * mask.st[0] + h * mask.st[1] + (r0 + r) * mask.st[2] + c0 * cs) *
                          static_cast<int64_t>(mask.elem);
      switch (mdt) {
        case DType::Bool:
          for (int64_t c = 0; c < cols; ++c)
            s[c] = load(reinterpret_cast<const bool*>(mrow) + c * cs) ? s[c] : kNegInf;
          break;
        case DType::Float32:
          for (int64_t c = 0; c < cols; ++c) s[c] += reinterpret_cast<const float*>(mrow)[c * cs];
          break;
        case DType::BFloat16:
          for (int64_t c = 0; c < cols; ++c)
            s[c] += load(reinterpret_cast<const bf16*>(mrow) + c * cs);
          break;
        case DType::Float16:
          for (int64_t c = 0; c < cols; ++c)
            s[c] += load(reinterpret_cast<const f16*>(mrow) + c * cs);
          break;
        default:
          break;
      }
    }
    if (causal) {
      // Top-left aligned, as PyTorch: query i sees keys j <= i.
      const int64_t first_masked = std::max<int64_t>(0, r0 + r + 1 - c0);
      for (int64_t c = first_masked; c < cols; ++c) s[c] = kNegInf;
    }
  }
}

// Dropout multipliers of one score row: element (b, h, i, j) draws lane e % 4
// of Philox block offset + e / 4, e its row-major index in [B, H, L, S]; kept
// (u < 1 - p, as the Dropout op) elements scale by 1 / (1 - p).
void dropout_row(uint64_t seed, uint64_t offset, int64_t e0, int64_t n, float keep_p, float scale,
                 float* z) {
  int64_t j = 0;
  while (j < n) {
    const int64_t e = e0 + j;
    const PhiloxBlock blk = philox(seed, offset + static_cast<uint64_t>(e / 4));
    for (int lane = static_cast<int>(e % 4); lane < 4 && j < n; ++lane, ++j)
      z[j] = u01(blk.v[lane]) < keep_p ? scale : 0.0f;
  }
}

struct Shape {
  int64_t B, H, Hk, L, S, E, Ev, group, bq, bk;
  float scale;
  bool causal, dropout;
  uint64_t seed, offset;
  float keep_p, drop_scale;
  DType mdt;
};

Shape shape_of(const AttentionParams& p, const onrt_arg* args) {
  Shape s;
  s.B = p.b;
  s.H = p.h;
  s.Hk = p.hk;
  s.L = p.l;
  s.S = p.s;
  s.E = p.e;
  s.Ev = p.ev;
  s.group = p.h / p.hk;
  s.bq = std::max<int64_t>(1, std::min(p.block_q, p.l));
  s.bk = std::max<int64_t>(1, std::min(p.block_k, p.s));
  s.scale = static_cast<float>(p.scale.as_double(args));
  s.causal = p.causal;
  const double dp = p.has_dropout ? p.dropout_p.as_double(args) : 0.0;
  s.dropout = dp > 0.0;
  s.seed = s.dropout ? static_cast<uint64_t>(p.seed.as_int(args)) : 0;
  s.offset = s.dropout ? static_cast<uint64_t>(p.offset.as_int(args)) : 0;
  s.keep_p = static_cast<float>(1.0 - dp);
  s.drop_scale = dp >= 1.0 ? 0.0f : static_cast<float>(1.0 / (1.0 - dp));
  s.mdt = p.mask.present() ? p.mask.type.dtype : DType::Float32;
  return s;
}

template <class T>
int attention_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const AttentionParams*>(params);
  const Shape sh = shape_of(p, args);
  const View4 q(p.q, args), k(p.k, args), v(p.v, args), mask(p.mask, args), out(p.out, args);
  const View4 lse(p.lse, args);  // [B, H, L] as [B, H, L, -]
  const int64_t nqb = (sh.L + sh.bq - 1) / sh.bq;
  const int64_t work = sh.B * sh.H * nqb;
  if (work == 0) return 0;
  std::atomic<bool> failed{false};
  auto tiles = [&](int64_t w0, int64_t w1) {
    const DnnlTeamFor one_thread;  // the pool's threads are the team
    const int64_t Bq = sh.bq, Bk = sh.bk;
    std::vector<float> qbuf(Bq * sh.E), kbuf(Bk * sh.E), vbuf(Bk * sh.Ev), sbuf(Bq * Bk),
        acc(Bq * sh.Ev), m(Bq), l(Bq), z(sh.dropout ? Bk : 0);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t ib = w % nqb, h = (w / nqb) % sh.H, b = w / (nqb * sh.H);
      const int64_t hk = h / sh.group;
      const int64_t r0 = ib * Bq, nq = std::min(Bq, sh.L - r0);
      int64_t ldq, ldk, ldv;
      const float* Q = as_float_tile<T>(q, b, h, r0, nq, sh.E, qbuf.data(), ldq);
      std::fill(m.begin(), m.end(), kNegInf);
      std::fill(l.begin(), l.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      const int64_t kend = sh.causal ? std::min(sh.S, r0 + nq) : sh.S;
      for (int64_t c0 = 0; c0 < kend; c0 += Bk) {
        const int64_t nk = std::min(Bk, kend - c0);
        const float* K = as_float_tile<T>(k, b, hk, c0, nk, sh.E, kbuf.data(), ldk);
        const float* V = as_float_tile<T>(v, b, hk, c0, nk, sh.Ev, vbuf.data(), ldv);
        float* S = sbuf.data();
        if (!gemm('N', 'T', nq, nk, sh.E, sh.scale, Q, ldq, K, ldk, 0.0f, S, Bk)) failed = true;
        apply_mask(S, Bk, nq, nk, r0, c0, sh.causal, mask, sh.mdt, b, h);
        for (int64_t r = 0; r < nq; ++r) {
          float* s = S + r * Bk;
          const float mx = row_max(s, nk);
          const float m_new = std::max(m[r], mx);
          if (m_new == kNegInf) {  // every key so far masked: nothing to add
            std::fill(s, s + nk, 0.0f);
            continue;
          }
          const float corr = m[r] == kNegInf ? 0.0f : vexp(m[r] - m_new);
          const float sum = exp_sum(s, nk, m_new);
          l[r] = l[r] * corr + sum;
          m[r] = m_new;
          if (corr != 1.0f)
            for (int64_t c = 0; c < sh.Ev; ++c) acc[r * sh.Ev + c] *= corr;
          if (sh.dropout) {
            // The normaliser sums the undropped probabilities (softmax, then dropout).
            dropout_row(sh.seed, sh.offset, ((b * sh.H + h) * sh.L + r0 + r) * sh.S + c0, nk,
                        sh.keep_p, sh.drop_scale, z.data());
            for (int64_t c = 0; c < nk; ++c) s[c] *= z[c];
          }
          round_to<T>(s, nk);
        }
        if (!gemm('N', 'N', nq, sh.Ev, nk, 1.0f, S, Bk, V, ldv, 1.0f, acc.data(), sh.Ev))
          failed = true;
      }
      for (int64_t r = 0; r < nq; ++r) {
        // A row with every key masked has no distribution: output 0 (as
        // PyTorch's math path, which uses a safe softmax), and lse +inf so the
        // backward recomputes probabilities of 0 for it.
        const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
        T* o = out.row<T>(b, h, r0 + r);
        for (int64_t c = 0; c < sh.Ev; ++c)
          store(o + c, cvt<compute_t<T>>(acc[r * sh.Ev + c] * inv));
        if (lse.base)
          *lse.row<float>(b, h, r0 + r) =
              l[r] > 0 ? m[r] + std::log(l[r]) : std::numeric_limits<float>::infinity();
      }
    }
  };
  run_chunks(work, std::min<int64_t>(work, int64_t{8} * pool_threads()), RangeFn(tiles));
  if (failed) return fail(err, errlen, "attention: oneDNN sgemm failed");
  return 0;
}

// One task per (batch, kv head): it owns grad_k/grad_v of that head and
// grad_q of the query heads sharing it, so no two tasks write the same bytes
// and the result does not depend on the thread count.
template <class T>
int attention_backward_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const AttentionParams*>(params);
  const Shape sh = shape_of(p, args);
  const View4 q(p.q, args), k(p.k, args), v(p.v, args), mask(p.mask, args), out(p.out, args);
  const View4 lse(p.lse, args), go(p.grad_out, args), gq(p.grad_q, args), gk(p.grad_k, args),
      gv(p.grad_v, args);
  const int64_t work = sh.B * sh.Hk;
  if (work == 0 || sh.L == 0) return 0;
  std::atomic<bool> failed{false};
  auto tiles = [&](int64_t w0, int64_t w1) {
    const DnnlTeamFor one_thread;  // the pool's threads are the team
    const int64_t Bq = sh.bq, Bk = sh.bk, E = sh.E, Ev = sh.Ev;
    std::vector<float> qbuf(Bq * E), dobuf(Bq * Ev), kbuf(Bk * E), vbuf(Bk * Ev), pbuf(Bq * Bk),
        pdbuf(sh.dropout ? Bq * Bk : 0), dpbuf(Bq * Bk), dk(Bk * E), dv(Bk * Ev),
        dsum(sh.group * sh.L);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t hk = w % sh.Hk, b = w / sh.Hk;
      // D_i = rowsum(dO_i * O_i) (= sum_j P_ij dP_ij, dropout included), and
      // grad_q zeroed for accumulation.
      for (int64_t g = 0; g < sh.group; ++g) {
        const int64_t h = hk * sh.group + g;
        for (int64_t r = 0; r < sh.L; ++r) {
          const T* o = out.row<T>(b, h, r);
          const T* d = go.row<T>(b, h, r);
          double acc = 0;
          for (int64_t c = 0; c < Ev; ++c)
            acc += static_cast<double>(load(o + c)) * static_cast<double>(load(d + c));
          dsum[g * sh.L + r] = static_cast<float>(acc);
          float* dq = gq.row<float>(b, h, r);
          std::fill(dq, dq + E, 0.0f);
        }
      }
      for (int64_t c0 = 0; c0 < sh.S; c0 += Bk) {
        const int64_t nk = std::min(Bk, sh.S - c0);
        int64_t ldk, ldv, ldq, ldo;
        const float* K = as_float_tile<T>(k, b, hk, c0, nk, E, kbuf.data(), ldk);
        const float* V = as_float_tile<T>(v, b, hk, c0, nk, Ev, vbuf.data(), ldv);
        std::fill(dk.begin(), dk.end(), 0.0f);
        std::fill(dv.begin(), dv.end(), 0.0f);
        for (int64_t g = 0; g < sh.group; ++g) {
          const int64_t h = hk * sh.group + g;
          // Causal: query rows before c0 see none of this key block.
          const int64_t r_first = sh.causal ? std::min(c0, sh.L) / Bq * Bq : 0;
          for (int64_t r0 = r_first; r0 < sh.L; r0 += Bq) {
            const int64_t nq = std::min(Bq, sh.L - r0);
            const float* Q = as_float_tile<T>(q, b, h, r0, nq, E, qbuf.data(), ldq);
            const float* dO = as_float_tile<T>(go, b, h, r0, nq, Ev, dobuf.data(), ldo);
            float* P = pbuf.data();
            float* dP = dpbuf.data();
            bool ok = gemm('N', 'T', nq, nk, E, sh.scale, Q, ldq, K, ldk, 0.0f, P, Bk);
            apply_mask(P, Bk, nq, nk, r0, c0, sh.causal, mask, sh.mdt, b, h);
            for (int64_t r = 0; r < nq; ++r) {
              const float lr = *lse.row<float>(b, h, r0 + r);
              float* s = P + r * Bk;
              for (int64_t c = 0; c < nk; ++c) s[c] = s[c] == kNegInf ? 0.0f : vexp(s[c] - lr);
            }
            float* Pd = P;  // probabilities after dropout
            if (sh.dropout) {
              for (int64_t r = 0; r < nq; ++r) {
                float* zr = pdbuf.data() + r * Bk;
                dropout_row(sh.seed, sh.offset, ((b * sh.H + h) * sh.L + r0 + r) * sh.S + c0, nk,
                            sh.keep_p, sh.drop_scale, zr);
              }
              // pdbuf holds the multipliers until dP has used them.
            }
            ok = ok && gemm('N', 'T', nq, nk, Ev, 1.0f, dO, ldo, V, ldv, 0.0f, dP, Bk);
            for (int64_t r = 0; r < nq; ++r) {
              const float D = dsum[g * sh.L + r0 + r];
              float* s = P + r * Bk;
              float* d = dP + r * Bk;
              if (sh.dropout) {
                float* zr = pdbuf.data() + r * Bk;
                for (int64_t c = 0; c < nk; ++c) {
                  const float pd = s[c] * zr[c];
                  d[c] = s[c] * (d[c] * zr[c] - D);
                  zr[c] = pd;
                }
              } else {
                for (int64_t c = 0; c < nk; ++c) d[c] = s[c] * (d[c] - D);
              }
            }
            if (sh.dropout) Pd = pdbuf.data();
            for (int64_t r = 0; r < nq; ++r) {
              round_to<T>(Pd + r * Bk, nk);
              round_to<T>(dP + r * Bk, nk);
            }
            // dV += Pd^T dO; dK += scale * dS^T Q; dQ += scale * dS K.
            ok = ok && gemm('T', 'N', nk, Ev, nq, 1.0f, Pd, Bk, dO, ldo, 1.0f, dv.data(), Ev);
            ok = ok && gemm('T', 'N', nk, E, nq, sh.scale, dP, Bk, Q, ldq, 1.0f, dk.data(), E);
            ok = ok && gemm('N', 'N', nq, E, nk, sh.scale, dP, Bk, K, ldk, 1.0f,
                            gq.row<float>(b, h, r0), gq.st[2]);
            if (!ok) failed = true;
          }
        }
        for (int64_t c = 0; c < nk; ++c) {
          T* dkr = gk.row<T>(b, hk, c0 + c);
          T* dvr = gv.row<T>(b, hk, c0 + c);
          for (int64_t e = 0; e < E; ++e) store(dkr + e, cvt<compute_t<T>>(dk[c * E + e]));
          for (int64_t e = 0; e < Ev; ++e) store(dvr + e, cvt<compute_t<T>>(dv[c * Ev + e]));
        }
      }
    }
  };
  run_chunks(work, std::min<int64_t>(work, int64_t{8} * pool_threads()), RangeFn(tiles));
  if (failed) return fail(err, errlen, "attention backward: oneDNN sgemm failed");
  return 0;
}

}  // namespace
}  // namespace detail

onrt_kernel_fn attention_kernel(DType dtype, bool backward) {
  using namespace detail;
  switch (dtype) {
    case DType::Float32:
      return backward ? &attention_backward_entry<float> : &attention_entry<float>;
    case DType::BFloat16:
      return backward ? &attention_backward_entry<bf16> : &attention_entry<bf16>;
    case DType::Float16:
      return backward ? &attention_backward_entry<f16> : &attention_entry<f16>;
    default:
      return nullptr;
  }
}

int64_t attention_offset_increment(int64_t b, int64_t h, int64_t l, int64_t s) {
  return (b * h * l * s + 3) / 4;
}

}  // namespace openneuron::kernels
