// softmax and log_softmax, forward and backward, along one dim (lower_softmax.cpp).
#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

template <Op kOp>
at::Tensor softmax_fwd(const at::Tensor& self, int64_t dim, bool half_to_float) {
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  const auto dtype = half_to_float ? c10::kFloat : self.scalar_type();
  at::Tensor out = empty_device(self.sizes(), dtype, self.device());
  if (out.numel() == 0) return out;
  at::Tensor in = to_dtype_on_device(self, dtype);
  if (self.dim() == 0) {
    // A row of one: 1 (log_softmax 0), but NaN for a NaN or infinite scalar as on the CPU.
    launch(kOp, {tensor_operand(in.reshape({1}))}, {tensor_operand(out.view({1}))}, {int64_t{0}});
    return out;
  }
  launch(kOp, {tensor_operand(in)}, {tensor_operand(out)}, {d});
  return out;
}

template <Op kOp>
at::Tensor softmax_bwd(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                       c10::ScalarType input_dtype) {
  const c10::Device device = common_device(op_name(kOp), {&grad, &output});
  const int64_t d = c10::maybe_wrap_dim(dim, grad.dim());
  at::Tensor out = empty_device(grad.sizes(), grad.scalar_type(), device);
  if (out.numel() == 0) return out;
  if (grad.dim() == 0) return out.fill_(0);
  launch(kOp,
         {tensor_operand(grad), tensor_operand(to_dtype_on_device(output, grad.scalar_type()))},
         {tensor_operand(out)}, {d});
  if (input_dtype != grad.scalar_type()) return to_dtype_on_device(out, input_dtype);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("_softmax", softmax_fwd<Op::Softmax>);
  m.impl("_log_softmax", softmax_fwd<Op::LogSoftmax>);
  m.impl("_softmax_backward_data", softmax_bwd<Op::SoftmaxBackward>);
  m.impl("_log_softmax_backward_data", softmax_bwd<Op::LogSoftmaxBackward>);
}

}  // namespace openneuron::bridge
