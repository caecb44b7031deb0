// Float32 GEMM through BLIS (single-threaded build), spread over our own pool, where
// BLIS has kernels for the CPU (else oneDNN: blis_knows_this_cpu).
//
// Why BLIS and why our pool: on AVX2 hosts the single-threaded BLIS kernels
// (runtime-dispatched per CPU family, e.g. zen3) reach ~90 GFLOP/s per core
// where oneDNN 2.6's jit sgemm reaches ~45. Threading it ourselves keeps every
// core on the pool PyTorch-style work already uses: no second team of library
// threads that wakes on each call or spins after it, stealing the cores from
// whatever runs next.
#include "gemm_blis.h"

#include <blis.h>

#include <algorithm>
#include <vector>

#include "parallel.h"

namespace openneuron::kernels::detail {
namespace {

// Below this many multiply-adds a second thread costs more than it saves.
constexpr int64_t kParallelMacs = int64_t{1} << 21;

// BLIS accepts a matrix whose elements are unit-stride along rows or along
// columns with a leading dimension that keeps rows (columns) apart. Strides of
// extent-1 dims are free in PyTorch; they are normalised to what BLIS expects.
bool blis_layout(int64_t rows, int64_t cols, int64_t& rs, int64_t& cs) {
  if (rows == 1 && cols == 1) {
    rs = cs = 1;
    return true;
  }
  if (rows == 1) rs = cs == 1 ? cols : 1;
  if (cols == 1) cs = rs == 1 ? rows : 1;
  if (cs == 1) return rs >= cols;
  if (rs == 1) return cs >= rows;
  return false;
}

struct Plan {
  int64_t rs[3], cs[3];  // a, b, c
  int64_t splits;        // blocks per batch item
  bool split_rows;       // blocks are row blocks of C (else column blocks)
};

// BLIS's small/unpacked ("sup") path wins for skinny or short-K problems and
// loses clearly for mid-size ones (32x3072x768: 4.9 vs 2.9 ms on zen3).
bool wants_packed(int64_t m, int64_t n, int64_t k) { return m >= 32 && n >= 128 && k >= 128; }

// C (m x n, strides rc, cc) = alpha A B + beta C for A, B at the given offsets.
void sgemm(const Plan& pl, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
           float* c, int64_t rc, int64_t cc, float alpha, float beta) {
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  if (wants_packed(m, n, k)) bli_rntm_disable_l3_sup(&rntm);
  bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, const_cast<float*>(a),
               pl.rs[0], pl.cs[0], const_cast<float*>(b), pl.rs[1], pl.cs[1], &beta, c, rc, cc,
               nullptr, &rntm);
}

void run_block(const GemmParams& p, const Plan& pl, char* a, char* b, char* c, int64_t m0, int64_t m1,
               int64_t n0, int64_t n1, float alpha, float beta) {
  const int64_t m = m1 - m0, n = n1 - n0;
  const float* ap = reinterpret_cast<float*>(a) + m0 * pl.rs[0];
  const float* bp = reinterpret_cast<float*>(b) + n0 * pl.cs[1];
  float* cp = reinterpret_cast<float*>(c) + m0 * pl.rs[2] + n0 * pl.cs[2];
  // BLIS 0.9's AVX2 sup kernels (haswell, zen*) skip a zero of B in the
  // single-column edge of an odd-width C, so the NaN of inf * 0 is lost there
  // (BLAS gemv skips zeros the same way); even widths are right. So an odd
  // width runs its even part in place and its last two columns into a
  // two-column copy of C, of which the last goes back. (C arrives row-stored:
  // lower_mm.cpp gives other layouts a temporary.)
  if (n >= 3 && n % 2 == 1 && !wants_packed(m, n, p.k)) {
    sgemm(pl, m, n - 1, p.k, ap, bp, cp, pl.rs[2], pl.cs[2], alpha, beta);
    float* last = cp + (n - 1) * pl.cs[2];
    std::vector<float> pair(static_cast<size_t>(2 * m));
    for (int64_t i = 0; i < m; ++i) pair[2 * i + 1] = last[i * pl.rs[2]];
    sgemm(pl, m, 2, p.k, ap, bp + (n - 2) * pl.cs[1], pair.data(), 2, 1, alpha, beta);
    for (int64_t i = 0; i < m; ++i) last[i * pl.rs[2]] = pair[2 * i + 1];
    return;
  }
  sgemm(pl, m, n, p.k, ap, bp, cp, pl.rs[2], pl.cs[2], alpha, beta);
}

// BLIS picks its kernels by CPU family and model. A CPU it does not recognise (a virtual
// machine that hides them, e.g. "AMD EPYC" with AVX-512) gets its generic reference
// kernels, several times slower than oneDNN's, which dispatch on instruction sets: there
// float32 goes to oneDNN too.
bool blis_knows_this_cpu() {
  static const bool known = [] {
    bli_init();  // the kernel structure first: BLIS_ARCH_TYPE is checked against it
    return bli_arch_query_id() != BLIS_ARCH_GENERIC;
  }();
  return known;
}

}  // namespace

bool blis_gemm(const GemmParams& p, const onrt_arg* args, float alpha, float beta) {
  if (p.dtype != DType::Float32 || !blis_knows_this_cpu()) return false;
  Plan pl;
  const int64_t dims[3][2] = {{p.m, p.k}, {p.k, p.n}, {p.m, p.n}};
  const int64_t* st[3] = {p.a_strides, p.b_strides, p.c_strides};
  for (int i = 0; i < 3; ++i) {
    pl.rs[i] = st[i][1];
    pl.cs[i] = st[i][2];
    if (!blis_layout(dims[i][0], dims[i][1], pl.rs[i], pl.cs[i])) return false;
  }
  char* a = p.a.resolve(args);
  char* b = p.b.resolve(args);
  char* c = p.c.resolve(args);
  const int threads = pool_threads();
  const bool parallel = threads > 1 && p.batch * p.m * p.n * p.k >= kParallelMacs;
  // Batches first (each thread then packs only its own operands); a batch too
  // small to feed every thread is cut into row blocks, or column blocks when
  // C is short and wide.
  pl.splits = parallel && p.batch < threads ? (threads + p.batch - 1) / p.batch : 1;
  pl.split_rows = p.m >= 32 * pl.splits || p.m >= p.n;
  const int64_t extent = pl.split_rows ? p.m : p.n;
  pl.splits = std::max<int64_t>(1, std::min(pl.splits, extent));
  const int64_t units = p.batch * pl.splits;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t bi = u / pl.splits, s = u % pl.splits;
      const int64_t lo = s * extent / pl.splits, hi = (s + 1) * extent / pl.splits;
      char* ab = a + bi * p.a_strides[0] * int64_t{sizeof(float)};
      char* bb = b + bi * p.b_strides[0] * int64_t{sizeof(float)};
      char* cb = c + bi * p.c_strides[0] * int64_t{sizeof(float)};
      if (pl.split_rows)
        run_block(p, pl, ab, bb, cb, lo, hi, 0, p.n, alpha, beta);
      else
        run_block(p, pl, ab, bb, cb, 0, p.m, lo, hi, alpha, beta);
    }
  };
  if (parallel && units > 1)
    run_chunks(units, std::min<int64_t>(units, threads), RangeFn(body));
  else
    body(0, units);
  return true;
}

}  // namespace openneuron::kernels::detail
