// The tensor engine: GEMM through well-kept libraries (never a hand-written
// GEMM). Float32 in BLIS-compatible layouts goes to BLIS (gemm_blis.cpp) on a CPU
// BLIS has kernels for; the half types, any other layout and float32 on other
// CPUs to oneDNN's matmul primitive, kept in the
// oneDNN primitive cache (dnnl_context.h) keyed by everything that shapes it.
// oneDNN runs on the calling thread only: a large problem is cut into one part
// per thread of our pool. An OpenMP team of oneDNN's own would keep spinning for
// milliseconds after each GEMM, on the cores the pool's next kernels need.
#include <dnnl.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "dnnl_context.h"
#include "error.h"
#include "gemm_blis.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"

namespace openneuron::kernels {
namespace detail {
namespace {

struct Key {
  DType dt;
  float beta;
  bool scaled;
  int64_t dims[4];  // batch, m, n, k
  int64_t st[9];
};

struct Prim : DnnlPrimitive {
  dnnl_memory_t src = nullptr, wei = nullptr, dst = nullptr, scale = nullptr;
  float scale_value = 1.0f;
  ~Prim() override {
    for (dnnl_memory_t m : {src, wei, dst, scale})
      if (m) dnnl_memory_destroy(m);
  }
};

// Builds the matmul primitive and its reusable memory objects.
std::unique_ptr<Prim> build(const Key& k) {
  auto p = std::make_unique<Prim>();
  dnnl_engine_t eng = dnnl_cpu_engine();
  if (!eng) {
    p->error = "oneDNN CPU engine unavailable";
    return p;
  }
  const dnnl_data_type_t dt = dnnl_type(k.dt);
  const int64_t B = k.dims[0], M = k.dims[1], N = k.dims[2], K = k.dims[3];
  dnnl_memory_desc_t a_md, b_md, c_md;
  const dnnl_dims_t a_dims = {B, M, K}, b_dims = {B, K, N}, c_dims = {B, M, N};
  const dnnl_dims_t a_st = {k.st[0], k.st[1], k.st[2]}, b_st = {k.st[3], k.st[4], k.st[5]},
                    c_st = {k.st[6], k.st[7], k.st[8]};
  dnnl_status_t s;
  if ((s = dnnl_memory_desc_init_by_strides(&a_md, 3, a_dims, dt, a_st)) != dnnl_success ||
      (s = dnnl_memory_desc_init_by_strides(&b_md, 3, b_dims, dt, b_st)) != dnnl_success ||
      (s = dnnl_memory_desc_init_by_strides(&c_md, 3, c_dims, dt, c_st)) != dnnl_success) {
    p->error = "memory descriptor: " + dnnl_status_str(s);
    return p;
  }
  dnnl_matmul_desc_t md;
  if ((s = dnnl_matmul_desc_init(&md, &a_md, &b_md, nullptr, &c_md)) != dnnl_success) {
    p->error = "matmul descriptor: " + dnnl_status_str(s);
    return p;
  }
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_attr_create(&attr);
  dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (k.scaled) {
    const float rt = DNNL_RUNTIME_F32_VAL;
    dnnl_primitive_attr_set_output_scales(attr, 1, 0, &rt);
  }
  dnnl_post_ops_t po = nullptr;
  if (k.beta != 0.0f) {
    dnnl_post_ops_create(&po);
    dnnl_post_ops_append_sum(po, k.beta);
    dnnl_primitive_attr_set_post_ops(attr, po);
  }
  dnnl_primitive_desc_t pd = nullptr;
  s = dnnl_primitive_desc_create(&pd, &md, attr, eng, nullptr);
  if (po) dnnl_post_ops_destroy(po);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) {
    p->error = std::string("no oneDNN matmul for this ") + dtype_name(k.dt) + " problem (" +
               dnnl_status_str(s) + ")";
    return p;
  }
  s = p->create(pd, eng);
  dnnl_primitive_desc_destroy(pd);
  if (s != dnnl_success) {
    p->error = "matmul primitive: " + dnnl_status_str(s);
    return p;
  }
  dnnl_memory_create(&p->src, &a_md, eng, DNNL_MEMORY_NONE);
  dnnl_memory_create(&p->wei, &b_md, eng, DNNL_MEMORY_NONE);
  dnnl_memory_create(&p->dst, &c_md, eng, DNNL_MEMORY_NONE);
  if (k.scaled) {
    dnnl_memory_desc_t s_md;
    const dnnl_dims_t one = {1};
    dnnl_memory_desc_init_by_tag(&s_md, 1, one, dnnl_f32, dnnl_a);
    dnnl_memory_create(&p->scale, &s_md, eng, &p->scale_value);
  }
  return p;
}

template <class T>
int gemm_k0(const GemmParams& p, const onrt_arg* args, double beta) {
  // K == 0: the product is zero; C = beta * C (C untouched by NaN when beta == 0).
  char* c = p.c.resolve(args);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        T* e = reinterpret_cast<T*>(c) + b * p.c_strides[0] + i * p.c_strides[1] + j * p.c_strides[2];
        const float v = beta == 0.0 ? 0.0f : static_cast<float>(beta) * static_cast<float>(load(e));
        store(e, v);
      }
  return 0;
}

// oneDNN 2.6's bf16 matmul pads an odd K itself, in some layouts and attribute sets (a
// strided or gapped operand; a column-major one with alpha and beta) with a copy of the
// last K element times zero: an inf there became NaN where the sum is inf. With an odd K
// both operands are packed row-major with a zero appended to K (into `buf`; strides and
// pointer updated), so the library sees an even K and 0 * 0 adds nothing.
const char* pack_bf16_even_k(const char* src, int64_t st[3], int64_t batch, int64_t rows,
                             int64_t cols, bool pad_cols, std::vector<bf16>& buf) {
  const int64_t r = rows + (pad_cols ? 0 : 1), c = cols + (pad_cols ? 1 : 0);
  const int64_t copies = st[0] == 0 ? 1 : batch;  // one matrix broadcast over the batch
  buf.assign(static_cast<size_t>(copies * r * c), bf16{});
  const bf16* in = reinterpret_cast<const bf16*>(src);
  for (int64_t b = 0; b < copies; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        buf[static_cast<size_t>((b * r + i) * c + j)] = in[b * st[0] + i * st[1] + j * st[2]];
  st[0] = copies == 1 && batch > 1 ? 0 : r * c;
  st[1] = c;
  st[2] = 1;
  return reinterpret_cast<const char*>(buf.data());
}

// A oneDNN matmul problem: C[b] = alpha * A[b] B[b] + beta * C[b] over
// dims {batch, m, n, k}, strides {A: batch, row, col; B: ...; C: ...} in elements.
struct GemmProblem {
  DType dt;
  float alpha, beta;
  int64_t dims[4];
  int64_t st[9];
  const char *a, *b;
  char* c;
};

// Part i of `parts` of the problem: a range of batches when there are enough,
// else of rows or columns, whichever is longer (columns cut at multiples of 16, a
// vector of floats). The parts' outputs are disjoint.
GemmProblem part_of(const GemmProblem& w, int i, int parts) {
  GemmProblem q = w;
  const size_t es = dtype_size(w.dt);
  int axis = w.dims[0] >= parts ? 0 : (w.dims[1] >= w.dims[2] ? 1 : 2);
  const int64_t len = w.dims[axis], unit = axis == 2 ? 16 : 1;
  const int64_t units = (len + unit - 1) / unit;
  const int64_t lo = std::min(len, units * i / parts * unit);
  const int64_t hi = std::min(len, units * (i + 1) / parts * unit);
  q.dims[axis] = hi - lo;
  // A moves with batches and rows, B with batches and columns, C with all three.
  if (axis != 2) q.a = w.a + es * lo * w.st[axis];
  if (axis != 1) q.b = w.b + es * lo * w.st[axis == 0 ? 3 : 5];
  q.c = w.c + es * lo * w.st[6 + axis];
  return q;
}

// Runs one problem on the calling thread; an error message, or empty.
std::string run_part(const GemmProblem& g) {
  if (g.dims[0] == 0 || g.dims[1] == 0 || g.dims[2] == 0) return {};
  Key key;
  std::memset(&key, 0, sizeof key);
  key.dt = g.dt;
  key.beta = g.beta;
  key.scaled = g.alpha != 1.0f;
  std::memcpy(key.dims, g.dims, sizeof key.dims);
  std::memcpy(key.st, g.st, sizeof key.st);
  Prim& pr = cached_primitive(DnnlPrimitiveKind::Matmul, key, &build);
  if (!pr.prim) return pr.error;
  dnnl_memory_set_data_handle(pr.src, const_cast<char*>(g.a));
  dnnl_memory_set_data_handle(pr.wei, const_cast<char*>(g.b));
  dnnl_memory_set_data_handle(pr.dst, g.c);
  dnnl_exec_arg_t ex[6];
  int n = 0;
  ex[n++] = {DNNL_ARG_SRC, pr.src};
  ex[n++] = {DNNL_ARG_WEIGHTS, pr.wei};
  ex[n++] = {DNNL_ARG_DST, pr.dst};
  if (pr.scale) {
    pr.scale_value = g.alpha;
    ex[n++] = {DNNL_ARG_ATTR_OUTPUT_SCALES, pr.scale};
  }
  if (pr.scratch) ex[n++] = {DNNL_ARG_SCRATCHPAD, pr.scratch};
  dnnl_status_t s = dnnl_primitive_execute(pr.prim, dnnl_thread_stream(), n, ex);
  if (s == dnnl_success) s = dnnl_stream_wait(dnnl_thread_stream());
  if (s != dnnl_success)
    return "oneDNN execution failed (status " + std::to_string(static_cast<int>(s)) + ")";
  return {};
}

int gemm_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const GemmParams*>(params);
  if (p.batch == 0 || p.m == 0 || p.n == 0) return 0;
  const double alpha = p.alpha.as_double(args);
  const double beta = p.beta.as_double(args);
  if (p.k == 0) {
    switch (p.dtype) {
      case DType::Float32: return gemm_k0<float>(p, args, beta);
      case DType::BFloat16: return gemm_k0<bf16>(p, args, beta);
      case DType::Float16: return gemm_k0<f16>(p, args, beta);
      default: return fail(err, errlen, "gemm: unsupported dtype");
    }
  }
  if (blis_gemm(p, args, static_cast<float>(alpha), static_cast<float>(beta))) return 0;
  int64_t a_st[3] = {p.a_strides[0], p.a_strides[1], p.a_strides[2]};
  int64_t b_st[3] = {p.b_strides[0], p.b_strides[1], p.b_strides[2]};
  const char* a = p.a.resolve(args);
  const char* b = p.b.resolve(args);
  std::vector<bf16> a_buf, b_buf;
  int64_t k = p.k;
  if (p.dtype == DType::BFloat16 && k % 2 == 1) {
    a = pack_bf16_even_k(a, a_st, p.batch, p.m, k, /*pad_cols=*/true, a_buf);
    b = pack_bf16_even_k(b, b_st, p.batch, k, p.n, /*pad_cols=*/false, b_buf);
    ++k;
  }
  const GemmProblem whole{p.dtype,
                          static_cast<float>(alpha),
                          static_cast<float>(beta),
                          {p.batch, p.m, p.n, k},
                          {a_st[0], a_st[1], a_st[2], b_st[0], b_st[1], b_st[2], p.c_strides[0],
                           p.c_strides[1], p.c_strides[2]},
                          a,
                          b,
                          p.c.resolve(args)};
  const double flops = 2.0 * static_cast<double>(p.batch) * p.m * p.n * k;
  const int parts =
      flops < kDnnlSerialFlops ? 1 : static_cast<int>(std::min<int64_t>(pool_threads(), 64));
  if (parts <= 1) {
    const DnnlTeamFor one_thread;
    const std::string e = run_part(whole);
    return e.empty() ? 0 : fail(err, errlen, "gemm: %s", e.c_str());
  }
  std::string errors[64];
  auto range = [&](int64_t i0, int64_t i1) {
    const DnnlTeamFor one_thread;
    for (int64_t i = i0; i < i1; ++i)
      errors[i] = run_part(part_of(whole, static_cast<int>(i), parts));
  };
  run_chunks(parts, parts, RangeFn(range));
  for (int i = 0; i < parts; ++i)
    if (!errors[i].empty()) return fail(err, errlen, "gemm: %s", errors[i].c_str());
  return 0;
}

}  // namespace
}  // namespace detail

onrt_kernel_fn gemm_kernel(DType dtype) {
  switch (dtype) {
    case DType::Float32: case DType::BFloat16: case DType::Float16: return &detail::gemm_entry;
    default: return nullptr;
  }
}

bool gemm_native(DType dtype) {
  using namespace detail;
  if (dnnl_type(dtype) == dnnl_data_type_undef) return false;
  // Without AVX512_BF16, oneDNN 2.6 emulates bf16 on AVX-512 hosts and pads an
  // odd K with zeros, so inf * 0 made NaN where the sum is inf. Float32 (what
  // AVX2 hosts run) is exact for bf16 operands.
  const dnnl_cpu_isa_t bf16_isa = dnnl_cpu_isa_avx512_core_bf16;
  if (dtype == DType::BFloat16 && (dnnl_get_effective_cpu_isa() & bf16_isa) != bf16_isa)
    return false;
  static std::mutex mu;
  static std::unordered_map<int, bool> known;
  std::lock_guard<std::mutex> lk(mu);
  auto it = known.find(static_cast<int>(dtype));
  if (it != known.end()) return it->second;
  Key k;
  std::memset(&k, 0, sizeof k);
  k.dt = dtype;
  const int64_t st[9] = {64, 8, 1, 64, 8, 1, 64, 8, 1};
  k.dims[0] = 1; k.dims[1] = 8; k.dims[2] = 8; k.dims[3] = 8;
  std::memcpy(k.st, st, sizeof st);
  const bool ok = build(k)->prim != nullptr;
  known[static_cast<int>(dtype)] = ok;
  return ok;
}

}  // namespace openneuron::kernels
