// A whole LSTM or GRU layer's recurrence (one direction) in one instruction,
// forward and backward through time. The caller computes the input projections of
// every step with one large GEMM, so a step here is one small GEMM, h_{t-1} W_hh^T
// (batch x gates*H, K = H), and the cell's pointwise math, with nothing dispatched
// in between. The hidden units are split into one block per pool thread: a thread
// computes its block's gate columns with its own GEMM and then the cell for those
// units, so each thread keeps its slice of W_hh in its own cache for the whole
// sequence, and the threads meet once per step. The pointwise formulas and their
// order are rnn.cpp's cell kernels' (PyTorch's fused cells).
#include <dnnl.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "dnnl_context.h"
#include "error.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "vmath.h"

namespace openneuron::kernels {
namespace detail {
namespace {

ON_INLINE float sigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }

// Blocks of hidden units, one per pool thread, at least kMinUnits units each: a
// small layer is not worth splitting.
constexpr int64_t kMinUnits = 32;

struct Split {
  int64_t hidden, count;
  explicit Split(int64_t h)
      : hidden(h), count(std::clamp<int64_t>(h / kMinUnits, 1, pool_threads())) {}
  int64_t begin(int64_t b) const { return b * hidden / count; }
  int64_t size(int64_t b) const { return begin(b + 1) - begin(b); }
};

// run_steps (parallel.h) over the blocks, each block's call with oneDNN on its
// thread alone (the threads are ours). fn returns false on failure.
template <class F>
bool run_blocks(int64_t steps, const Split& split, F&& fn) {
  return run_steps(steps, split.count, [&](int64_t s, int64_t blk) {
    const DnnlTeamFor one_thread;
    return fn(s, blk);
  });
}

// dnnl_sgemm is row-major: C[M,N] = A[M,K] B[K,N] + beta C.
bool sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
           int64_t ldb, float* c, int64_t ldc, float beta = 0.0f) {
  return dnnl_sgemm('N', 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc) == dnnl_success;
}

// The rows of W_hh [gates*H, H] that hold block [a, a+n)'s units of each gate,
// transposed: [H][gates*n], so a step's GEMM reads its right operand row-major. Block
// row r is W_hh row (r / n) * H + a + r % n; tiles keep both sides in cache.
void pack_block(const float* w, int64_t H, int64_t gates, int64_t a, int64_t n,
                std::vector<float>& dst) {
  const int64_t cols = gates * n;
  dst.resize(H * cols);
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < cols; r0 += kTile)
    for (int64_t k0 = 0; k0 < H; k0 += kTile)
      for (int64_t r = r0; r < std::min(r0 + kTile, cols); ++r) {
        const float* row = w + ((r / n) * H + a + r % n) * H;
        for (int64_t k = k0; k < std::min(k0 + kTile, H); ++k) dst[k * cols + r] = row[k];
      }
}

// An operand's floats, or nullptr for an absent optional one.
const float* in(const TensorArg& t, const onrt_arg* args) {
  return t.present() ? reinterpret_cast<const float*>(t.resolve(args)) : nullptr;
}
float* out(const TensorArg& t, const onrt_arg* args) {
  return t.present() ? reinterpret_cast<float*>(t.resolve(args)) : nullptr;
}

// What the four sequence kernels share: sizes, direction, blocks of hidden units.
struct Sequence {
  const int64_t T, B, H;
  const bool reverse;
  const Split split;

  template <class P>
  explicit Sequence(const P& p)
      : T(p.steps), B(p.batch), H(p.hidden), reverse(p.reverse != 0), split(p.hidden) {}

  // The time position of forward step s, and the forward step backward step u undoes.
  int64_t time(int64_t s) const { return reverse ? T - 1 - s : s; }
  int64_t fstep(int64_t u) const { return T - 1 - u; }

  // Backward through time, steps u = 0 .. T-1 in reverse of the forward's order.
  // Region r runs, per block, bwd.gemm(r-1) (the recurrent gradient over the block's
  // columns, from every column of step r-1's gate gradients, all written in region
  // r-1) and then bwd.pointwise(r) (the block's columns only).
  template <class Bwd>
  bool through_time(Bwd& bwd) const {
    return run_blocks(T + 1, split, [&](int64_t r, int64_t blk) {
      const bool ok = r == 0 || bwd.gemm(r - 1, blk);
      if (r < T) bwd.pointwise(r, blk);
      return ok;
    });
  }
};

class Forward : Sequence {
 public:
  Forward(const LstmSequenceParams& p, const onrt_arg* args)
      : Sequence(p),
        xw(in(p.xw, args)),
        w(in(p.w_hh, args)),
        h0(in(p.h0, args)),
        c0(in(p.c0, args)),
        y(out(p.y, args)),
        h_n(out(p.h_n, args)),
        c_n(out(p.c_n, args)),
        cells(out(p.cells, args)),
        gates(out(p.gates, args)),
        wt(split.count),
        g(split.count) {
    if (!cells) cstate.resize(B * H);
  }

  bool run() {
    const bool ok = run_blocks(T, split, [&](int64_t s, int64_t blk) {
      if (s == 0) pack(blk);
      return step(s, blk);
    });
    if (!ok) return false;
    const float* c_last = T == 0 ? c0 : cell(T - 1);
    std::memcpy(h_n, T == 0 ? h0 : y + time(T - 1) * B * H, sizeof(float) * B * H);
    std::memcpy(c_n, c_last, sizeof(float) * B * H);
    return true;
  }

 private:
  // The cell state after step s: its slot in `cells`, or the running state.
  float* cell(int64_t s) { return cells ? cells + time(s) * B * H : cstate.data(); }

  void pack(int64_t blk) {
    pack_block(w, H, 4, split.begin(blk), split.size(blk), wt[blk]);
    g[blk].resize(B * 4 * split.size(blk) + split.size(blk));
  }

  bool step(int64_t s, int64_t blk) {
    const int64_t t = time(s), a = split.begin(blk), n = split.size(blk), n4 = 4 * n;
    const float* hp = s == 0 ? h0 : y + time(s - 1) * B * H;
    const float* cp = s == 0 ? c0 : cell(s - 1);
    float* cn = cell(s);
    float* gm = g[blk].data();
    float* tmp = gm + B * n4;
    if (!sgemm(B, n4, H, hp, H, wt[blk].data(), n4, gm, n4)) return false;
    for (int64_t b = 0; b < B; ++b) {
      float* gr = gm + b * n4;
      const float* x = xw + (t * B + b) * 4 * H + a;
      for (int64_t q = 0; q < 4; ++q)
        for (int64_t jj = 0; jj < n; ++jj) gr[q * n + jj] += x[q * H + jj];
      for (int64_t jj = 0; jj < 2 * n; ++jj) gr[jj] = sigmoid(gr[jj]);
      for (int64_t jj = 2 * n; jj < 3 * n; ++jj) gr[jj] = vtanh(gr[jj]);
      for (int64_t jj = 3 * n; jj < n4; ++jj) gr[jj] = sigmoid(gr[jj]);
      const float* cpr = cp + b * H + a;
      float* cnr = cn + b * H + a;  // may be cpr itself: each element is read before written
      for (int64_t jj = 0; jj < n; ++jj) {
        cnr[jj] = gr[n + jj] * cpr[jj] + gr[jj] * gr[2 * n + jj];
        tmp[jj] = cnr[jj];
      }
      for (int64_t jj = 0; jj < n; ++jj) tmp[jj] = vtanh(tmp[jj]);
      float* yr = y + (t * B + b) * H + a;
      for (int64_t jj = 0; jj < n; ++jj) yr[jj] = tmp[jj] * gr[3 * n + jj];
      if (gates) {
        float* gs = gates + (t * B + b) * 4 * H + a;
        for (int64_t q = 0; q < 4; ++q) std::memcpy(gs + q * H, gr + q * n, sizeof(float) * n);
      }
    }
    return true;
  }

  const float *xw, *w, *h0, *c0;
  float *y, *h_n, *c_n, *cells, *gates;
  std::vector<std::vector<float>> wt, g;  // per block: W_hh^T slice; gate rows + one tmp row
  std::vector<float> cstate;              // the running cell state when `cells` is absent
};

class Backward : Sequence {
  friend struct Sequence;  // through_time calls gemm and pointwise

 public:
  Backward(const LstmSequenceBackwardParams& p, const onrt_arg* args)
      : Sequence(p),
        gy(in(p.grad_y, args)),
        w(in(p.w_hh, args)),
        c0(in(p.c0, args)),
        cells(in(p.cells, args)),
        gates(in(p.gates, args)),
        gg(out(p.grad_gates, args)),
        dh(B * H, 0.0f),
        dc(B * H, 0.0f),
        tmp(split.count) {
    if (const float* v = in(p.grad_h_n, args)) std::copy(v, v + B * H, dh.begin());
    if (const float* v = in(p.grad_c_n, args)) std::copy(v, v + B * H, dc.begin());
  }

  bool run(float* grad_h0, float* grad_c0) {
    if (!through_time(*this)) return false;
    std::copy(dh.begin(), dh.end(), grad_h0);
    std::copy(dc.begin(), dc.end(), grad_c0);
    return true;
  }

 private:
  // Forward step index s of backward step u, and its time position.

  void pointwise(int64_t u, int64_t blk) {
    const int64_t s = fstep(u), t = time(s), a = split.begin(blk), n = split.size(blk);
    std::vector<float>& tc = tmp[blk];
    tc.resize(n);
    for (int64_t b = 0; b < B; ++b) {
      const float* c = cells + (t * B + b) * H + a;
      const float* cp = (s == 0 ? c0 + b * H : cells + (time(s - 1) * B + b) * H) + a;
      const float* gt = gates + (t * B + b) * 4 * H + a;
      const float* go = gy ? gy + (t * B + b) * H + a : nullptr;
      float* out = gg + (t * B + b) * 4 * H + a;
      float* dhr = dh.data() + b * H + a;
      float* dcr = dc.data() + b * H + a;
      for (int64_t jj = 0; jj < n; ++jj) tc[jj] = vtanh(c[jj]);
      for (int64_t jj = 0; jj < n; ++jj) {
        const float i = gt[jj], f = gt[H + jj], g = gt[2 * H + jj], o = gt[3 * H + jj];
        const float dht = go ? dhr[jj] + go[jj] : dhr[jj];
        const float dct = dht * o * (1 - tc[jj] * tc[jj]) + dcr[jj];
        out[jj] = dct * g * (1 - i) * i;
        out[H + jj] = dct * cp[jj] * (1 - f) * f;
        out[2 * H + jj] = dct * i * (1 - g * g);
        out[3 * H + jj] = dht * tc[jj] * (1 - o) * o;
        dcr[jj] = dct * f;
      }
    }
  }

  // dh[:, block] = grad_gates[t] (B x 4H) @ W_hh[:, block] (4H x n).
  bool gemm(int64_t u, int64_t blk) {
    const int64_t t = time(fstep(u)), a = split.begin(blk), n = split.size(blk);
    return sgemm(B, n, 4 * H, gg + t * B * 4 * H, 4 * H, w + a, H, dh.data() + a, H);
  }

  const float *gy, *w, *c0, *cells, *gates;
  float* gg;
  std::vector<float> dh, dc;  // gradients reaching h_t through the recurrence, and c_t
  std::vector<std::vector<float>> tmp;
};

// GRU (PyTorch's cell: r = sig(i_r + h_r), z = sig(i_z + h_z), n = tanh(i_n + r h_n),
// h' = n + z (h - n), where h_* = h W_h*^T + b_h*).
class GruForward : Sequence {
 public:
  GruForward(const GruSequenceParams& p, const onrt_arg* args)
      : Sequence(p),
        xw(in(p.xw, args)),
        w(in(p.w_hh, args)),
        bias(in(p.b_hh, args)),
        h0(in(p.h0, args)),
        y(out(p.y, args)),
        h_n(out(p.h_n, args)),
        gates(out(p.gates, args)),
        wt(split.count),
        g(split.count) {}

  bool run() {
    const bool ok = run_blocks(T, split, [&](int64_t s, int64_t blk) {
      if (s == 0) {
        pack_block(w, H, 3, split.begin(blk), split.size(blk), wt[blk]);
        g[blk].resize(B * 3 * split.size(blk));
      }
      return step(s, blk);
    });
    if (!ok) return false;
    std::memcpy(h_n, y + time(T - 1) * B * H, sizeof(float) * B * H);
    return true;
  }

 private:

  bool step(int64_t s, int64_t blk) {
    const int64_t t = time(s), a = split.begin(blk), n = split.size(blk), n3 = 3 * n;
    const float* hp = s == 0 ? h0 : y + time(s - 1) * B * H;
    float* gm = g[blk].data();
    if (!sgemm(B, n3, H, hp, H, wt[blk].data(), n3, gm, n3)) return false;
    for (int64_t b = 0; b < B; ++b) {
      float* hg = gm + b * n3;  // h_r, h_z, h_n of the block's units
      const float* x = xw + (t * B + b) * 3 * H + a;
      if (bias)
        for (int64_t q = 0; q < 3; ++q)
          for (int64_t jj = 0; jj < n; ++jj) hg[q * n + jj] += bias[q * H + a + jj];
      // hg becomes r, z (in place) and n (in the h_n slot once h_n is saved).
      for (int64_t q = 0; q < 2; ++q)
        for (int64_t jj = 0; jj < n; ++jj) hg[q * n + jj] = sigmoid(x[q * H + jj] + hg[q * n + jj]);
      float* gs = gates ? gates + (t * B + b) * 4 * H + a : nullptr;
      if (gs) std::memcpy(gs + 3 * H, hg + 2 * n, sizeof(float) * n);  // h_n
      for (int64_t jj = 0; jj < n; ++jj) hg[2 * n + jj] = x[2 * H + jj] + hg[jj] * hg[2 * n + jj];
      for (int64_t jj = 2 * n; jj < n3; ++jj) hg[jj] = vtanh(hg[jj]);
      const float* hpr = hp + b * H + a;
      float* yr = y + (t * B + b) * H + a;
      for (int64_t jj = 0; jj < n; ++jj) {
        const float nn = hg[2 * n + jj];
        yr[jj] = nn + hg[n + jj] * (hpr[jj] - nn);
      }
      if (gs)
        for (int64_t q = 0; q < 3; ++q) std::memcpy(gs + q * H, hg + q * n, sizeof(float) * n);
    }
    return true;
  }

  const float *xw, *w, *bias, *h0;
  float *y, *h_n, *gates;
  std::vector<std::vector<float>> wt, g;  // per block: W_hh^T slice; hidden gate rows
};

class GruBackward : Sequence {
  friend struct Sequence;  // through_time calls gemm and pointwise

 public:
  GruBackward(const GruSequenceBackwardParams& p, const onrt_arg* args)
      : Sequence(p),
        gy(in(p.grad_y, args)),
        w(in(p.w_hh, args)),
        h0(in(p.h0, args)),
        y(in(p.y, args)),
        gates(in(p.gates, args)),
        gi(out(p.grad_input_gates, args)),
        gh(out(p.grad_hidden_gates, args)),
        dh(B * H, 0.0f) {
    if (const float* v = in(p.grad_h_n, args)) std::copy(v, v + B * H, dh.begin());
  }

  bool run(float* grad_h0) {
    if (!through_time(*this)) return false;
    std::copy(dh.begin(), dh.end(), grad_h0);
    return true;
  }

 private:

  void pointwise(int64_t u, int64_t blk) {
    const int64_t s = fstep(u), t = time(s), a = split.begin(blk), n = split.size(blk);
    for (int64_t b = 0; b < B; ++b) {
      const float* hp = (s == 0 ? h0 + b * H : y + (time(s - 1) * B + b) * H) + a;
      const float* gt = gates + (t * B + b) * 4 * H + a;
      const float* go = gy ? gy + (t * B + b) * H + a : nullptr;
      float* gir = gi + (t * B + b) * 3 * H + a;
      float* ghr = gh + (t * B + b) * 3 * H + a;
      float* dhr = dh.data() + b * H + a;
      for (int64_t jj = 0; jj < n; ++jj) {
        const float r = gt[jj], z = gt[H + jj], nn = gt[2 * H + jj], hn = gt[3 * H + jj];
        const float d = go ? dhr[jj] + go[jj] : dhr[jj];
        const float gz = d * (hp[jj] - nn) * (1 - z) * z;
        const float gn = d * (1 - z) * (1 - nn * nn);
        const float gr = gn * hn * (1 - r) * r;
        gir[jj] = ghr[jj] = gr;
        gir[H + jj] = ghr[H + jj] = gz;
        gir[2 * H + jj] = gn;
        ghr[2 * H + jj] = gn * r;
        dhr[jj] = d * z;  // the direct path; the GEMM adds the gates' part
      }
    }
  }

  // dh[:, block] += grad_hidden_gates[t] (B x 3H) @ W_hh[:, block] (3H x n).
  bool gemm(int64_t u, int64_t blk) {
    const int64_t t = time(fstep(u)), a = split.begin(blk), n = split.size(blk);
    return sgemm(B, n, 3 * H, gh + t * B * 3 * H, 3 * H, w + a, H, dh.data() + a, H, 1.0f);
  }

  const float *gy, *w, *h0, *y, *gates;
  float *gi, *gh;
  std::vector<float> dh;  // the gradient reaching h_t
};

}  // namespace
}  // namespace detail

int lstm_sequence(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const LstmSequenceParams*>(params);
  if (p.batch == 0 || p.hidden == 0) return 0;
  if (!detail::Forward(p, args).run())
    return detail::fail(err, errlen, "lstm_sequence: oneDNN sgemm failed");
  return 0;
}

int lstm_sequence_backward(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const LstmSequenceBackwardParams*>(params);
  if (p.batch == 0 || p.hidden == 0) return 0;
  float* gh0 = reinterpret_cast<float*>(p.grad_h0.resolve(args));
  float* gc0 = reinterpret_cast<float*>(p.grad_c0.resolve(args));
  if (!detail::Backward(p, args).run(gh0, gc0))
    return detail::fail(err, errlen, "lstm_sequence_backward: oneDNN sgemm failed");
  return 0;
}

int gru_sequence(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const GruSequenceParams*>(params);
  if (p.steps == 0 || p.batch == 0 || p.hidden == 0) return 0;
  if (!detail::GruForward(p, args).run())
    return detail::fail(err, errlen, "gru_sequence: oneDNN sgemm failed");
  return 0;
}

int gru_sequence_backward(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const GruSequenceBackwardParams*>(params);
  if (p.steps == 0 || p.batch == 0 || p.hidden == 0) return 0;
  float* gh0 = reinterpret_cast<float*>(p.grad_h0.resolve(args));
  if (!detail::GruBackward(p, args).run(gh0))
    return detail::fail(err, errlen, "gru_sequence_backward: oneDNN sgemm failed");
  return 0;
}

}  // namespace openneuron::kernels
