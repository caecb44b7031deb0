// The matrix engine: mm, addmm, addr and bmm (matmul and linear decompose into
// these). Each launches one compiler op of the mm family (lower_mm.cpp).
#include <ATen/ops/addr_native.h>

#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// ------------------------------------------------------------ matrix engine

void check_matmul_dtypes(const char* name, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "expected m1 and m2 to have the same dtype, but got: ", a.scalar_type(),
              " != ", b.scalar_type());
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  const c10::Device device = common_device("mm", {&a, &b});
  TORCH_CHECK(a.dim() == 2, "self must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x",
              a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  check_matmul_dtypes("mm", a, b);
  at::Tensor out = empty_device({a.size(0), b.size(1)}, a.scalar_type(), device);
  if (out.numel() == 0) return out;
  if (a.size(1) == 0) return out.zero_();
  launch(Op::Mm, {tensor_operand(a), tensor_operand(b)}, {tensor_operand(out)});
  return out;
}
// The result into a structured kernel's out=: same dtype (the CPU's message), resized.
at::Tensor& write_out(const at::Tensor& r, at::Tensor& out) {
  TORCH_CHECK(out.dtype() == r.dtype(), "Expected out tensor to have dtype ", r.dtype(),
              ", but got ", out.dtype(), " instead");
  at::native::resize_output(out, r.sizes());
  copy_on_device(out, r);
  return out;
}

at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return write_out(bridge::mm(a, b), out);
}

at::Tensor addmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  const c10::Device device = common_device("addmm", {&bias, &a, &b});
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "addmm: matrices expected, got ", a.dim(), "D, ",
              b.dim(), "D tensors");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x",
              a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  check_matmul_dtypes("addmm", a, b);
  const at::DimVector shape{a.size(0), b.size(1)};
  (void)bias.expand(shape);  // the CPU's check (and message), also when the product is empty
  at::Tensor out = empty_device(shape, a.scalar_type(), device);
  if (out.numel() == 0) return out;
  launch(Op::Addmm,
         {elementwise_operand(bias, a.scalar_type(), shape), tensor_operand(a), tensor_operand(b),
          float_operand(real_scalar(beta)), float_operand(real_scalar(alpha))},
         {tensor_operand(out)});
  return out;
}
at::Tensor& addmm_out(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                      const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  return write_out(bridge::addmm(bias, a, b, beta, alpha), out);
}
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor r = bridge::addmm(self, a, b, beta, alpha);
  copy_on_device(self, r);
  return self;
}

// addr: the CPU kernel (cpu/LinearAlgebraKernel.cpp addr_kernel) converts beta and alpha to
// the tensors' dtype and evaluates beta*self + (alpha*vec1)*vec2 in that dtype, every product
// and the sum rounded to it (self ignored when beta is 0). The composite math_addr rounds
// differently (alpha*(vec1*vec2), beta kept in double): in bfloat16 results differ by many ulps
// where the two terms cancel. Same sequence of device ops here, so same roundings.
at::Tensor addr(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                const at::Scalar& beta, const at::Scalar& alpha) {
  const c10::ScalarType dt = self.scalar_type();
  // Float32/64 go to BLAS ger on the CPU (different order, within tolerance): composite there.
  if (!at::isReducedFloatingType(dt) || vec1.scalar_type() != dt || vec2.scalar_type() != dt)
    return at::native::math_addr(self, vec1, vec2, beta, alpha);
  TORCH_CHECK(vec1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", vec1.dim(), "-D");
  TORCH_CHECK(vec2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  const c10::Device device = common_device("addr", {&self, &vec1, &vec2});
  const at::Tensor b = at::scalar_tensor(beta, at::TensorOptions().dtype(dt));  // rounded to dt
  const at::Tensor a = at::scalar_tensor(alpha, at::TensorOptions().dtype(dt));
  const at::Tensor prod = at::mul(at::mul(vec1, a.to(device)).unsqueeze(1), vec2);
  TORCH_CHECK(at::is_expandable_to(self.sizes(), prod.sizes()), "The expanded size of the tensor (",
              self.sizes(), ") must match the existing size ", prod.sizes());
  if (b.item().toComplexDouble() == 0.0) return prod;
  return at::add(at::mul(self, b.to(device)), prod);
}
at::Tensor& addr_out(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                     const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  at::Tensor r = bridge::addr(self, vec1, vec2, beta, alpha);
  TORCH_CHECK(at::canCast(r.scalar_type(), out.scalar_type()), "result type ", r.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) {
  const c10::Device device = common_device("bmm", {&a, &b});
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ",
              a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
  check_matmul_dtypes("bmm", a, b);
  at::Tensor out = empty_device({a.size(0), a.size(1), b.size(2)}, a.scalar_type(), device);
  if (out.numel() == 0) return out;
  if (a.size(2) == 0) return out.zero_();
  launch(Op::Bmm, {tensor_operand(a), tensor_operand(b)}, {tensor_operand(out)});
  return out;
}
at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return write_out(bridge::bmm(a, b), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("mm", mm);
  m.impl("mm.out", mm_out);
  m.impl("addmm", addmm);
  m.impl("addmm.out", addmm_out);
  m.impl("addmm_", addmm_);
  m.impl("addr", addr);
  m.impl("addr.out", addr_out);
  m.impl("bmm", bmm);
  m.impl("bmm.out", bmm_out);
}

}  // namespace openneuron::bridge
