// Branch-free float exp/tanh/erf that GCC can vectorise (glibc's libm calls
// cannot be vectorised without -ffast-math). Accuracy: exp ~1 ulp (Cephes
// expf), tanh ~2 ulp (Cephes tanhf), erf < 3e-7 relative — within PyTorch's
// own SLEEF-based error, so float32 results agree with PyTorch CPU to ~1e-6.
// Every path is computed and then selected, so loops if-convert.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <limits>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#ifndef ON_INLINE
#define ON_INLINE __attribute__((always_inline)) inline
#endif

namespace openneuron::kernels::detail {

ON_INLINE float vm_bits_to_f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

ON_INLINE float vexp(float x) {
  const float hi = 88.7228394f, lo = -103.972084f;
  float xc = x > hi ? hi : x;
  xc = xc < lo ? lo : xc;
  // Round to nearest with the 1.5*2^23 trick (|x * log2e| < 2^22 here).
  const float t = xc * 1.44269504088896341f;
  const float fx = (t + 12582912.0f) - 12582912.0f;
  float r = std::fma(-fx, 0.693359375f, xc);
  r = std::fma(-fx, -2.12194440e-4f, r);
  const float z = r * r;
  float y = std::fma(1.9875691500e-4f, r, 1.3981999507e-3f);
  y = std::fma(y, r, 8.3334519073e-3f);
  y = std::fma(y, r, 4.1665795894e-2f);
  y = std::fma(y, r, 1.6666665459e-1f);
  y = std::fma(y, r, 5.0000001201e-1f);
  y = std::fma(y, z, r) + 1.0f;
  // 2^n in two factors so results down to the subnormals stay exact.
  const int32_t n = static_cast<int32_t>(fx);
  const int32_t n1 = n >> 1, n2 = n - n1;
  const float s1 = vm_bits_to_f(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = vm_bits_to_f(static_cast<uint32_t>(n2 + 127) << 23);
  float res = (y * s1) * s2;
  res = x > hi ? INFINITY : res;
  return x != x ? x : res;
}

#if defined(__AVX512F__)
// vexp on 16 lanes, bit for bit: the same steps, except that vscalefps applies
// 2^n in one rounding where vexp multiplies by two powers of two (exact, then
// one rounding): the same result in fewer instructions. GCC cannot find
// vscalefps in vexp itself.
ON_INLINE __m512 vexp16(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.7228394f), lo = _mm512_set1_ps(-103.972084f);
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  const __m512 xc = _mm512_max_ps(_mm512_min_ps(x, hi), lo);  // NaN lanes fixed below
  const __m512 fx =
      _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)), magic), magic);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_add_ps(_mm512_fmadd_ps(y, z, r), _mm512_set1_ps(1.0f));
  __m512 res = _mm512_scalef_ps(y, fx);
  res = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), res, _mm512_set1_ps(INFINITY));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), res, x);
}
#elif defined(__AVX2__) && defined(__FMA__)
// vexp's range reduction and polynomial on 8 lanes for an already clamped xc:
// returns y with exp(xc) = y * 2^n, and n.
ON_INLINE __m256 vexp8_poly(__m256 xc, __m256i& n) {
  const __m256 magic = _mm256_set1_ps(12582912.0f);
  const __m256 fx =
      _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)), magic), magic);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  n = _mm256_cvttps_epi32(fx);  // fx is integral: exact
  return _mm256_add_ps(_mm256_fmadd_ps(y, z, r), _mm256_set1_ps(1.0f));
}

// vexp on 8 lanes, bit for bit: the same steps in the same order. GCC does
// vectorise vexp itself, but its if-conversion of the clamps and selects costs
// a dozen blends per vector; here min/max clamp (NaN lanes are restored at the
// end) and 2^n is built in two integer steps as in vexp.
ON_INLINE __m256 vexp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.7228394f), lo = _mm256_set1_ps(-103.972084f);
  __m256i n;
  const __m256 y = vexp8_poly(_mm256_max_ps(_mm256_min_ps(x, hi), lo), n);
  const __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 res = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
  res = _mm256_blendv_ps(res, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// vexp8 for x <= 0 (or NaN) where only results of at least 2^-126 matter: equal
// to vexp8 bit for bit there, and below 2^-126 for smaller x. Saves vexp8's
// overflow and NaN selects and its second power-of-two factor (2^n alone is a
// normal float once x is clamped at ln 2^-126), about a fifth of gelu's time.
ON_INLINE __m256 vexp8_nonpositive(__m256 x) {
  __m256i n;
  const __m256 y = vexp8_poly(_mm256_max_ps(x, _mm256_set1_ps(-87.3365402f)), n);
  const __m256i biased = _mm256_add_epi32(n, _mm256_set1_epi32(127));
  return _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23)));
}
#endif

// The *_blocks functions write the leading whole 16-lane blocks (AVX-512; 8-lane
// ones with AVX2; none without) and return how many elements they wrote; the caller finishes the
// rest with the scalar formula they equal bit for bit.

// out[i] = vexp(in[i] - shift).
inline int64_t vexp_blocks(const float* in, float* out, int64_t n, float shift) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 sh = _mm512_set1_ps(shift);
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, vexp16(_mm512_sub_ps(_mm512_loadu_ps(in + i), sh)));
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 sh = _mm256_set1_ps(shift);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, vexp8(_mm256_sub_ps(_mm256_loadu_ps(in + i), sh)));
#endif
  return i;
}

// out[i] = vexp(in[i] - shift) for all n.
inline void vexp_shifted(const float* in, float* out, int64_t n, float shift) {
  for (int64_t i = vexp_blocks(in, out, n, shift); i < n; ++i) out[i] = vexp(in[i] - shift);
}

// Largest element of a float row; NaNs are skipped (callers get NaN from the
// row's other arithmetic, as the CPU's NaN-propagating max gives it). Lane m[l]
// keeps `x > m ? x : m` over its elements: exactly what (v)maxps(x, m) does, so
// the vector and scalar paths agree bit for bit. GCC does not vectorise a float
// max reduction itself without -ffast-math.
inline float row_max(const float* x, int64_t n) {
  constexpr int L = 16;
  alignas(32) float m[L];
  for (float& v : m) v = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
#if defined(__AVX__)
  __m256 m0 = _mm256_load_ps(m), m1 = m0;
  for (; j + L <= n; j += L) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + j), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(x + j + 8), m1);
  }
  _mm256_store_ps(m, m0);
  _mm256_store_ps(m + 8, m1);
#endif
  for (; j + L <= n; j += L)
    for (int l = 0; l < L; ++l) m[l] = x[j + l] > m[l] ? x[j + l] : m[l];
  for (; j < n; ++j) m[0] = x[j] > m[0] ? x[j] : m[0];
  float mx = m[0];
  for (int l = 1; l < L; ++l) mx = m[l] > mx ? m[l] : mx;
  return mx;
}

ON_INLINE float vtanh(float x) {
  const float ax = std::fabs(x);
  // Small |x|: odd polynomial. Large: 1 - 2 / (exp(2|x|) + 1).
  const float z = x * x;
  float p = std::fma(-5.70498872745e-3f, z, 2.06390887954e-2f);
  p = std::fma(p, z, -5.37397155531e-2f);
  p = std::fma(p, z, 1.33314422036e-1f);
  p = std::fma(p, z, -3.33332819422e-1f);
  // The sign of x also for x = -0, which the polynomial would round to +0.
  const float small = std::copysign(std::fma(p * z, x, x), x);
  const float e = vexp(2.0f * ax);
  const float big_abs = 1.0f - 2.0f / (e + 1.0f);
  const float big = std::copysign(big_abs, x);
  const float r = ax < 0.625f ? small : big;
  return x != x ? x : r;
}

ON_INLINE float verf(float x) {
  const float ax = std::fabs(x);
  // |x| < 1: Maclaurin series to x^21 (truncation < 2e-8 relative).
  const float z = x * x;
  float p = 1.0f / 76204800.0f;
  p = std::fma(p, z, -1.0f / 6894720.0f);
  p = std::fma(p, z, 1.0f / 685440.0f);
  p = std::fma(p, z, -1.0f / 75600.0f);
  p = std::fma(p, z, 1.0f / 9360.0f);
  p = std::fma(p, z, -1.0f / 1320.0f);
  p = std::fma(p, z, 1.0f / 216.0f);
  p = std::fma(p, z, -1.0f / 42.0f);
  p = std::fma(p, z, 1.0f / 10.0f);
  p = std::fma(p, z, -1.0f / 3.0f);
  p = std::fma(p, z, 1.0f);
  const float small = x * p * 1.12837916709551257f;
  // |x| >= 1: Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, erf >= 0.84 here).
  const float t = 1.0f / std::fma(0.3275911f, ax, 1.0f);
  float q = std::fma(1.061405429f, t, -1.453152027f);
  q = std::fma(q, t, 1.421413741f);
  q = std::fma(q, t, -0.284496736f);
  q = std::fma(q, t, 0.254829592f);
  const float big_abs = 1.0f - q * t * vexp(-z);
  const float big = std::copysign(big_abs, x);
  const float r = ax < 1.0f ? small : big;
  return x != x ? x : r;
}

// erf by Abramowitz & Stegun 7.1.26 over the whole range (|error| < 1.5e-7,
// absolute), with the operation order of PyTorch's vectorised CPU erf that its
// gelu uses. Half the work of verf, which also keeps small arguments accurate
// relative to their size; gelu multiplies erf's error by x/2, so it needs no more.
ON_INLINE float verf_gelu(float x) {
  const float ax = std::fabs(x);
  const float t = 1.0f / std::fma(0.3275911f, ax, 1.0f);
  float q = std::fma(1.061405429f, t, -1.453152027f);
  q = std::fma(q, t, 1.421413741f);
  q = std::fma(q, t, -0.284496736f);
  q = std::fma(q, t, 0.254829592f);
  const float r = std::fma(-(vexp(-x * x) * t), q, 1.0f);
  return x != x ? x : std::copysign(r, x);
}

// out[i] = x * 0.5 * (1 + verf_gelu(x * sqrt(1/2))): elementwise_unary.cpp's GeluErfF.
inline int64_t vgelu_erf_blocks(const float* in, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  constexpr float kAlpha = static_cast<float>(M_SQRT1_2);
  const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(in + i);
    const __m512 u = _mm512_mul_ps(x, _mm512_set1_ps(kAlpha));
    const __m512 au = _mm512_andnot_ps(sign, u);
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), au, one));
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(1.061405429f), t, _mm512_set1_ps(-1.453152027f));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.421413741f));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(-0.284496736f));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(0.254829592f));
    const __m512 e = vexp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(u, u)));
    const __m512 r = _mm512_fnmadd_ps(_mm512_mul_ps(e, t), q, one);
    __m512 erf = _mm512_or_ps(_mm512_andnot_ps(sign, r), _mm512_and_ps(sign, u));  // copysign
    erf = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(u, u, _CMP_UNORD_Q), erf, u);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(x, half), _mm512_add_ps(one, erf)));
  }
#elif defined(__AVX2__) && defined(__FMA__)
  constexpr float kAlpha = static_cast<float>(M_SQRT1_2);
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    const __m256 u = _mm256_mul_ps(x, _mm256_set1_ps(kAlpha));
    const __m256 au = _mm256_andnot_ps(sign, u);
    const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), au, one));
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(1.061405429f), t, _mm256_set1_ps(-1.453152027f));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.421413741f));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(-0.284496736f));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(0.254829592f));
    // e below 2^-126 leaves r at exactly 1, so the cheaper exp gives the same bits.
    // -(u*u) + 0 rounds once, as 0 - u*u does.
    const __m256 e = vexp8_nonpositive(_mm256_fnmadd_ps(u, u, _mm256_setzero_ps()));
    const __m256 r = _mm256_fnmadd_ps(_mm256_mul_ps(e, t), q, one);
    __m256 erf = _mm256_xor_ps(r, _mm256_and_ps(sign, u));  // copysign: r >= 0 or NaN
    erf = _mm256_blendv_ps(erf, u, _mm256_cmp_ps(u, u, _CMP_UNORD_Q));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(x, half), _mm256_add_ps(one, erf)));
  }
#endif
  return i;
}

}  // namespace openneuron::kernels::detail

namespace openneuron::kernels::detail {

// Dispatch on the compute type: the vectorisable float versions, libm otherwise.
template <class C> ON_INLINE C fexp(C x) {
  if constexpr (std::is_same_v<C, float>) return vexp(x);
  else return std::exp(x);
}
template <class C> ON_INLINE C ftanh(C x) {
  if constexpr (std::is_same_v<C, float>) return vtanh(x);
  else return std::tanh(x);
}
template <class C> ON_INLINE C ferf(C x) {
  if constexpr (std::is_same_v<C, float>) return verf(x);
  else return std::erf(x);
}
template <class C> ON_INLINE C ferf_gelu(C x) {
  if constexpr (std::is_same_v<C, float>) return verf_gelu(x);
  else return std::erf(x);
}

}  // namespace openneuron::kernels::detail
