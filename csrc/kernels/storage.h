// Element storage: the narrow float types' storage structs, load/store with
// c10's conversions, value conversion between compute types, and dispatch from
// a DType to its storage type.
#pragma once

#include <limits>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "openneuron/kernels/half.h"
#include "openneuron/kernels/types.h"

// The per-element helpers and op functors must inline into the row loops for
// them to vectorise; GCC's unit-growth limits would otherwise stop inlining in
// the large kernel translation units.
#define ON_INLINE __attribute__((always_inline)) inline

namespace openneuron::kernels::detail {

struct bf16 { uint16_t x; };
struct f16 { uint16_t x; };
struct f8e4m3 { uint8_t x; };
struct f8e5m2 { uint8_t x; };
struct c64 { float re, im; };

template <class T> struct is_narrow : std::false_type {};
template <> struct is_narrow<bf16> : std::true_type {};
template <> struct is_narrow<f16> : std::true_type {};
template <> struct is_narrow<f8e4m3> : std::true_type {};
template <> struct is_narrow<f8e5m2> : std::true_type {};
template <class T> inline constexpr bool is_narrow_v = is_narrow<T>::value;

// Arithmetic happens in compute_t: float for the narrow float types.
template <class T> using compute_t = std::conditional_t<is_narrow_v<T>, float, T>;

template <class T> inline constexpr bool is_float_v = std::is_floating_point_v<compute_t<T>>;
template <class T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <class T>
ON_INLINE compute_t<T> load(const T* p) {
  if constexpr (std::is_same_v<T, bf16>) return bf16_to_f32(p->x);
  else if constexpr (std::is_same_v<T, f16>) return f16_to_f32(p->x);
  else if constexpr (std::is_same_v<T, f8e4m3>) return f8e4m3_to_f32(p->x);
  else if constexpr (std::is_same_v<T, f8e5m2>) return f8e5m2_to_f32(p->x);
  else if constexpr (std::is_same_v<T, bool>) {
    // Bytes other than 0/1 must not be read as bool (UB); any nonzero is true.
    uint8_t v;
    std::memcpy(&v, p, 1);
    return v != 0;
  } else return *p;
}

template <class T>
ON_INLINE void store(T* p, compute_t<T> v) {
  if constexpr (std::is_same_v<T, bf16>) p->x = f32_to_bf16(v);
  else if constexpr (std::is_same_v<T, f16>) p->x = f32_to_f16(v);
  else if constexpr (std::is_same_v<T, f8e4m3>) p->x = f32_to_f8e4m3(v);
  else if constexpr (std::is_same_v<T, f8e5m2>) p->x = f32_to_f8e5m2(v);
  else *p = v;
}

// An unsigned word of S bytes: elements moved as bits.
template <size_t S> struct raw_bits;
template <> struct raw_bits<1> { using type = uint8_t; };
template <> struct raw_bits<2> { using type = uint16_t; };
template <> struct raw_bits<4> { using type = uint32_t; };
template <> struct raw_bits<8> { using type = uint64_t; };

// v rounded to storage type T and back: an intermediate kept in T, as a CPU kernel does.
template <class T>
ON_INLINE compute_t<T> round_to(compute_t<T> v) {
  T t;
  store(&t, v);
  return load(&t);
}

// Value conversion between compute types (and double, for scalars) with
// c10::convert's semantics: to bool is != 0, float to uint8 goes through int64.
template <class To, class From>
ON_INLINE To cvt(From v) {
  if constexpr (std::is_same_v<To, From>) return v;
  else if constexpr (std::is_same_v<To, bool>) return v != From(0);
  else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if constexpr (sizeof(To) == 8) {
      return static_cast<To>(v);
    } else if constexpr (std::is_unsigned_v<To>) {
      return static_cast<To>(static_cast<int64_t>(v));
    } else {
      // Through int32, as the CPU's kernels compile it (cvttss2si): out of range gives
      // INT32_MIN, then narrowed.
      const bool in_range = v >= From(-2147483648.0) && v < From(2147483648.0);
      return static_cast<To>(in_range ? static_cast<int32_t>(v)
                                      : std::numeric_limits<int32_t>::min());
    }
  } else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, double>) {
    return static_cast<float>(v);
  } else return static_cast<To>(v);
}

// Stores a compute value of any type into storage type T.
template <class T, class V>
ON_INLINE void store_cvt(T* p, V v) { store(p, cvt<compute_t<T>>(v)); }

// ------------------------------------------------------------ dispatch

template <class T> struct tag { using type = T; };

template <class F>
inline auto visit(DType d, F&& f) {
  switch (d) {
    case DType::Bool: return f(tag<bool>{});
    case DType::UInt8: return f(tag<uint8_t>{});
    case DType::Int8: return f(tag<int8_t>{});
    case DType::Int16: return f(tag<int16_t>{});
    case DType::Int32: return f(tag<int32_t>{});
    case DType::Int64: return f(tag<int64_t>{});
    case DType::Float16: return f(tag<f16>{});
    case DType::BFloat16: return f(tag<bf16>{});
    case DType::Float32: return f(tag<float>{});
    case DType::Float64: return f(tag<double>{});
    case DType::Complex64: return f(tag<c64>{});
    case DType::Float8E4M3: return f(tag<f8e4m3>{});
    case DType::Float8E5M2: return f(tag<f8e5m2>{});
  }
  return f(tag<void>{});
}

// A row of n elements as floats, and back (one rounding per stored value).
template <class T>
inline void load_row(float* dst, const T* src, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(load(src + j));
}
template <class T>
inline void store_row(T* dst, const float* src, int64_t n) {
  for (int64_t j = 0; j < n; ++j) store(dst + j, src[j]);
}

// The nine element types the vector engines compute on.
template <class T>
inline constexpr bool is_real9_v =
    std::is_same_v<T, bool> || std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t> ||
    std::is_same_v<T, int16_t> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
    std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, float>;
template <class T>
inline constexpr bool is_float3_v =
    std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, float>;
template <class T>
inline constexpr bool is_fp8_v = std::is_same_v<T, f8e4m3> || std::is_same_v<T, f8e5m2>;

}  // namespace openneuron::kernels::detail
