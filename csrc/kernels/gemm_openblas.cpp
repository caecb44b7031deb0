// float32 GEMM through OpenBLAS (the scipy-openblas32 wheel, pinned in
// requirements/runtime.txt). On the hosts we measured it beats both oneDNN's
// sgemm and the MKL build inside PyTorch at transformer shapes, so float32
// takes it whenever each matrix is a plain row- or column-major view; other
// layouts and the half types stay with oneDNN (gemm.cpp).
#include <cblas.h>

#include <climits>

#include "internal.h"

namespace openneuron::kernels::detail {
namespace {

// A matrix with `rows` x `cols` elements at strides (rs, cs), as BLAS sees it:
// row-major with leading dim ld, transposed or not.
struct BlasView {
  bool ok = false;
  bool trans = false;  // stored column-major: BLAS reads it transposed
  int64_t ld = 0;
};

BlasView blas_view(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  BlasView v;
  // A dim of size 1 may carry any stride; treat it as the packed one.
  if (cols == 1) cs = 1;
  if (rows == 1) rs = std::max<int64_t>(cols, 1);
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) {
    v.ok = true;
    v.ld = rs;
  } else if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) {
    v.ok = true;
    v.trans = true;
    v.ld = cs;
  }
  v.ok = v.ok && v.ld <= INT_MAX;
  return v;
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

bool sgemm_openblas(const GemmParams& p, const onrt_arg* args, float alpha, float beta) {
  if (p.dtype != DType::Float32 || !fits_int(p.m) || !fits_int(p.n) || !fits_int(p.k)) return false;
  BlasView a = blas_view(p.m, p.k, p.a_strides[1], p.a_strides[2]);
  BlasView b = blas_view(p.k, p.n, p.b_strides[1], p.b_strides[2]);
  BlasView c = blas_view(p.m, p.n, p.c_strides[1], p.c_strides[2]);
  if (!a.ok || !b.ok || !c.ok) return false;
  const auto* pa = reinterpret_cast<const float*>(p.a.resolve(args));
  const auto* pb = reinterpret_cast<const float*>(p.b.resolve(args));
  auto* pc = reinterpret_cast<float*>(p.c.resolve(args));
  int m = static_cast<int>(p.m), n = static_cast<int>(p.n);
  // A column-major C is C^T = B^T A^T in row-major terms: swap the operands.
  if (c.trans) {
    std::swap(a, b);
    std::swap(pa, pb);
    std::swap(m, n);
    a.trans = !a.trans;
    b.trans = !b.trans;
  }
  const int64_t sa = c.trans ? p.b_strides[0] : p.a_strides[0];
  const int64_t sb = c.trans ? p.a_strides[0] : p.b_strides[0];
  const CBLAS_TRANSPOSE ta = a.trans ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = b.trans ? CblasTrans : CblasNoTrans;
  const int k = static_cast<int>(p.k);
  if (p.batch == 1) {
    scipy_cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, pa, static_cast<int>(a.ld), pb,
                      static_cast<int>(b.ld), beta, pc, static_cast<int>(c.ld));
    return true;
  }
  if (!fits_int(p.batch) || !fits_int(sa) || !fits_int(sb) || !fits_int(p.c_strides[0])) return false;
  scipy_cblas_sgemm_batch_strided(CblasRowMajor, ta, tb, m, n, k, alpha, pa, static_cast<int>(a.ld),
                                  static_cast<int>(sa), pb, static_cast<int>(b.ld), static_cast<int>(sb),
                                  beta, pc, static_cast<int>(c.ld), static_cast<int>(p.c_strides[0]),
                                  static_cast<int>(p.batch));
  return true;
}

}  // namespace openneuron::kernels::detail
