// Memory-efficient attention (forward and backward) as single-op graphs,
// against a naive reference that materialises the scores in double.
#include "test_util.h"

namespace ontest {
namespace {

struct Case {
  int64_t B, H, Hk, L, S, E, Ev;
  double scale;
  bool causal;
};

// Element (b, h, i, j) of a [B, H, L, S]-broadcast mask, or null for none.
using MaskFn = std::function<double(int64_t, int64_t, int64_t, int64_t)>;  // additive; -inf drops

struct Ref {
  std::vector<double> out, lse, dq, dk, dv;
};

Ref naive(const Case& c, const HostTensor& q, const HostTensor& k, const HostTensor& v,
          const MaskFn& mask, const HostTensor* grad) {
  Ref r;
  r.out.assign(c.B * c.H * c.L * c.Ev, 0);
  r.lse.assign(c.B * c.H * c.L, 0);
  r.dq.assign(c.B * c.H * c.L * c.E, 0);
  r.dk.assign(c.B * c.Hk * c.S * c.E, 0);
  r.dv.assign(c.B * c.Hk * c.S * c.Ev, 0);
  const int64_t G = c.H / c.Hk;
  std::vector<double> p(c.S), dp(c.S);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.L; ++i) {
        const int64_t hk = h / G;
        const int64_t qi = ((b * c.H + h) * c.L + i);
        double mx = -INFINITY;
        for (int64_t j = 0; j < c.S; ++j) {
          double s = 0;
          for (int64_t e = 0; e < c.E; ++e)
            s += q.get(qi * c.E + e) * k.get(((b * c.Hk + hk) * c.S + j) * c.E + e);
          s *= c.scale;
          if (mask) s += mask(b, h, i, j);
          if (c.causal && j > i) s = -INFINITY;
          p[j] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < c.S; ++j) {
          p[j] = mx == -INFINITY ? 0 : std::exp(p[j] - mx);
          sum += p[j];
        }
        r.lse[qi] = sum > 0 ? mx + std::log(sum) : INFINITY;
        for (int64_t j = 0; j < c.S; ++j) p[j] = sum > 0 ? p[j] / sum : 0;
        for (int64_t e = 0; e < c.Ev; ++e) {
          double o = 0;
          for (int64_t j = 0; j < c.S; ++j)
            o += p[j] * v.get(((b * c.Hk + hk) * c.S + j) * c.Ev + e);
          r.out[qi * c.Ev + e] = o;
        }
        if (!grad) continue;
        double D = 0;
        for (int64_t j = 0; j < c.S; ++j) {
          dp[j] = 0;
          for (int64_t e = 0; e < c.Ev; ++e)
            dp[j] += grad->get(qi * c.Ev + e) * v.get(((b * c.Hk + hk) * c.S + j) * c.Ev + e);
          D += p[j] * dp[j];
        }
        for (int64_t j = 0; j < c.S; ++j) {
          const int64_t kj = (b * c.Hk + hk) * c.S + j;
          const double ds = p[j] * (dp[j] - D) * c.scale;
          for (int64_t e = 0; e < c.Ev; ++e) r.dv[kj * c.Ev + e] += p[j] * grad->get(qi * c.Ev + e);
          for (int64_t e = 0; e < c.E; ++e) {
            r.dq[qi * c.E + e] += ds * k.get(kj * c.E + e);
            r.dk[kj * c.E + e] += ds * q.get(qi * c.E + e);
          }
        }
      }
  return r;
}

ValueType fscalar() { return ValueType::scalar_float(); }
ValueType iscalar() { return ValueType::scalar_int(); }
onrt_arg nul() {
  onrt_arg a;
  a.ptr = nullptr;
  return a;
}

void run_case(const Case& c, DType dt, const HostTensor* mask, const MaskFn& mask_fn, double tol,
              bool backward) {
  auto q = HostTensor::make(dt, {c.B, c.H, c.L, c.E}).randomize(1, -1, 1);
  auto k = HostTensor::make(dt, {c.B, c.Hk, c.S, c.E}).randomize(2, -1, 1);
  auto v = HostTensor::make(dt, {c.B, c.Hk, c.S, c.Ev}).randomize(3, -1, 1);
  auto out = HostTensor::make(dt, {c.B, c.H, c.L, c.Ev});
  auto lse = HostTensor::make(DType::Float32, {c.B, c.H, c.L});
  const ValueType mvt = mask ? mask->vt() : ValueType::none();
  const onrt_arg marg = mask ? mask->arg() : nul();
  const std::vector<int64_t> attrs = {c.causal ? 1 : 0, 0};
  run_op(
      Op::Attention,
      {q.vt(), k.vt(), v.vt(), mvt, fscalar(), fscalar(), iscalar(), iscalar(), out.vt(), lse.vt()},
      8,
      {q.arg(), k.arg(), v.arg(), marg, farg(c.scale), farg(0), iarg(0), iarg(0), out.arg(),
       lse.arg()},
      attrs);
  auto g = HostTensor::make(dt, {c.B, c.H, c.L, c.Ev}).randomize(4, -1, 1);
  const Ref r = naive(c, q, k, v, mask_fn, backward ? &g : nullptr);
  EXPECT_ALL_NEAR(out, r.out, tol, tol);
  EXPECT_ALL_NEAR(lse, r.lse, 1e-4, 1e-4);
  if (!backward) return;
  auto dq = HostTensor::make(dt, {c.B, c.H, c.L, c.E});
  auto dk = HostTensor::make(dt, {c.B, c.Hk, c.S, c.E});
  auto dv = HostTensor::make(dt, {c.B, c.Hk, c.S, c.Ev});
  run_op(Op::AttentionBackward,
         {g.vt(), q.vt(), k.vt(), v.vt(), out.vt(), lse.vt(), mvt, fscalar(), fscalar(), iscalar(),
          iscalar(), dq.vt(), dk.vt(), dv.vt()},
         11,
         {g.arg(), q.arg(), k.arg(), v.arg(), out.arg(), lse.arg(), marg, farg(c.scale), farg(0),
          iarg(0), iarg(0), dq.arg(), dk.arg(), dv.arg()},
         attrs);
  EXPECT_ALL_NEAR(dq, r.dq, tol, tol);
  EXPECT_ALL_NEAR(dk, r.dk, tol, tol);
  EXPECT_ALL_NEAR(dv, r.dv, tol, tol);
}

// Sizes straddle the engine's 64-query / 256-key (128 in the backward) tiles.
TEST(Attention, AdditiveBroadcastMaskGqaForwardBackward) {
  const Case c{2, 4, 2, 70, 300, 16, 24, 0.3, false};
  // [L, S] additive mask expanded over batch and heads (stride 0).
  auto m = HostTensor::make(DType::Float32, {c.B, c.H, c.L, c.S}, {0, 0, c.S, 1});
  std::vector<double> mv(c.L * c.S);
  std::mt19937 gen(9);
  std::uniform_real_distribution<double> u(-2, 1);
  for (auto& x : mv) x = u(gen);
  for (int64_t i = 0; i < c.L * c.S; ++i)
    *reinterpret_cast<float*>(static_cast<char*>(m.ptr()) + i * 4) = static_cast<float>(mv[i]);
  run_case(
      c, DType::Float32, &m,
      [&](int64_t, int64_t, int64_t i, int64_t j) { return mv[i * c.S + j]; }, 2e-5, true);
}

TEST(Attention, CausalMoreQueriesThanKeys) {
  const Case c{1, 2, 2, 130, 100, 8, 8, 1 / std::sqrt(8.0), true};
  run_case(c, DType::Float32, nullptr, nullptr, 2e-5, true);
}

TEST(Attention, BoolMaskWithFullyMaskedRowHalfTypes) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    const Case c{1, 3, 1, 33, 40, 32, 16, 0.25, false};
    auto m = HostTensor::make(DType::Bool, {c.B, c.H, c.L, c.S});
    // Row 5 of every head sees no key: PyTorch's math path outputs 0 there.
    auto keep = [&](int64_t h, int64_t i, int64_t j) { return i != 5 && (i + j + h) % 3 != 0; };
    m.fill_fn([&](int64_t e) {
      const int64_t j = e % c.S, i = (e / c.S) % c.L, h = e / (c.S * c.L);
      return keep(h, i, j) ? 1.0 : 0.0;
    });
    run_case(
        c, dt, &m,
        [&](int64_t, int64_t h, int64_t i, int64_t j) { return keep(h, i, j) ? 0.0 : -INFINITY; },
        3e-2, true);
  }
}

TEST(Attention, DropoutIsDeterministicPerSeedAndScalesKeptWeights) {
  // V = identity exposes the dropped, rescaled probabilities as the output.
  const int64_t L = 50, S = 300;
  auto q = HostTensor::make(DType::Float32, {1, 1, L, 8}).randomize(1, -1, 1);
  auto k = HostTensor::make(DType::Float32, {1, 1, S, 8}).randomize(2, -1, 1);
  auto v = HostTensor::make(DType::Float32, {1, 1, S, S}).fill_fn([&](int64_t e) {
    return e / S == e % S ? 1.0 : 0.0;
  });
  auto run = [&](int64_t seed, double p) {
    auto out = HostTensor::make(DType::Float32, {1, 1, L, S});
    auto lse = HostTensor::make(DType::Float32, {1, 1, L});
    run_op(Op::Attention,
           {q.vt(), k.vt(), v.vt(), ValueType::none(), fscalar(), fscalar(), iscalar(), iscalar(),
            out.vt(), lse.vt()},
           8,
           {q.arg(), k.arg(), v.arg(), nul(), farg(0.5), farg(p), iarg(seed), iarg(7), out.arg(),
            lse.arg()},
           {0, 1});
    return out.values();
  };
  const auto a = run(42, 0.25), b = run(42, 0.25), c = run(43, 0.25), none = run(42, 0.0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  int64_t kept = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != 0) {
      ++kept;
      ASSERT_TRUE(near_rel(a[i], none[i] / 0.75, 1e-5)) << i;
    }
  }
  const double frac = static_cast<double>(kept) / static_cast<double>(a.size());
  EXPECT_NEAR(frac, 0.75, 0.02);
}

}  // namespace
}  // namespace ontest
