// The pointwise part of LSTM and GRU cell steps, forward and backward: one pass
// over batch x hidden units that reads the gate pre-activations (the GEMM
// results) and writes the cell's outputs and what its backward needs. Formulas
// and the workspace layouts follow PyTorch's fused cell kernels
// (_thnn_fused_lstm_cell / _thnn_fused_gru_cell): math in float, one rounding
// per stored value (exp and tanh: vmath.h's, within PyTorch's own SLEEF error).
#include <algorithm>
#include <cmath>
#include <vector>

#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"
#include "vmath.h"

namespace openneuron::kernels {
namespace detail {
namespace {

// vexp (vmath.h) rather than elementwise_functors.h's SigmoidF, whose fexp is libm's for
// the half types: branch-free, so a row's loop vectorises (the cells run once per time
// step on small rows, where scalar libm calls were most of a step's time).
ON_INLINE float sigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }

// Row buffers in float: each pass is a plain loop over one or two arrays, which the
// compiler vectorises (a per-element mix of optional inputs and several outputs it does
// not).
void add_row(float* acc, const float* in, int64_t n) {
  for (int64_t x = 0; x < n; ++x) acc[x] += in[x];
}
void sigmoid_row(float* v, int64_t n) {
  for (int64_t x = 0; x < n; ++x) v[x] = sigmoid(v[x]);
}
void tanh_row(float* v, int64_t n) {
  for (int64_t x = 0; x < n; ++x) v[x] = vtanh(v[x]);
}

template <class T>
struct Cell {
  const RnnCellParams& p;
  const onrt_arg* args;

  // Row `row` of `width` elements of input k, or nullptr for an absent optional input.
  const T* in(int k, int64_t row = 0, int64_t width = 0) const {
    return p.in[k].present() ? reinterpret_cast<const T*>(p.in[k].resolve(args)) + row * width
                             : nullptr;
  }
  T* out(int k, int64_t row = 0, int64_t width = 0) const {
    return reinterpret_cast<T*>(p.out[k].resolve(args)) + row * width;
  }
  // n values of `t` into `dst` as float, zeros for an absent input.
  static void load_row_or_zero(float* dst, const T* t, int64_t n) {
    if (t)
      load_row(dst, t, n);
    else
      std::fill(dst, dst + n, 0.0f);
  }
  // gates = igates + hgates + ib + hb over `n` columns; `tmp` holds n floats.
  void gate_sums(float* gates, float* tmp, int64_t b, int64_t n) const {
    load_row_or_zero(gates, in(0, b, n), n);
    for (int k = 1; k < 5; ++k) {
      if (k == 2) continue;  // the state
      const T* t = k < 3 ? in(k, b, n) : in(k);
      if (!t) continue;
      load_row(tmp, t, n);
      add_row(gates, tmp, n);
    }
  }

  // igates, hgates, cx, ib, hb -> hy, cy, workspace [i, f, g, o]
  void lstm(int64_t b, float* buf) const {
    const int64_t H = p.hidden;
    float *g = buf, *tmp = buf + 4 * H, *c = buf + 8 * H, *t = buf + 9 * H;
    gate_sums(g, tmp, b, 4 * H);
    sigmoid_row(g, 2 * H);
    tanh_row(g + 2 * H, H);
    sigmoid_row(g + 3 * H, H);
    load_row(c, in(2, b, H), H);
    for (int64_t j = 0; j < H; ++j) c[j] = g[H + j] * c[j] + g[j] * g[2 * H + j];
    std::copy(c, c + H, t);
    tanh_row(t, H);
    for (int64_t j = 0; j < H; ++j) t[j] *= g[3 * H + j];
    store_row(out(0, b, H), t, H);
    store_row(out(1, b, H), c, H);
    store_row(out(2, b, 4 * H), g, 4 * H);
  }

  // grad_hy, grad_cy, cx, cy, workspace -> grad_gates [i, f, g, o], grad_cx
  void lstm_backward(int64_t b, float* buf) const {
    const int64_t H = p.hidden;
    float *w = buf, *gg = buf + 4 * H, *go = buf + 8 * H, *gc = buf + 9 * H, *cx = buf + 10 * H,
          *tc = buf + 11 * H;
    load_row(w, in(4, b, 4 * H), 4 * H);
    load_row_or_zero(go, in(0, b, H), H);
    load_row_or_zero(gc, in(1, b, H), H);
    load_row(cx, in(2, b, H), H);
    load_row(tc, in(3, b, H), H);
    tanh_row(tc, H);
    for (int64_t j = 0; j < H; ++j) {
      const float i = w[j], f = w[H + j], g = w[2 * H + j], o = w[3 * H + j];
      const float gsum = go[j] * o * (1 - tc[j] * tc[j]) + gc[j];
      gg[j] = gsum * g * (1 - i) * i;
      gg[H + j] = gsum * cx[j] * (1 - f) * f;
      gg[2 * H + j] = gsum * i * (1 - g * g);
      gg[3 * H + j] = go[j] * tc[j] * (1 - o) * o;
      cx[j] = gsum * f;  // grad_cx, in place of cx
    }
    store_row(out(0, b, 4 * H), gg, 4 * H);
    store_row(out(1, b, H), cx, H);
  }

  // igates, hgates, hx, ib, hb -> hy, workspace [r, z, n, hx, hn + hb_n]
  void gru(int64_t b, float* buf) const {
    const int64_t H = p.hidden;
    float *w = buf, *ig = buf + 5 * H, *tmp = buf + 8 * H;
    // r and z from all four sums; n's input and hidden parts apart.
    load_row(ig, in(0, b, 3 * H), 3 * H);
    if (const T* ib = in(3)) {
      load_row(tmp, ib, 3 * H);
      add_row(ig, tmp, 3 * H);
    }
    load_row(w, in(1, b, 3 * H), 3 * H);  // hidden gates: r, z, then hn
    if (const T* hb = in(4)) {
      load_row(tmp, hb, 3 * H);
      add_row(w, tmp, 3 * H);
    }
    add_row(w, ig, 2 * H);
    sigmoid_row(w, 2 * H);
    float *hn = tmp, *n = w + 2 * H;
    std::copy(w + 2 * H, w + 3 * H, hn);
    for (int64_t j = 0; j < H; ++j) n[j] = ig[2 * H + j] + w[j] * hn[j];
    tanh_row(n, H);
    load_row(w + 3 * H, in(2, b, H), H);
    std::copy(hn, hn + H, w + 4 * H);
    float* hy = ig;
    for (int64_t j = 0; j < H; ++j) hy[j] = n[j] + w[H + j] * (w[3 * H + j] - n[j]);
    store_row(out(0, b, H), hy, H);
    store_row(out(1, b, 5 * H), w, 5 * H);
  }

  // grad_hy, workspace -> grad_input_gates, grad_hidden_gates [r, z, n], grad_hx
  void gru_backward(int64_t b, float* buf) const {
    const int64_t H = p.hidden;
    float *w = buf, *go = buf + 5 * H, *gi = buf + 6 * H, *gh = buf + 9 * H;
    load_row(w, in(1, b, 5 * H), 5 * H);
    load_row(go, in(0, b, H), H);
    for (int64_t j = 0; j < H; ++j) {
      const float r = w[j], z = w[H + j], n = w[2 * H + j], hx = w[3 * H + j], hn = w[4 * H + j];
      const float gz = go[j] * (hx - n) * (1 - z) * z;
      const float gn = go[j] * (1 - z) * (1 - n * n);
      const float gr = gn * hn * (1 - r) * r;
      gi[j] = gh[j] = gr;
      gi[H + j] = gh[H + j] = gz;
      gi[2 * H + j] = gn;
      gh[2 * H + j] = gn * r;
      go[j] *= z;  // grad_hx
    }
    store_row(out(0, b, 3 * H), gi, 3 * H);
    store_row(out(1, b, 3 * H), gh, 3 * H);
    store_row(out(2, b, H), go, H);
  }
};

template <class T>
int cell_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const RnnCellParams*>(params);
  const Cell<T> cell{p, args};
  const int64_t H = p.hidden;
  if (p.batch <= 0 || H <= 0) return 0;
  // Rows of the batch; a step below the grain (e.g. 16 x 256) runs on one thread.
  parallel_for(p.batch, std::max<int64_t>(1, kGrain / H), [&](int64_t begin, int64_t end) {
    std::vector<float> buf(static_cast<size_t>(12 * H));  // the largest row set: lstm_backward
    for (int64_t b = begin; b < end; ++b) {
      switch (p.op) {
        case RnnCellOp::LstmCell:
          cell.lstm(b, buf.data());
          break;
        case RnnCellOp::LstmCellBackward:
          cell.lstm_backward(b, buf.data());
          break;
        case RnnCellOp::GruCell:
          cell.gru(b, buf.data());
          break;
        case RnnCellOp::GruCellBackward:
          cell.gru_backward(b, buf.data());
          break;
      }
    }
  });
  return 0;
}

}  // namespace
}  // namespace detail

onrt_kernel_fn rnn_cell_kernel(RnnCellOp, DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return &detail::cell_entry<float>;
    case DType::BFloat16:
      return &detail::cell_entry<detail::bf16>;
    case DType::Float16:
      return &detail::cell_entry<detail::f16>;
    default:
      return nullptr;
  }
}

}  // namespace openneuron::kernels
