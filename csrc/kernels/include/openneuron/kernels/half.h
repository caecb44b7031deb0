// Bit-exact conversions for the narrow float types, matching c10::BFloat16,
// c10::Half and c10::Float8_e4m3fn / Float8_e5m2 (round-to-nearest-even; the
// float8 types follow c10: e4m3fn overflows to NaN, e5m2 to infinity).
// Written branch-free so loops over them auto-vectorise.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace openneuron::kernels {
// Translation units built with and without F16C get differently named copies,
// so the two definitions of these inline functions never meet in one program.
#if defined(__F16C__)
inline namespace half_f16c {
#else
inline namespace half_portable {
#endif

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---------------------------------------------------------------- bfloat16
inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t rounded = (u + (((u >> 16) & 1u) + 0x7FFFu)) >> 16;
  // c10 maps every NaN to the canonical quiet NaN 0x7FC0.
  return static_cast<uint16_t>(f != f ? 0x7FC0u : rounded);
}

// ----------------------------------------------------------------- float16
#if defined(__F16C__)
// The hardware conversions (F16C) round to nearest-even exactly like the
// portable constructions below, at a fraction of their cost; NaNs stay NaN
// (their payload bits may differ, which no comparison sees).
inline float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t f32_to_f16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
#else
inline float f16_to_f32(uint16_t h) {
  // Same construction as c10::detail::fp16_ieee_to_fp32_value.
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = 0x1.0p-112f;
  const float normalized = f32_from_bits((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = f32_from_bits((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < denormalized_cutoff ? f32_bits(denormalized) : f32_bits(normalized));
  return f32_from_bits(result);
}

inline uint16_t f32_to_f16(float f) {
  // Same construction as c10::detail::fp16_ieee_from_fp32_value (RNE). The two
  // multiplications must stay separately rounded: the kernels are built with
  // -ffp-contract=off.
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  float base = ((f < 0 ? -f : f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = f32_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  base = f32_from_bits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = f32_bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}
#endif

// ------------------------------------------------------------ float8 e4m3fn
inline float f8e4m3_to_f32(uint8_t x) {
  // Every e4m3fn value is exact in float: decode directly.
  const uint32_t sign = static_cast<uint32_t>(x & 0x80u) << 24;
  const uint32_t exp = (x >> 3) & 0xFu;
  const uint32_t man = x & 0x7u;
  float mag;
  if ((x & 0x7Fu) == 0x7Fu) {
    mag = f32_from_bits(0x7FC00000u);
  } else if (exp == 0) {
    mag = static_cast<float>(man) * 0x1.0p-9f;  // subnormal: man * 2^-6 * 2^-3
  } else {
    mag = f32_from_bits(((exp + 120u) << 23) | (man << 20));
  }
  return f32_from_bits(f32_bits(mag) | sign);
}

inline uint8_t f32_to_f8e4m3(float f) {
  // c10::detail::fp8e4m3fn_from_fp32_value, with the saturating overflow of
  // PyTorch's casts (e4m3fn has no infinity).
  const uint32_t fp8_max = 1087u << 20;
  const uint32_t denorm_mask = 141u << 23;
  uint32_t f_bits = f32_bits(f);
  uint8_t result;
  const uint32_t sign = f_bits & 0x80000000u;
  f_bits ^= sign;
  if (f_bits >= fp8_max) {
    result = f_bits > (255u << 23) ? 0x7F : 0x7E;
  } else if (f_bits < (121u << 23)) {
    f_bits = f32_bits(f32_from_bits(f_bits) + f32_from_bits(denorm_mask));
    result = static_cast<uint8_t>(f_bits - denorm_mask);
  } else {
    const uint32_t mant_odd = (f_bits >> 20) & 1u;
    f_bits += (static_cast<uint32_t>(7 - 127) << 23) + 0x7FFFFu;
    f_bits += mant_odd;
    result = static_cast<uint8_t>(f_bits >> 20);
    result = result == 0x7F ? 0x7E : result;  // (464, 480) rounds past 448: saturate
  }
  return static_cast<uint8_t>(result | (sign >> 24));
}

// -------------------------------------------------------------- float8 e5m2
inline float f8e5m2_to_f32(uint8_t x) { return f16_to_f32(static_cast<uint16_t>(x) << 8); }

inline uint8_t f32_to_f8e5m2(float f) {
  // c10::detail::fp8e5m2_from_fp32_value
  const uint32_t fp32_inf = 255u << 23;
  const uint32_t fp8_max = 143u << 23;
  const uint32_t denorm_mask = 134u << 23;
  uint32_t f_bits = f32_bits(f);
  uint8_t result;
  const uint32_t sign = f_bits & 0x80000000u;
  f_bits ^= sign;
  if (f_bits >= fp8_max) {
    result = f_bits > fp32_inf ? 0x7F : 0x7C;
  } else if (f_bits < (113u << 23)) {
    f_bits = f32_bits(f32_from_bits(f_bits) + f32_from_bits(denorm_mask));
    result = static_cast<uint8_t>(f_bits - denorm_mask);
  } else {
    const uint32_t mant_odd = (f_bits >> 21) & 1u;
    f_bits += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFFFu;
    f_bits += mant_odd;
    result = static_cast<uint8_t>(f_bits >> 21);
  }
  return static_cast<uint8_t>(result | (sign >> 24));
}

}  // inline namespace
}  // namespace openneuron::kernels
