// Shared machinery of the engines: storage types, conversions with c10's
// semantics, dtype dispatch, the intra-op pool and the elementwise loop walker.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "openneuron/kernels/half.h"
#include "openneuron/kernels/kernels.h"
#include "openneuron/kernels/params.h"

// The per-element helpers and op functors must inline into the row loops for
// them to vectorise; GCC's unit-growth limits would otherwise stop inlining in
// the large kernel translation units.
#define ON_INLINE __attribute__((always_inline)) inline

namespace openneuron::kernels::detail {

// ------------------------------------------------------------ storage types

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
    if constexpr (sizeof(To) == 8) return static_cast<To>(v);
    else return static_cast<To>(static_cast<int64_t>(v));
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

// ------------------------------------------------------------ errors

inline int fail(char* err, size_t errlen, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
inline int fail(char* err, size_t errlen, const char* fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

// ------------------------------------------------------------ thread pool

// Non-owning callable reference: parallel regions pass lambdas without
// std::function's allocation.
class RangeFn {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cv_t<F>, RangeFn>)
  RangeFn(F& f) : obj_(&f), call_([](void* o, int64_t b, int64_t e) { (*static_cast<F*>(o))(b, e); }) {}
  void operator()(int64_t b, int64_t e) const { call_(obj_, b, e); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

// Elementwise work below ~32K elements stays on the calling thread.
inline constexpr int64_t kGrain = 16384;

int pool_threads();  // cached; cheap
// Runs fn over [0, n) in `chunks` contiguous pieces (chunk c covers
// [c*n/chunks, (c+1)*n/chunks)); pieces run concurrently when the pool is free.
void run_chunks(int64_t n, int64_t chunks, RangeFn fn);

// Splits [0, n) over the pool when each thread gets at least `grain` items,
// `pieces` contiguous pieces per thread. More than one piece lets a thread
// that finishes early take the last pieces of one the OS preempted; only for
// work whose result does not depend on where the pieces are cut.
template <class F>
inline void parallel_for(int64_t n, int64_t grain, F&& f, int pieces = 1) {
  if (n <= 0) return;
  const int64_t max_chunks = n / std::max<int64_t>(grain, 1);
  const int threads = max_chunks >= 2 ? pool_threads() : 1;
  const int64_t chunks = std::min<int64_t>(threads > 1 ? int64_t{threads} * pieces : 1, max_chunks);
  if (chunks <= 1) {
    f(int64_t{0}, n);
    return;
  }
  run_chunks(n, chunks, RangeFn(f));
}

// ------------------------------------------------------------ loop walker

// Calls row(ptrs, n) for each run of the innermost plan dim in [begin, end) of
// the plan's linear index space; ptrs[k] points at operand k's first element.
template <int N, class Row>
inline void walk_range(const LoopPlan& p, char* const* base, int64_t begin, int64_t end,
                       Row& row) {
  if (p.ndim <= 1) {
    char* ptr[N];
    for (int k = 0; k < N; ++k) ptr[k] = base[k] + begin * p.strides[k][0];
    row(ptr, end - begin);
    return;
  }
  int64_t idx[kMaxDims];
  char* rowp[N];
  int64_t rem = begin;
  const int64_t i0 = rem % p.sizes[0];
  rem /= p.sizes[0];
  for (int k = 0; k < N; ++k) rowp[k] = base[k];
  for (int d = 1; d < p.ndim; ++d) {
    idx[d] = rem % p.sizes[d];
    rem /= p.sizes[d];
    for (int k = 0; k < N; ++k) rowp[k] += idx[d] * p.strides[k][d];
  }
  int64_t left = end - begin;
  int64_t start = i0;
  char* ptr[N];
  while (true) {
    const int64_t n = std::min(p.sizes[0] - start, left);
    for (int k = 0; k < N; ++k) ptr[k] = rowp[k] + start * p.strides[k][0];
    row(ptr, n);
    left -= n;
    if (left <= 0) break;
    start = 0;
    for (int d = 1; d < p.ndim; ++d) {
      for (int k = 0; k < N; ++k) rowp[k] += p.strides[k][d];
      if (++idx[d] < p.sizes[d]) break;
      for (int k = 0; k < N; ++k) rowp[k] -= p.strides[k][d] * p.sizes[d];
      idx[d] = 0;
    }
  }
}

// Elementwise work on 2 cores shares them with the thread issuing the next op:
// a few pieces per thread keep a preempted thread's share from holding the op.
inline constexpr int kElementwisePieces = 4;

template <int N, class Row>
inline void walk(const LoopPlan& p, char* const* base, Row&& row) {
  auto body = [&](int64_t b, int64_t e) { walk_range<N>(p, base, b, e, row); };
  parallel_for(p.numel, kGrain, body, kElementwisePieces);
}

// Tiled variant for layouts where an input is contiguous along plan dim 1
// while the output is along dim 0 (transposes): rows of kTile0 elements over
// bands of kTile1 rows, so each input cache line is reused from L1.
inline constexpr int64_t kTile0 = 64, kTile1 = 16;

template <int N>
inline bool wants_tiles(const LoopPlan& p) {
  if (p.ndim < 2 || p.sizes[0] < kTile0 / 4 || p.sizes[1] < 4) return false;
  for (int k = 1; k < N; ++k) {
    const int64_t a = p.strides[k][0] < 0 ? -p.strides[k][0] : p.strides[k][0];
    const int64_t b = p.strides[k][1] < 0 ? -p.strides[k][1] : p.strides[k][1];
    if (b != 0 && a > b) return true;
  }
  return false;
}

template <int N, class Row>
inline void walk_tiled(const LoopPlan& p, char* const* base, Row& row) {
  const int64_t s0 = p.sizes[0], s1 = p.sizes[1];
  const int64_t bands = (s1 + kTile1 - 1) / kTile1;
  const int64_t outer = p.numel / (s0 * s1);
  auto body = [&](int64_t tb, int64_t te) {
    char* ptr[N];
    for (int64_t t = tb; t < te; ++t) {
      const int64_t band = t % bands;
      int64_t rem = t / bands;
      char* ob[N];
      for (int k = 0; k < N; ++k) ob[k] = base[k];
      for (int d = 2; d < p.ndim; ++d) {
        const int64_t x = rem % p.sizes[d];
        rem /= p.sizes[d];
        for (int k = 0; k < N; ++k) ob[k] += x * p.strides[k][d];
      }
      const int64_t j_end = std::min(s1, (band + 1) * kTile1);
      for (int64_t i0 = 0; i0 < s0; i0 += kTile0) {
        const int64_t n = std::min(kTile0, s0 - i0);
        for (int64_t j = band * kTile1; j < j_end; ++j) {
          for (int k = 0; k < N; ++k) ptr[k] = ob[k] + i0 * p.strides[k][0] + j * p.strides[k][1];
          row(ptr, n);
        }
      }
    }
  };
  parallel_for(outer * bands, std::max<int64_t>(1, kGrain / (s0 * kTile1)), body);
}

// ------------------------------------------------------------ elementwise engine

// Row loops over one output type, input storage types In..., and a functor on
// compute values. Bit I of M marks input I as constant along the row (a scalar
// or an inner-stride-0 tensor): its value comes from bv and is loaded once.
template <class T>
using cval_t = compute_t<T>;

template <unsigned M, size_t I, class T>
ON_INLINE cval_t<T> pick_c(const T* p, int64_t j, cval_t<T> b) {
  if constexpr ((M >> I) & 1u) return b;
  else return load(p + j);
}

template <unsigned M, class OutT, class F, class... In, size_t... I>
inline void row_contig(char* const* ptr, int64_t n, const F& f,
                       const std::tuple<cval_t<In>...>& bv, std::index_sequence<I...>) {
  OutT* out = reinterpret_cast<OutT*>(ptr[0]);
  const std::tuple<const In*...> in{reinterpret_cast<const In*>(ptr[I + 1])...};
  // Outputs either alias an input exactly (in-place) or not at all, so there
  // is no loop-carried dependence.
#pragma GCC ivdep
  for (int64_t j = 0; j < n; ++j)
    store_cvt(out + j, f(pick_c<M, I>(std::get<I>(in), j, std::get<I>(bv))...));
}

// The general path: any strides; broadcast inputs chosen at run time.
template <class OutT, class F, class... In, size_t... I>
inline void row_strided(char* const* ptr, const int64_t* s, int64_t n, const F& f,
                        const std::tuple<cval_t<In>...>& bv, unsigned mask,
                        std::index_sequence<I...>) {
  char* out = ptr[0];
  const int64_t so = s[0];
  for (int64_t j = 0; j < n; ++j)
    store_cvt(reinterpret_cast<OutT*>(out + j * so),
              f(((mask >> I) & 1u ? std::get<I>(bv)
                                  : load(reinterpret_cast<const In*>(ptr[I + 1] + j * s[I + 1])))...));
}

// Runs `f` elementwise over the plan. Scalar inputs arrive as compute values
// in `scal` (ops[k+1].kind == Scalar): they are never rounded to the tensor
// dtype, as in PyTorch's opmath. Tensors are read from the launch args.
template <class OutT, class F, class... In>
struct Elementwise {
  static constexpr int NIN = sizeof...(In);
  static constexpr int N = NIN + 1;
  using BV = std::tuple<cval_t<In>...>;
  using Seq = std::index_sequence_for<In...>;

  template <size_t... I>
  static void refresh(BV& bv, char* const* ptr, unsigned tensor_bcast, std::index_sequence<I...>) {
    (((tensor_bcast >> I) & 1u
          ? (void)(std::get<I>(bv) = load(reinterpret_cast<const In*>(ptr[I + 1])))
          : (void)0),
     ...);
  }

  template <unsigned M>
  static void run_contig(const LoopPlan& plan, char* const* base, const BV& scal,
                         unsigned tensor_bcast, const F& f) {
    auto row = [&](char* const* ptr, int64_t n) {
      BV bv = scal;
      if (M) refresh(bv, ptr, tensor_bcast, Seq{});
      row_contig<M, OutT, F, In...>(ptr, n, f, bv, Seq{});
    };
    walk<N>(plan, base, row);
  }

  template <unsigned... Ms>
  static void dispatch(unsigned mask, const LoopPlan& plan, char* const* base, const BV& scal,
                       unsigned tensor_bcast, const F& f, std::integer_sequence<unsigned, Ms...>) {
    ((mask == Ms ? run_contig<Ms>(plan, base, scal, tensor_bcast, f) : (void)0), ...);
  }

  static void run(const ElementwiseParams& p, const onrt_arg* args, const BV& scal, const F& f) {
    const LoopPlan& plan = p.plan;
    if (plan.numel <= 0) return;
    char* base[N];
    static char dummy[16];
    base[0] = static_cast<char*>(args[p.ops[0].slot].ptr) + p.ops[0].byte_offset;
    unsigned mask = 0, tensor_bcast = 0;
    bool contig = plan.strides[0][0] == static_cast<int64_t>(sizeof(OutT));
    constexpr int64_t elem[N] = {static_cast<int64_t>(sizeof(OutT)),
                                 static_cast<int64_t>(sizeof(In))...};
    for (int k = 0; k < NIN; ++k) {
      const Operand& o = p.ops[k + 1];
      const int64_t st = plan.strides[k + 1][0];
      if (o.kind == Operand::Tensor) {
        base[k + 1] = static_cast<char*>(args[o.slot].ptr) + o.byte_offset;
        if (st == 0) tensor_bcast |= 1u << k;
      } else {
        base[k + 1] = dummy;
      }
      if (st == 0) mask |= 1u << k;
      else if (st != elem[k + 1]) contig = false;
    }
    if (contig) {
      dispatch(mask, plan, base, scal, tensor_bcast, f,
               std::make_integer_sequence<unsigned, (1u << NIN)>{});
      return;
    }
    int64_t s[N];
    for (int k = 0; k < N; ++k) s[k] = plan.strides[k][0];
    auto row = [&](char* const* ptr, int64_t n) {
      BV bv = scal;
      refresh(bv, ptr, tensor_bcast, Seq{});
      row_strided<OutT, F, In...>(ptr, s, n, f, bv, mask, Seq{});
    };
    if (wants_tiles<N>(plan)) walk_tiled<N>(plan, base, row);
    else walk<N>(plan, base, row);
  }
};

// Reads input k's scalar (if it is one) as compute type C.
template <class C>
inline C scalar_in(const ElementwiseParams& p, int k, const onrt_arg* args) {
  const Operand& o = p.ops[k + 1];
  if (o.kind != Operand::Scalar) return C{};
  if (o.scalar.is_float) return cvt<C>(o.scalar.as_double(args));
  return cvt<C>(o.scalar.as_int(args));
}
template <class C>
inline C coef(const ScalarArg& s, const onrt_arg* args) {
  if (s.is_float) return cvt<C>(s.as_double(args));
  return cvt<C>(s.as_int(args));
}

// Wrapping integer arithmetic (PyTorch wraps; signed overflow must not be UB).
template <class C>
using wide_unsigned_t = std::conditional_t<(sizeof(C) <= 4), uint32_t, uint64_t>;
template <class C> ON_INLINE C add_w(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) return a || b;
  else if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<wide_unsigned_t<C>>(a) + static_cast<wide_unsigned_t<C>>(b));
  else return a + b;
}
template <class C> ON_INLINE C sub_w(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) return a != b;
  else if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<wide_unsigned_t<C>>(a) - static_cast<wide_unsigned_t<C>>(b));
  else return a - b;
}
template <class C> ON_INLINE C mul_w(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) return a && b;
  else if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<wide_unsigned_t<C>>(a) * static_cast<wide_unsigned_t<C>>(b));
  else return a * b;
}
template <class C> ON_INLINE C neg_w(C a) { return sub_w<C>(C{}, a); }

// Element offsets of the row-major linear index `lin` over `n` dims in up to
// K layouts that share sizes (st[q] are the strides of layout q).
template <int K>
struct OffsetWalk {
  int n = 0;
  int64_t size[kMaxDims] = {}, st[K][kMaxDims] = {};
  void offsets(int64_t lin, int64_t* o, int k) const {
    for (int q = 0; q < k; ++q) o[q] = 0;
    for (int d = n - 1; d >= 0; --d) {
      const int64_t x = lin % size[d];
      lin /= size[d];
      for (int q = 0; q < k; ++q) o[q] += x * st[q][d];
    }
  }
};

// Eight floats / four doubles as one value: GCC lowers these to single ymm
// registers (two xmm without AVX), where its vectoriser, given 64-float arrays,
// spilled the block sums to the stack and folded them through memory.
using f32x8 = float __attribute__((vector_size(32)));
using f64x4 = double __attribute__((vector_size(32)));

template <class T>
ON_INLINE f32x8 load_f32x8(const T* p) {
  f32x8 v;
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(&v, p, sizeof v);
  } else {
    float f[8];
    for (int k = 0; k < 8; ++k) f[k] = static_cast<float>(load(p + k));
    std::memcpy(&v, f, sizeof v);
  }
  return v;
}

// Adds the leading whole blocks of 512 values into the L double lanes and
// returns how many values it consumed. 64 float lanes first add 8 values each,
// then fold pairwise down to L lanes, each a float sum of at most 11 additions
// deep (within 2^-20 relative of exact, far below a half type's rounding and
// the float32 tolerance of PyTorch's own cascade sum); only those L go into
// double. The double work drops to one vector add per block, and 64 float
// lanes are several independent vector add chains, so the loop runs at load
// speed instead of waiting on one chain's latency. The order is fixed: results
// do not depend on thread count. `value8(i)` gives the floats added for
// indices i..i+7 (x[i], (x[i] - m)^2, a[i] * b[i], ...).
template <int L, class F>
inline int64_t add_float_blocks_of(int64_t n, const F& value8, f64x4 (&acc)[L / 4]) {
  static_assert(L == 8 || L == 16);
  constexpr int V = 8, B = 8;  // 64 float lanes as 8 vectors; 8 values per lane
  int64_t j = 0;
  for (; j + V * 8 * B <= n; j += V * 8 * B) {
    f32x8 f[V];
    for (int k = 0; k < V; ++k) f[k] = value8(j + 8 * k);
    for (int b = 1; b < B; ++b)
      for (int k = 0; k < V; ++k) f[k] += value8(j + b * V * 8 + 8 * k);
    // Lane l += lane l + q for q = 32, 16 (and 8 when L = 8): vector adds.
    for (int k = 0; k < 4; ++k) f[k] += f[k + 4];
    for (int k = 0; k < 2; ++k) f[k] += f[k + 2];
    if constexpr (L == 8) f[0] += f[1];
    for (int k = 0; k < L / 8; ++k) {
      acc[2 * k] +=
          __builtin_convertvector(__builtin_shufflevector(f[k], f[k], 0, 1, 2, 3), f64x4);
      acc[2 * k + 1] +=
          __builtin_convertvector(__builtin_shufflevector(f[k], f[k], 4, 5, 6, 7), f64x4);
    }
  }
  return j;
}

// The same on double lanes in memory.
template <int L, class F>
inline int64_t add_float_blocks_of(int64_t n, const F& value8, double (&lanes)[L]) {
  f64x4 acc[L / 4];
  std::memcpy(acc, lanes, sizeof acc);
  const int64_t j = add_float_blocks_of<L>(n, value8, acc);
  std::memcpy(lanes, acc, sizeof acc);
  return j;
}

template <int L, class T>
inline int64_t add_float_blocks(const T* x, int64_t n, double (&lanes)[L]) {
  return add_float_blocks_of(n, [x](int64_t i) { return load_f32x8(x + i); }, lanes);
}

// Double sum of a contiguous row of float32/bfloat16/float16 in 16 lanes:
// 512-value float blocks, then 16 values at a time, the rest into lane 0, and
// the lanes folded pairwise (l += l + 8, + 4, + 2, + 1). Straight-line register
// code: per-row setup and folding through memory had cost a fifth of a
// 1024-value row.
template <class T>
inline double float_row_sum(const T* x, int64_t n) {
  f64x4 acc[4] = {};
  int64_t j = add_float_blocks_of<16>(n, [x](int64_t i) { return load_f32x8(x + i); }, acc);
  if (j < n) {  // tail: the same order on the lanes in memory
    double lanes[16];
    std::memcpy(lanes, acc, sizeof lanes);
    for (; j + 16 <= n; j += 16)
      for (int l = 0; l < 16; ++l) lanes[l] += static_cast<double>(load(x + j + l));
    for (; j < n; ++j) lanes[0] += static_cast<double>(load(x + j));
    std::memcpy(acc, lanes, sizeof lanes);
  }
  acc[0] += acc[2];
  acc[1] += acc[3];
  acc[0] += acc[1];
  return (acc[0][0] + acc[0][2]) + (acc[0][1] + acc[0][3]);
}

// Double sum of floats in 8 fixed lanes: vectorises, and the order does not
// depend on thread count.
inline double lane_sum8(const float* x, int64_t n) {
  double l[8] = {};
  int64_t j = add_float_blocks(x, n, l);
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) l[k] += x[j + k];
  for (; j < n; ++j) l[0] += x[j];
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

}  // namespace openneuron::kernels::detail
