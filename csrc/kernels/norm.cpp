// Normalisation engines: layer norm (and RMS norm), group norm, batch norm,
// forward and backward. Statistics accumulate in double over float values;
// x/y/grad are Float32, BFloat16 or Float16 (computed in float), weights and
// statistics Float32. Work splits over rows (layer/group norm) or channels
// (batch norm); channels-last batch norm over fixed blocks of rows and
// channels-last group norm over images. Weight gradients and block sums reduce
// over fixed blocks, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "error.h"
#include "float_sum.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"

namespace openneuron::kernels {
namespace detail {
namespace {

// Sum of (x - m)^2 and of a*b in 8 fixed lanes, with lane_sum8's float blocks.
inline double dsumsq(const float* x, int64_t n, float m) {
  double l[8] = {};
  auto sq = [x, m](int64_t i) {
    const f32x8 d = load_f32x8(x + i) - m;
    return d * d;
  };
  int64_t j = add_float_blocks_of(n, sq, l);
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) {
      const float d = x[j + k] - m;
      l[k] += static_cast<double>(d * d);
    }
  for (; j < n; ++j) {
    const float d = x[j] - m;
    l[0] += static_cast<double>(d * d);
  }
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}
inline double ddot(const float* a, const float* b, int64_t n) {
  double l[8] = {};
  auto prod = [a, b](int64_t i) { return load_f32x8(a + i) * load_f32x8(b + i); };
  int64_t j = add_float_blocks_of(n, prod, l);
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) l[k] += static_cast<double>(a[j + k] * b[j + k]);
  for (; j < n; ++j) l[0] += static_cast<double>(a[j] * b[j]);
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

// A row of T as floats: the row itself for float, else converted into buf.
template <class T>
inline const float* as_float(const T* p, int64_t n, float* buf) {
  if constexpr (std::is_same_v<T, float>) {
    return p;
  } else {
    load_row(buf, p, n);
    return buf;
  }
}

template <class T>
T* tptr(const TensorArg& a, const onrt_arg* args) {
  return a.present() ? reinterpret_cast<T*>(a.resolve(args)) : nullptr;
}

// ------------------------------------------------------------ layer norm

template <class T>
int layer_norm_fwd(const NormParams& p, const onrt_arg* args) {
  const int64_t M = p.rows, N = p.cols;
  const T* x = tptr<const T>(p.x, args);
  T* y = tptr<T>(p.y, args);
  const float* w = tptr<const float>(p.weight, args);
  const float* b = tptr<const float>(p.bias, args);
  float* mean_o = tptr<float>(p.out_mean, args);
  float* rstd_o = tptr<float>(p.out_rstd, args);
  const float eps = static_cast<float>(p.eps.as_double(args));
  const bool rms = p.rms;
  auto body = [&](int64_t rb, int64_t re) {
    std::vector<float> buf(std::is_same_v<T, float> ? 0 : N);
    for (int64_t r = rb; r < re; ++r) {
      const float* xf = as_float(x + r * N, N, buf.data());
      float mean = 0.f;
      double var;
      if (rms) {
        var = dsumsq(xf, N, 0.f) / static_cast<double>(N);
      } else {
        mean = static_cast<float>(lane_sum8(xf, N) / static_cast<double>(N));
        var = dsumsq(xf, N, mean) / static_cast<double>(N);
      }
      const float rstd = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
      if (mean_o) mean_o[r] = mean;
      if (rstd_o) rstd_o[r] = rstd;
      T* o = y + r * N;
      if (w && b) {
        for (int64_t j = 0; j < N; ++j) store(o + j, (xf[j] - mean) * rstd * w[j] + b[j]);
      } else if (w) {
        for (int64_t j = 0; j < N; ++j) store(o + j, (xf[j] - mean) * rstd * w[j]);
      } else if (b) {
        for (int64_t j = 0; j < N; ++j) store(o + j, (xf[j] - mean) * rstd + b[j]);
      } else {
        for (int64_t j = 0; j < N; ++j) store(o + j, (xf[j] - mean) * rstd);
      }
    }
  };
  parallel_for(M, std::max<int64_t>(1, kGrain / std::max<int64_t>(N, 1)), body);
  return 0;
}

template <class T>
int layer_norm_bwd(const NormParams& p, const onrt_arg* args) {
  const int64_t M = p.rows, N = p.cols;
  const T* dy = tptr<const T>(p.grad, args);
  const T* x = tptr<const T>(p.x, args);
  const float* mean = tptr<const float>(p.mean, args);
  const float* rstd = tptr<const float>(p.rstd, args);
  const float* w = tptr<const float>(p.weight, args);
  const bool rms = p.rms;
  if ((p.mask & 1) && p.dx.present()) {
    T* dx = tptr<T>(p.dx, args);
    auto body = [&](int64_t rb, int64_t re) {
      std::vector<float> xb(N), gb(N), g(N), xh(N);
      for (int64_t r = rb; r < re; ++r) {
        const float* xf = as_float(x + r * N, N, xb.data());
        const float* df = as_float(dy + r * N, N, gb.data());
        const float m = rms ? 0.f : mean[r], rs = rstd[r];
        for (int64_t j = 0; j < N; ++j) {
          g[j] = w ? df[j] * w[j] : df[j];
          xh[j] = (xf[j] - m) * rs;
        }
        const float a = rms ? 0.f : static_cast<float>(lane_sum8(g.data(), N) / static_cast<double>(N));
        const float c = static_cast<float>(ddot(g.data(), xh.data(), N) / static_cast<double>(N));
        for (int64_t j = 0; j < N; ++j) g[j] = rs * (g[j] - a - xh[j] * c);
        store_row(dx + r * N, g.data(), N);
      }
    };
    parallel_for(M, std::max<int64_t>(1, kGrain / std::max<int64_t>(N, 1)), body);
  }
  float* dw = (p.mask & 2) ? tptr<float>(p.dweight, args) : nullptr;
  float* db = (p.mask & 4) ? tptr<float>(p.dbias, args) : nullptr;
  if (!dw && !db) return 0;
  // Column blocks: each task sums every row of its columns in row order.
  constexpr int64_t kCols = 64;
  const int64_t blocks = (N + kCols - 1) / kCols;
  auto body = [&](int64_t bb, int64_t be) {
    double aw[kCols], ab[kCols];
    for (int64_t blk = bb; blk < be; ++blk) {
      const int64_t j0 = blk * kCols, nj = std::min(kCols, N - j0);
      for (int64_t j = 0; j < nj; ++j) aw[j] = ab[j] = 0;
      for (int64_t r = 0; r < M; ++r) {
        const T* xr = x + r * N + j0;
        const T* gr = dy + r * N + j0;
        const float m = rms ? 0.f : mean[r], rs = rstd[r];
        for (int64_t j = 0; j < nj; ++j) {
          const float gv = load(gr + j);
          aw[j] += static_cast<double>(gv * ((load(xr + j) - m) * rs));
          ab[j] += gv;
        }
      }
      for (int64_t j = 0; j < nj; ++j) {
        if (dw) dw[j0 + j] = static_cast<float>(aw[j]);
        if (db) db[j0 + j] = static_cast<float>(ab[j]);
      }
    }
  };
  parallel_for(blocks, std::max<int64_t>(1, kGrain / std::max<int64_t>(M * kCols, 1)), body);
  return 0;
}

// ------------------------------------------------------------ group norm

template <class T>
int group_norm_fwd(const NormParams& p, const onrt_arg* args) {
  const int64_t N = p.n, C = p.c, HW = p.hw, G = p.groups;
  const int64_t Cg = C / G, D = Cg * HW;
  const T* x = tptr<const T>(p.x, args);
  T* y = tptr<T>(p.y, args);
  const float* w = tptr<const float>(p.weight, args);
  const float* b = tptr<const float>(p.bias, args);
  float* mean_o = tptr<float>(p.out_mean, args);
  float* rstd_o = tptr<float>(p.out_rstd, args);
  const double eps = p.eps.as_double(args);
  auto body = [&](int64_t rb, int64_t re) {
    std::vector<float> buf(std::is_same_v<T, float> ? 0 : D);
    for (int64_t r = rb; r < re; ++r) {
      const float* xf = as_float(x + r * D, D, buf.data());
      const float mean = D ? static_cast<float>(lane_sum8(xf, D) / static_cast<double>(D)) : 0.f;
      const double var = D ? dsumsq(xf, D, mean) / static_cast<double>(D) : 0.0;
      const float rstd = static_cast<float>(1.0 / std::sqrt(var + eps));
      mean_o[r] = mean;
      rstd_o[r] = rstd;
      const int64_t g = r % G;
      for (int64_t ci = 0; ci < Cg; ++ci) {
        const int64_t c = g * Cg + ci;
        const float sc = rstd * (w ? w[c] : 1.f);
        const float sh = (b ? b[c] : 0.f) - mean * sc;
        const float* xc = xf + ci * HW;
        T* o = y + r * D + ci * HW;
        for (int64_t j = 0; j < HW; ++j) store(o + j, xc[j] * sc + sh);
      }
    }
  };
  parallel_for(N * G, std::max<int64_t>(1, kGrain / std::max<int64_t>(D, 1)), body);
  return 0;
}

// Channels-last input and output ([N, HW, C] in memory): group g of image n is the
// channels [g*Cg, (g+1)*Cg) of every row of that image. Its statistics are per-channel
// sums over the rows (in double, vectorised across channels) summed over the group's
// channels; then each row is normalised in place.
template <class T>
int group_norm_fwd_channels_last(const NormParams& p, const onrt_arg* args) {
  const int64_t N = p.n, C = p.c, HW = p.hw, G = p.groups;
  const int64_t Cg = C / G, D = Cg * HW;
  const T* x = tptr<const T>(p.x, args);
  T* y = tptr<T>(p.y, args);
  const float* w = tptr<const float>(p.weight, args);
  const float* b = tptr<const float>(p.bias, args);
  float* mean_o = tptr<float>(p.out_mean, args);
  float* rstd_o = tptr<float>(p.out_rstd, args);
  const double eps = p.eps.as_double(args);
  parallel_for(N, 1, [&](int64_t nb, int64_t ne) {
    // Per-channel sums over the rows (double, vectorised across channels), then per group.
    std::vector<float> buf(std::is_same_v<T, float> ? 0 : C), sc(C), sh(C), cmean(C);
    std::vector<double> acc(C);
    for (int64_t n = nb; n < ne; ++n) {
      const T* xn = x + n * HW * C;
      auto channel_sums = [&](bool squares) {
        std::fill(acc.begin(), acc.end(), 0.0);
        double* __restrict a = acc.data();
        const float* __restrict m = cmean.data();
        for (int64_t s = 0; s < HW; ++s) {
          const float* __restrict xf = as_float(xn + s * C, C, buf.data());
          if (squares) {
            for (int64_t c = 0; c < C; ++c) {
              const float d = xf[c] - m[c];
              a[c] += static_cast<double>(d) * d;
            }
          } else {
            for (int64_t c = 0; c < C; ++c) a[c] += xf[c];
          }
        }
      };
      auto group_total = [&](int64_t g) {
        double t = 0;
        for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c) t += acc[c];
        return t;
      };
      channel_sums(false);
      for (int64_t g = 0; g < G; ++g) {
        const float mean = D ? static_cast<float>(group_total(g) / static_cast<double>(D)) : 0.f;
        for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c) cmean[c] = mean;
      }
      channel_sums(true);
      for (int64_t g = 0; g < G; ++g) {
        const double var = D ? group_total(g) / static_cast<double>(D) : 0.0;
        const float mean = cmean[g * Cg];
        const float rstd = static_cast<float>(1.0 / std::sqrt(var + eps));
        mean_o[n * G + g] = mean;
        rstd_o[n * G + g] = rstd;
        for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c) {
          sc[c] = rstd * (w ? w[c] : 1.f);
          sh[c] = (b ? b[c] : 0.f) - mean * sc[c];
        }
      }
      for (int64_t s = 0; s < HW; ++s) {
        const float* xf = as_float(xn + s * C, C, buf.data());
        T* o = y + (n * HW + s) * C;
        for (int64_t c = 0; c < C; ++c) store(o + c, xf[c] * sc[c] + sh[c]);
      }
    }
  });
  return 0;
}

template <class T>
int group_norm_bwd(const NormParams& p, const onrt_arg* args) {
  const int64_t N = p.n, C = p.c, HW = p.hw, G = p.groups;
  const int64_t Cg = C / G, D = Cg * HW;
  const T* dy = tptr<const T>(p.grad, args);
  const T* x = tptr<const T>(p.x, args);
  const float* mean = tptr<const float>(p.mean, args);
  const float* rstd = tptr<const float>(p.rstd, args);
  const float* w = tptr<const float>(p.weight, args);
  // Per (n, c): ds = sum(dy * x), db = sum(dy) over hw.
  std::vector<double> ds(N * C), dbs(N * C);
  auto sums = [&](int64_t b0, int64_t e0) {
    std::vector<float> xb(HW), gb(HW);
    for (int64_t nc = b0; nc < e0; ++nc) {
      const float* xf = as_float(x + nc * HW, HW, xb.data());
      const float* gf = as_float(dy + nc * HW, HW, gb.data());
      ds[nc] = ddot(gf, xf, HW);
      dbs[nc] = lane_sum8(gf, HW);
    }
  };
  parallel_for(N * C, std::max<int64_t>(1, kGrain / std::max<int64_t>(HW, 1)), sums);
  if ((p.mask & 1) && p.dx.present()) {
    T* dx = tptr<T>(p.dx, args);
    auto body = [&](int64_t rb, int64_t re) {
      std::vector<float> xb(HW), gb(HW), ob(HW);
      for (int64_t r = rb; r < re; ++r) {
        const int64_t n = r / G, g = r % G;
        double s1 = 0, s2 = 0;
        for (int64_t ci = 0; ci < Cg; ++ci) {
          const int64_t c = g * Cg + ci;
          const double wc = w ? w[c] : 1.0;
          s1 += ds[n * C + c] * wc;
          s2 += dbs[n * C + c] * wc;
        }
        const double m = mean[r], rs = rstd[r];
        const double c2 = (s2 * m - s1) * rs * rs * rs / static_cast<double>(D);
        const double c3 = -c2 * m - s2 * rs / static_cast<double>(D);
        for (int64_t ci = 0; ci < Cg; ++ci) {
          const int64_t c = g * Cg + ci;
          const float c1 = static_cast<float>(rs * (w ? w[c] : 1.0));
          const float* xf = as_float(x + r * D + ci * HW, HW, xb.data());
          const float* gf = as_float(dy + r * D + ci * HW, HW, gb.data());
          const float f2 = static_cast<float>(c2), f3 = static_cast<float>(c3);
          for (int64_t j = 0; j < HW; ++j) ob[j] = c1 * gf[j] + f2 * xf[j] + f3;
          store_row(dx + r * D + ci * HW, ob.data(), HW);
        }
      }
    };
    parallel_for(N * G, std::max<int64_t>(1, kGrain / std::max<int64_t>(D, 1)), body);
  }
  float* dw = (p.mask & 2) ? tptr<float>(p.dweight, args) : nullptr;
  float* db = (p.mask & 4) ? tptr<float>(p.dbias, args) : nullptr;
  for (int64_t c = 0; c < C && (dw || db); ++c) {
    double aw = 0, ab = 0;
    const int64_t g = c / Cg;
    for (int64_t n = 0; n < N; ++n) {
      aw += (ds[n * C + c] - static_cast<double>(mean[n * G + g]) * dbs[n * C + c]) * rstd[n * G + g];
      ab += dbs[n * C + c];
    }
    if (dw) dw[c] = static_cast<float>(aw);
    if (db) db[c] = static_cast<float>(ab);
  }
  return 0;
}

// ------------------------------------------------------------ batch norm

template <class T>
int batch_norm_fwd(const NormParams& p, const onrt_arg* args) {
  const int64_t N = p.n, C = p.c, HW = p.hw;
  const int64_t cnt = N * HW;
  const T* x = tptr<const T>(p.x, args);
  T* y = tptr<T>(p.y, args);
  const float* w = tptr<const float>(p.weight, args);
  const float* b = tptr<const float>(p.bias, args);
  float* rm = tptr<float>(p.running_mean, args);
  float* rv = tptr<float>(p.running_var, args);
  float* mean_o = tptr<float>(p.out_mean, args);
  float* invstd_o = tptr<float>(p.out_rstd, args);
  const double eps = p.eps.as_double(args);
  const double mom = p.momentum.as_double(args);
  const bool train = p.training;
  constexpr bool kFloat = std::is_same_v<T, float>;
  auto body = [&](int64_t cb, int64_t ce) {
    // Half types: the channel's N rows are converted once, then read by every pass.
    std::vector<float> buf(kFloat ? 0 : cnt);
    for (int64_t c = cb; c < ce; ++c) {
      auto row = [&](int64_t n) -> const float* {
        if constexpr (kFloat) return x + (n * C + c) * HW;
        else return buf.data() + n * HW;
      };
      if constexpr (!kFloat)
        for (int64_t n = 0; n < N; ++n) as_float(x + (n * C + c) * HW, HW, buf.data() + n * HW);
      float mean, invstd;
      if (train) {
        double s = 0;
        for (int64_t n = 0; n < N; ++n) s += lane_sum8(row(n), HW);
        mean = cnt ? static_cast<float>(s / static_cast<double>(cnt)) : 0.f;
        double q = 0;
        for (int64_t n = 0; n < N; ++n) q += dsumsq(row(n), HW, mean);
        const double var = cnt ? q / static_cast<double>(cnt) : 0.0;
        invstd = static_cast<float>(1.0 / std::sqrt(var + eps));
        if (mean_o) mean_o[c] = mean;
        if (invstd_o) invstd_o[c] = invstd;
        if (rm) rm[c] = static_cast<float>((1 - mom) * rm[c] + mom * mean);
        if (rv) {
          const double unbiased = cnt > 1 ? q / static_cast<double>(cnt - 1) : NAN;
          rv[c] = static_cast<float>((1 - mom) * rv[c] + mom * unbiased);
        }
      } else {
        mean = rm[c];
        invstd = static_cast<float>(1.0 / std::sqrt(static_cast<double>(rv[c]) + eps));
      }
      const float sc = invstd * (w ? w[c] : 1.f);
      const float sh = (b ? b[c] : 0.f) - mean * sc;
      for (int64_t n = 0; n < N; ++n) {
        const float* xf = row(n);
        T* o = y + (n * C + c) * HW;
        for (int64_t j = 0; j < HW; ++j) store(o + j, xf[j] * sc + sh);
      }
    }
  };
  parallel_for(C, std::max<int64_t>(1, kGrain / std::max<int64_t>(cnt, 1)), body);
  return 0;
}

// Channels-last input and output ([N, HW, C] in memory): each row holds one value per
// channel, so the statistics are per-channel sums over rows (in double, vectorised across
// channels, per block of rows, then across the blocks) and the normalisation is a vector
// pass over every row.
template <class T>
int batch_norm_fwd_channels_last(const NormParams& p, const onrt_arg* args) {
  const int64_t C = p.c, rows = p.n * p.hw;
  const T* x = tptr<const T>(p.x, args);
  T* y = tptr<T>(p.y, args);
  const float* w = tptr<const float>(p.weight, args);
  const float* b = tptr<const float>(p.bias, args);
  float* rm = tptr<float>(p.running_mean, args);
  float* rv = tptr<float>(p.running_var, args);
  const double eps = p.eps.as_double(args);
  const double mom = p.momentum.as_double(args);
  std::vector<float> mean(C), invstd(C);
  if (p.training) {
    const int64_t blocks = std::min<int64_t>(rows, 64);
    std::vector<double> part(static_cast<size_t>(blocks * C));
    // pass 0: sums, pass 1: squared deviations from the mean
    for (int pass = 0; pass < 2; ++pass) {
      parallel_for(blocks, 1, [&](int64_t bb, int64_t be) {
        std::vector<double> acc_buf(C);
        std::vector<float> buf(std::is_same_v<T, float> ? 0 : C);
        double* __restrict acc = acc_buf.data();
        const float* __restrict m = mean.data();
        for (int64_t blk = bb; blk < be; ++blk) {
          std::fill(acc, acc + C, 0.0);
          for (int64_t r = blk * rows / blocks; r < (blk + 1) * rows / blocks; ++r) {
            const float* __restrict xf = as_float(x + r * C, C, buf.data());
            if (pass == 0) {
              for (int64_t c = 0; c < C; ++c) acc[c] += xf[c];
            } else {
              for (int64_t c = 0; c < C; ++c) {
                const float d = xf[c] - m[c];
                acc[c] += static_cast<double>(d) * d;
              }
            }
          }
          for (int64_t c = 0; c < C; ++c) part[blk * C + c] = acc[c];
        }
      });
      for (int64_t c = 0; c < C; ++c) {
        double t = 0;
        for (int64_t blk = 0; blk < blocks; ++blk) t += part[blk * C + c];
        if (pass == 0) {
          mean[c] = static_cast<float>(t / static_cast<double>(rows));
          continue;
        }
        const double var = t / static_cast<double>(rows);
        invstd[c] = static_cast<float>(1.0 / std::sqrt(var + eps));
        if (float* o = tptr<float>(p.out_mean, args)) o[c] = mean[c];
        if (float* o = tptr<float>(p.out_rstd, args)) o[c] = invstd[c];
        if (rm) rm[c] = static_cast<float>((1 - mom) * rm[c] + mom * mean[c]);
        if (rv)
          rv[c] = static_cast<float>((1 - mom) * rv[c] + mom * (rows > 1 ? t / (rows - 1) : NAN));
      }
    }
  } else {
    for (int64_t c = 0; c < C; ++c) {
      mean[c] = rm[c];
      invstd[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(rv[c]) + eps));
    }
  }
  std::vector<float> sc(C), sh(C);
  for (int64_t c = 0; c < C; ++c) {
    sc[c] = invstd[c] * (w ? w[c] : 1.f);
    sh[c] = (b ? b[c] : 0.f) - mean[c] * sc[c];
  }
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(C, 1)),
               [&](int64_t rb, int64_t re) {
                 std::vector<float> buf(std::is_same_v<T, float> ? 0 : C);
                 for (int64_t r = rb; r < re; ++r) {
                   const float* xf = as_float(x + r * C, C, buf.data());
                   T* o = y + r * C;
                   for (int64_t c = 0; c < C; ++c) store(o + c, xf[c] * sc[c] + sh[c]);
                 }
               });
  return 0;
}

template <class T>
int batch_norm_bwd(const NormParams& p, const onrt_arg* args) {
  const int64_t N = p.n, C = p.c, HW = p.hw;
  const int64_t cnt = N * HW;
  const T* dy = tptr<const T>(p.grad, args);
  const T* x = tptr<const T>(p.x, args);
  const float* w = tptr<const float>(p.weight, args);
  const bool train = p.training;
  const float* sm = tptr<const float>(train ? p.mean : p.running_mean, args);
  const float* sv = tptr<const float>(train ? p.rstd : p.running_var, args);
  const double eps = p.eps.as_double(args);
  T* dx = (p.mask & 1) ? tptr<T>(p.dx, args) : nullptr;
  float* dw = (p.mask & 2) ? tptr<float>(p.dweight, args) : nullptr;
  float* db = (p.mask & 4) ? tptr<float>(p.dbias, args) : nullptr;
  auto body = [&](int64_t cb, int64_t ce) {
    std::vector<float> xb(HW), gb(HW), ob(HW);
    for (int64_t c = cb; c < ce; ++c) {
      const float mean = sm[c];
      const float invstd =
          train ? sv[c] : static_cast<float>(1.0 / std::sqrt(static_cast<double>(sv[c]) + eps));
      double sdy = 0, dot = 0;
      for (int64_t n = 0; n < N; ++n) {
        const float* xf = as_float(x + (n * C + c) * HW, HW, xb.data());
        const float* gf = as_float(dy + (n * C + c) * HW, HW, gb.data());
        double l = 0;
        for (int64_t j = 0; j < HW; ++j) l += static_cast<double>(gf[j] * (xf[j] - mean));
        dot += l;
        sdy += lane_sum8(gf, HW);
      }
      if (dw) dw[c] = static_cast<float>(dot * invstd);
      if (db) db[c] = static_cast<float>(sdy);
      if (!dx) continue;
      const float wc = w ? w[c] : 1.f;
      if (train) {
        const float k = static_cast<float>(dot * invstd * invstd / static_cast<double>(cnt));
        const float gm = static_cast<float>(sdy / static_cast<double>(cnt));
        const float sc = invstd * wc;
        for (int64_t n = 0; n < N; ++n) {
          const float* xf = as_float(x + (n * C + c) * HW, HW, xb.data());
          const float* gf = as_float(dy + (n * C + c) * HW, HW, gb.data());
          for (int64_t j = 0; j < HW; ++j) ob[j] = (gf[j] - gm - (xf[j] - mean) * k) * sc;
          store_row(dx + (n * C + c) * HW, ob.data(), HW);
        }
      } else {
        const float sc = invstd * wc;
        for (int64_t n = 0; n < N; ++n) {
          const float* gf = as_float(dy + (n * C + c) * HW, HW, gb.data());
          for (int64_t j = 0; j < HW; ++j) ob[j] = gf[j] * sc;
          store_row(dx + (n * C + c) * HW, ob.data(), HW);
        }
      }
    }
  };
  parallel_for(C, std::max<int64_t>(1, kGrain / std::max<int64_t>(cnt, 1)), body);
  return 0;
}

template <class T>
int norm_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const NormParams*>(params);
  switch (p.op) {
    case NormOp::LayerNorm: return layer_norm_fwd<T>(p, args);
    case NormOp::LayerNormBackward: return layer_norm_bwd<T>(p, args);
    case NormOp::GroupNorm:
      return p.channels_last ? group_norm_fwd_channels_last<T>(p, args)
                             : group_norm_fwd<T>(p, args);
    case NormOp::GroupNormBackward: return group_norm_bwd<T>(p, args);
    case NormOp::BatchNorm:
      return p.channels_last ? batch_norm_fwd_channels_last<T>(p, args)
                             : batch_norm_fwd<T>(p, args);
    case NormOp::BatchNormBackward: return batch_norm_bwd<T>(p, args);
  }
  return fail(err, errlen, "unknown norm op");
}

}  // namespace
}  // namespace detail

onrt_kernel_fn norm_kernel(DType dtype) {
  using namespace detail;
  switch (dtype) {
    case DType::Float32: return &norm_entry<float>;
    case DType::BFloat16: return &norm_entry<bf16>;
    case DType::Float16: return &norm_entry<f16>;
    default: return nullptr;
  }
}

}  // namespace openneuron::kernels
