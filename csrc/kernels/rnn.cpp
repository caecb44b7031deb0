// The pointwise part of LSTM and GRU cell steps, forward and backward: one pass
// over batch x hidden units that reads the gate pre-activations (the GEMM
// results) and writes the cell's outputs and what its backward needs. Formulas
// and the workspace layouts follow PyTorch's fused cell kernels
// (_thnn_fused_lstm_cell / _thnn_fused_gru_cell): math in float, one rounding
// per stored value.
#include <cmath>

#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"

namespace openneuron::kernels {
namespace detail {
namespace {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

template <class T>
struct Cell {
  const RnnCellParams& p;
  const onrt_arg* args;

  const T* in(int k) const {
    return p.in[k].present() ? reinterpret_cast<const T*>(p.in[k].resolve(args)) : nullptr;
  }
  T* out(int k) const { return reinterpret_cast<T*>(p.out[k].resolve(args)); }
  static float at(const T* t, int64_t i) { return t ? load(t + i) : 0.0f; }

  // igates, hgates, cx, ib, hb -> hy, cy, workspace [i, f, g, o]
  void lstm(int64_t b, int64_t j) const {
    const int64_t H = p.hidden, g0 = b * 4 * H + j, e = b * H + j;
    const T *ig = in(0), *hg = in(1), *ib = in(3), *hb = in(4);
    float gate[4];
    for (int k = 0; k < 4; ++k)
      gate[k] = at(ig, g0 + k * H) + at(hg, g0 + k * H) + at(ib, j + k * H) + at(hb, j + k * H);
    const float i = sigmoid(gate[0]), f = sigmoid(gate[1]), g = std::tanh(gate[2]),
                o = sigmoid(gate[3]);
    const float cy = f * load(in(2) + e) + i * g;
    store(out(0) + e, o * std::tanh(cy));
    store(out(1) + e, cy);
    T* w = out(2);
    store(w + g0, i);
    store(w + g0 + H, f);
    store(w + g0 + 2 * H, g);
    store(w + g0 + 3 * H, o);
  }

  // grad_hy, grad_cy, cx, cy, workspace -> grad_gates [i, f, g, o], grad_cx
  void lstm_backward(int64_t b, int64_t j) const {
    const int64_t H = p.hidden, g0 = b * 4 * H + j, e = b * H + j;
    const T* w = in(4);
    const float i = load(w + g0), f = load(w + g0 + H), g = load(w + g0 + 2 * H),
                o = load(w + g0 + 3 * H);
    const float go = at(in(0), e), gc = at(in(1), e);
    const float tanh_cy = std::tanh(load(in(3) + e));
    const float gcx = go * o * (1 - tanh_cy * tanh_cy) + gc;
    T* gg = out(0);
    store(gg + g0, gcx * g * (1 - i) * i);
    store(gg + g0 + H, gcx * load(in(2) + e) * (1 - f) * f);
    store(gg + g0 + 2 * H, gcx * i * (1 - g * g));
    store(gg + g0 + 3 * H, go * tanh_cy * (1 - o) * o);
    store(out(1) + e, gcx * f);
  }

  // igates, hgates, hx, ib, hb -> hy, workspace [r, z, n, hx, hn + hb_n]
  void gru(int64_t b, int64_t j) const {
    const int64_t H = p.hidden, g0 = b * 3 * H + j, e = b * H + j, w0 = b * 5 * H + j;
    const T *ig = in(0), *hg = in(1), *ib = in(3), *hb = in(4);
    const float r = sigmoid(at(ig, g0) + at(hg, g0) + at(ib, j) + at(hb, j));
    const float z = sigmoid(at(ig, g0 + H) + at(hg, g0 + H) + at(ib, j + H) + at(hb, j + H));
    const float hn = at(hg, g0 + 2 * H) + at(hb, j + 2 * H);
    const float n = std::tanh(at(ig, g0 + 2 * H) + at(ib, j + 2 * H) + r * hn);
    const float hx = load(in(2) + e);
    store(out(0) + e, n + z * (hx - n));
    T* w = out(1);
    store(w + w0, r);
    store(w + w0 + H, z);
    store(w + w0 + 2 * H, n);
    store(w + w0 + 3 * H, hx);
    store(w + w0 + 4 * H, hn);
  }

  // grad_hy, workspace -> grad_input_gates, grad_hidden_gates [r, z, n], grad_hx
  void gru_backward(int64_t b, int64_t j) const {
    const int64_t H = p.hidden, g0 = b * 3 * H + j, e = b * H + j, w0 = b * 5 * H + j;
    const T* w = in(1);
    const float r = load(w + w0), z = load(w + w0 + H), n = load(w + w0 + 2 * H),
                hx = load(w + w0 + 3 * H), hn = load(w + w0 + 4 * H);
    const float go = load(in(0) + e);
    const float gz = go * (hx - n) * (1 - z) * z;
    const float gn = go * (1 - z) * (1 - n * n);
    const float gr = gn * hn * (1 - r) * r;
    T *gi = out(0), *gh = out(1);
    store(gi + g0, gr);
    store(gi + g0 + H, gz);
    store(gi + g0 + 2 * H, gn);
    store(gh + g0, gr);
    store(gh + g0 + H, gz);
    store(gh + g0 + 2 * H, gn * r);
    store(out(2) + e, go * z);
  }
};

template <class T>
int cell_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const RnnCellParams*>(params);
  const Cell<T> cell{p, args};
  const int64_t H = p.hidden;
  if (p.batch <= 0 || H <= 0) return 0;
  parallel_for(p.batch * H, kGrain / 8, [&](int64_t begin, int64_t end) {
    for (int64_t x = begin; x < end; ++x) {
      const int64_t b = x / H, j = x % H;
      switch (p.op) {
        case RnnCellOp::LstmCell:
          cell.lstm(b, j);
          break;
        case RnnCellOp::LstmCellBackward:
          cell.lstm_backward(b, j);
          break;
        case RnnCellOp::GruCell:
          cell.gru(b, j);
          break;
        case RnnCellOp::GruCellBackward:
          cell.gru_backward(b, j);
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
