// Pooling and upsampling over the last two dims of contiguous [planes, H, W]
// operands (max pooling also over channels-last [N, H, W, C] ones), with PyTorch's CPU index
// arithmetic (MaxPoolKernel, AvgPoolKernel, AdaptiveAvgPoolKernel, UpSampleKernel): NaN-propagating
// max with flat h*W+w indices, avg divisors (count_include_pad, divisor_override), adaptive windows
// [floor(o*I/O), ceil((o+1)*I/O)), nearest and bilinear source indices in float. Backward ops
// scatter into a float plane buffer (planes run in parallel, so there are no races) and round once.
#include <cmath>
#include <limits>
#include <vector>

#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"

namespace openneuron::kernels {
namespace detail {
namespace {

inline int64_t start_index(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
inline int64_t end_index(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

inline float scales_value(double scale, int64_t in, int64_t out) {
  return scale > 0 ? static_cast<float>(1.0 / scale) : static_cast<float>(in) / static_cast<float>(out);
}
inline float area_scale(int64_t in, int64_t out, bool align, double scale) {
  if (align) return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  return scales_value(scale, in, out);
}
inline float source_index(float scale, int64_t dst, bool align) {
  if (align) return scale * static_cast<float>(dst);
  const float s = scale * (static_cast<float>(dst) + 0.5f) - 0.5f;
  return s < 0 ? 0.0f : s;
}
inline int64_t nearest_index(float scale, int64_t dst, int64_t in, int64_t out) {
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  return std::min(static_cast<int64_t>(std::floor(static_cast<float>(dst) * scale)), in - 1);
}

struct Linear {
  int64_t i0, i1;
  float l0, l1;
};
inline Linear linear_at(float scale, int64_t dst, int64_t in, bool align) {
  const float real = source_index(scale, dst, align);
  Linear r;
  r.i0 = std::min(static_cast<int64_t>(real), in - 1);
  r.i1 = r.i0 + (r.i0 < in - 1 ? 1 : 0);
  r.l1 = std::min(std::max(real - static_cast<float>(r.i0), 0.0f), 1.0f);
  r.l0 = 1.0f - r.l1;
  return r;
}

template <class T>
int pool_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const Pool2dParams*>(params);
  const int64_t IH = p.ih, IW = p.iw, OH = p.oh, OW = p.ow;
  T* in = reinterpret_cast<T*>(p.in.resolve(args));
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  int64_t* idx = p.indices.present() ? reinterpret_cast<int64_t*>(p.indices.resolve(args)) : nullptr;
  const double sc_h = p.scale_h.as_double(args), sc_w = p.scale_w.as_double(args);
  const Pool2dKind kind = p.kind;
  const bool backward = kind == Pool2dKind::AvgPoolBackward || kind == Pool2dKind::AdaptiveAvgBackward ||
                        kind == Pool2dKind::MaxPoolBackward ||
                        kind == Pool2dKind::UpsampleNearestBackward ||
                        kind == Pool2dKind::UpsampleBilinearBackward;
  const float nh = scales_value(sc_h, IH, OH), nw = scales_value(sc_w, IW, OW);
  const bool align = p.align_corners != 0;
  const float bh = area_scale(IH, OH, align, sc_h), bw = area_scale(IW, OW, align, sc_w);
  // Average window [h0, h1) x [w0, w1) and its divisor.
  auto avg_window = [&](int64_t oh, int64_t ow, int64_t& h0, int64_t& h1, int64_t& w0, int64_t& w1) {
    h0 = oh * p.sh - p.ph;
    w0 = ow * p.sw - p.pw;
    h1 = std::min(h0 + p.kh, IH + p.ph);
    w1 = std::min(w0 + p.kw, IW + p.pw);
    const int64_t pool_size = (h1 - h0) * (w1 - w0);
    h0 = std::max<int64_t>(h0, 0);
    w0 = std::max<int64_t>(w0, 0);
    h1 = std::min(h1, IH);
    w1 = std::min(w1, IW);
    if (p.divisor_override) return static_cast<float>(p.divisor_override);
    return static_cast<float>(p.count_include_pad ? pool_size : (h1 - h0) * (w1 - w0));
  };
  if (kind == Pool2dKind::MaxPool && p.channels_last > 0) {
    // Channels last ([N, H, W, C]): each window element is a row of C values, so the
    // compare runs over the channels, vectorised, visiting the window in PyTorch's order
    // (rows, then columns): ties and NaNs pick the CPU's element.
    const int64_t C = p.channels_last;
    const int64_t KH = p.kh, KW = p.kw, SH = p.sh, SW = p.sw, DH = p.dh, DW = p.dw;
    const int64_t PH = p.ph, PW = p.pw;
    auto maxpool = [=](int64_t qb, int64_t qe) {  // q = n * OH * OW + oh * OW + ow
      // Locals only (no captured references) so the channel loops vectorise.
      std::vector<float> mv_buf(C), x_buf(C);
      std::vector<int64_t> best_buf(C);
      float* __restrict mv = mv_buf.data();
      float* __restrict xv = x_buf.data();
      int64_t* __restrict best = best_buf.data();
      for (int64_t q = qb; q < qe; ++q) {
        const int64_t n = q / (OH * OW), oh = q / OW % OH, ow = q % OW;
        const T* ip = in + n * IH * IW * C;
        int64_t h0 = oh * SH - PH, w0 = ow * SW - PW;
        const int64_t h1 = std::min(h0 + (KH - 1) * DH + 1, IH);
        const int64_t w1 = std::min(w0 + (KW - 1) * DW + 1, IW);
        while (h0 < 0) h0 += DH;
        while (w0 < 0) w0 += DW;
        const int64_t first = h0 * IW + w0;
        for (int64_t c = 0; c < C; ++c) {
          mv[c] = -std::numeric_limits<float>::infinity();
          best[c] = first;
        }
        for (int64_t h = h0; h < h1; h += DH) {
          for (int64_t w = w0; w < w1; w += DW) {
            const int64_t at = h * IW + w;
            const T* __restrict v = ip + at * C;
            for (int64_t c = 0; c < C; ++c) xv[c] = load(v + c);
            for (int64_t c = 0; c < C; ++c) {
              const bool t = (xv[c] > mv[c]) | (xv[c] != xv[c]);
              mv[c] = t ? xv[c] : mv[c];
              best[c] = t ? at : best[c];
            }
          }
        }
        T* __restrict op = out + q * C;
        int64_t* __restrict xp = idx + q * C;
        for (int64_t c = 0; c < C; ++c) {
          store_cvt(op + c, mv[c]);
          xp[c] = best[c];
        }
      }
    };
    parallel_for(p.planes * OH * OW,
                 std::max<int64_t>(1, kGrain / std::max<int64_t>(1, C * KH * KW)), maxpool);
    return 0;
  }
  if (kind == Pool2dKind::MaxPool && IH * IW <= std::numeric_limits<int32_t>::max()) {
    // Row by row: for each window row and column offset, one pass over the output
    // row's columns, each keeping its running max and index in row buffers. A column
    // sees its window's elements in PyTorch's order (rows, then columns), so ties
    // and NaNs pick the same element; the columns whose windows lie inside the input
    // run without bounds checks, which lets the pass vectorise.
    const int64_t KH = p.kh, KW = p.kw, SH = p.sh, SW = p.sw, DH = p.dh, DW = p.dw;
    // Output columns [ow_lo, ow_hi) have every window column inside [0, IW). Indices
    // within a plane fit int32 (checked below; larger planes take the general loop).
    int64_t ow_lo = 0, ow_hi = OW;
    while (ow_lo < OW && ow_lo * SW - p.pw < 0) ++ow_lo;
    while (ow_hi > ow_lo && (ow_hi - 1) * SW - p.pw + (KW - 1) * DW >= IW) --ow_hi;
    auto maxpool = [&](int64_t pb, int64_t pe) {
      // Row buffers: running max and (int32: a plane's index) argmax per output
      // column, and the window column being compared, gathered contiguous.
      std::vector<float> mv_buf(OW), col_buf(OW);
      std::vector<int32_t> best_buf(OW);
      float* __restrict mv = mv_buf.data();
      float* __restrict col = col_buf.data();
      int32_t* __restrict best = best_buf.data();
      for (int64_t c = pb; c < pe; ++c) {
        const T* ip = in + c * IH * IW;
        T* op = out + c * OH * OW;
        int64_t* xp = idx + c * OH * OW;
        for (int64_t oh = 0; oh < OH; ++oh) {
          int64_t h0 = oh * SH - p.ph;
          const int64_t h1 = std::min(h0 + (KH - 1) * DH + 1, IH);
          while (h0 < 0) h0 += DH;
          for (int64_t ow = 0; ow < OW; ++ow) {
            int64_t w0 = ow * SW - p.pw;
            while (w0 < 0) w0 += DW;
            mv[ow] = -std::numeric_limits<float>::infinity();
            best[ow] = static_cast<int32_t>(h0 * IW + w0);
          }
          for (int64_t h = h0; h < h1; h += DH) {
            const T* row = ip + h * IW;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t off = kw * DW - p.pw;
              const int32_t base = static_cast<int32_t>(h * IW + off);
              auto take = [&](int64_t ow, float v) {
                const float m = mv[ow];
                const bool t = (v > m) | (v != v);  // branch-free: no mispredicts
                mv[ow] = t ? v : m;
                best[ow] = t ? base + static_cast<int32_t>(ow * SW) : best[ow];
              };
              for (int64_t ow = 0; ow < ow_lo; ++ow)
                if (const int64_t w = ow * SW + off; w >= 0 && w < IW) take(ow, load(row + w));
              // Interior: gather the strided column, then one vectorised pass.
              for (int64_t ow = ow_lo; ow < ow_hi; ++ow) col[ow] = load(row + off + ow * SW);
              for (int64_t ow = ow_lo; ow < ow_hi; ++ow) take(ow, col[ow]);
              for (int64_t ow = ow_hi; ow < OW; ++ow)
                if (const int64_t w = ow * SW + off; w >= 0 && w < IW) take(ow, load(row + w));
            }
          }
          for (int64_t ow = 0; ow < OW; ++ow) {
            store_cvt(op + oh * OW + ow, mv[ow]);
            xp[oh * OW + ow] = best[ow];
          }
        }
      }
    };
    parallel_for(p.planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, OH * OW * KH * KW)),
                 maxpool);
    return 0;
  }
  if (kind == Pool2dKind::UpsampleBilinear) {
    // Source rows/columns and weights depend on the output coordinate only:
    // computed once. Each source row is interpolated along W once (into a
    // float row, kept while consecutive output rows reuse it), then output
    // rows blend two such rows: the products and sums are PyTorch's, in its
    // order, but both loops vectorise (the W pass with gathers).
    std::vector<Linear> lhs(OH);
    for (int64_t oh = 0; oh < OH; ++oh) lhs[oh] = linear_at(bh, oh, IH, align);
    std::vector<int32_t> w_i0(OW), w_i1(OW);
    std::vector<float> w_l0(OW), w_l1(OW);
    for (int64_t ow = 0; ow < OW; ++ow) {
      const Linear lw = linear_at(bw, ow, IW, align);
      w_i0[ow] = static_cast<int32_t>(lw.i0);
      w_i1[ow] = static_cast<int32_t>(lw.i1);
      w_l0[ow] = lw.l0;
      w_l1[ow] = lw.l1;
    }
    auto bilinear = [&](int64_t pb, int64_t pe) {
      std::vector<float> hbuf(2 * OW);
      for (int64_t c = pb; c < pe; ++c) {
        const T* ip = in + c * IH * IW;
        T* op = out + c * OH * OW;
        int64_t held[2] = {-1, -1};  // source row in each half of hbuf
        // Row h along W; the row `pin` (the other source row of this output row) stays.
        auto wpass = [&](int64_t h, int64_t pin) -> const float* {
          for (int k = 0; k < 2; ++k)
            if (held[k] == h) return hbuf.data() + k * OW;
          const int k = held[0] == pin ? 1 : held[1] == pin ? 0 : held[0] < held[1] ? 0 : 1;
          held[k] = h;
          float* dst = hbuf.data() + k * OW;
          const T* r = ip + h * IW;
          const int32_t* i0 = w_i0.data();
          const int32_t* i1 = w_i1.data();
          const float* l0 = w_l0.data();
          const float* l1 = w_l1.data();
          for (int64_t ow = 0; ow < OW; ++ow)
            dst[ow] = l0[ow] * static_cast<float>(load(r + i0[ow])) + l1[ow] * static_cast<float>(load(r + i1[ow]));
          return dst;
        };
        for (int64_t oh = 0; oh < OH; ++oh) {
          const Linear lh = lhs[oh];
          const float* t0 = wpass(lh.i0, -1);
          const float* t1 = wpass(lh.i1, lh.i0);
          T* orow = op + oh * OW;
          for (int64_t ow = 0; ow < OW; ++ow) store_cvt(orow + ow, lh.l0 * t0[ow] + lh.l1 * t1[ow]);
        }
      }
    };
    parallel_for(p.planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, OH * OW)), bilinear);
    return 0;
  }
  auto planes = [&](int64_t pb, int64_t pe) {
    std::vector<float> acc(backward ? IH * IW : 0);
    for (int64_t c = pb; c < pe; ++c) {
      T* ip = in + c * IH * IW;
      T* op = out + c * OH * OW;
      int64_t* xp = idx ? idx + c * OH * OW : nullptr;
      if (backward) std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t o = oh * OW + ow;
          switch (kind) {
            case Pool2dKind::MaxPool: case Pool2dKind::AdaptiveMax: {
              int64_t h0, h1, w0, w1, dh = 1, dw = 1;
              if (kind == Pool2dKind::MaxPool) {
                h0 = oh * p.sh - p.ph;
                w0 = ow * p.sw - p.pw;
                h1 = std::min(h0 + (p.kh - 1) * p.dh + 1, IH);
                w1 = std::min(w0 + (p.kw - 1) * p.dw + 1, IW);
                dh = p.dh;
                dw = p.dw;
                while (h0 < 0) h0 += dh;
                while (w0 < 0) w0 += dw;
              } else {
                h0 = start_index(oh, OH, IH);
                h1 = end_index(oh, OH, IH);
                w0 = start_index(ow, OW, IW);
                w1 = end_index(ow, OW, IW);
              }
              int64_t best = h0 * IW + w0;
              float mv = -std::numeric_limits<float>::infinity();
              for (int64_t h = h0; h < h1; h += dh)
                for (int64_t w = w0; w < w1; w += dw) {
                  const float v = load(ip + h * IW + w);
                  if (v > mv || std::isnan(v)) {
                    mv = v;
                    best = h * IW + w;
                  }
                }
              store_cvt(op + o, mv);
              xp[o] = best;
              break;
            }
            case Pool2dKind::AvgPool: {
              int64_t h0, h1, w0, w1;
              const float div = avg_window(oh, ow, h0, h1, w0, w1);
              float s = 0;
              if (h0 < h1 && w0 < w1)
                for (int64_t h = h0; h < h1; ++h)
                  for (int64_t w = w0; w < w1; ++w) s += load(ip + h * IW + w);
              store_cvt(op + o, h0 < h1 && w0 < w1 ? s / div : 0.0f);
              break;
            }
            case Pool2dKind::AvgPoolBackward: {
              int64_t h0, h1, w0, w1;
              const float div = avg_window(oh, ow, h0, h1, w0, w1);
              const float g = static_cast<float>(load(op + o)) / div;
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) acc[h * IW + w] += g;
              break;
            }
            case Pool2dKind::AdaptiveAvg: case Pool2dKind::AdaptiveAvgBackward: {
              const int64_t h0 = start_index(oh, OH, IH), h1 = end_index(oh, OH, IH);
              const int64_t w0 = start_index(ow, OW, IW), w1 = end_index(ow, OW, IW);
              const float n = static_cast<float>((h1 - h0) * (w1 - w0));
              if (kind == Pool2dKind::AdaptiveAvg) {
                float s = 0;
                for (int64_t h = h0; h < h1; ++h)
                  for (int64_t w = w0; w < w1; ++w) s += load(ip + h * IW + w);
                store_cvt(op + o, s / n);
              } else {
                const float g = static_cast<float>(load(op + o)) / n;
                for (int64_t h = h0; h < h1; ++h)
                  for (int64_t w = w0; w < w1; ++w) acc[h * IW + w] += g;
              }
              break;
            }
            case Pool2dKind::MaxPoolBackward: {
              const int64_t k = xp[o];
              if (k >= 0 && k < IH * IW) acc[k] += static_cast<float>(load(op + o));
              break;
            }
            case Pool2dKind::UpsampleNearest: case Pool2dKind::UpsampleNearestBackward: {
              const int64_t h = nearest_index(nh, oh, IH, OH), w = nearest_index(nw, ow, IW, OW);
              if (kind == Pool2dKind::UpsampleNearest) store(op + o, load(ip + h * IW + w));
              else acc[h * IW + w] += static_cast<float>(load(op + o));
              break;
            }
            case Pool2dKind::UpsampleBilinear: case Pool2dKind::UpsampleBilinearBackward: {
              const Linear lh = linear_at(bh, oh, IH, align), lw = linear_at(bw, ow, IW, align);
              if (kind == Pool2dKind::UpsampleBilinear) {
                const float v = lh.l0 * (lw.l0 * static_cast<float>(load(ip + lh.i0 * IW + lw.i0)) +
                                         lw.l1 * static_cast<float>(load(ip + lh.i0 * IW + lw.i1))) +
                                lh.l1 * (lw.l0 * static_cast<float>(load(ip + lh.i1 * IW + lw.i0)) +
                                         lw.l1 * static_cast<float>(load(ip + lh.i1 * IW + lw.i1)));
                store_cvt(op + o, v);
              } else {
                const float g = load(op + o);
                acc[lh.i0 * IW + lw.i0] += lh.l0 * lw.l0 * g;
                acc[lh.i0 * IW + lw.i1] += lh.l0 * lw.l1 * g;
                acc[lh.i1 * IW + lw.i0] += lh.l1 * lw.l0 * g;
                acc[lh.i1 * IW + lw.i1] += lh.l1 * lw.l1 * g;
              }
              break;
            }
          }
        }
      if (backward)
        for (int64_t i = 0; i < IH * IW; ++i) store_cvt(ip + i, acc[i]);
    }
  };
  const int64_t work = std::max<int64_t>(1, std::max(IH * IW, OH * OW));
  parallel_for(p.planes, std::max<int64_t>(1, kGrain / work), planes);
  return 0;
}

}  // namespace
}  // namespace detail

onrt_kernel_fn pool2d_kernel(Pool2dKind kind, DType dtype) {
  using namespace detail;
  return visit(dtype, [](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_float3_v<T>) return &pool_entry<T>;
    else return nullptr;
  });
}

}  // namespace openneuron::kernels
