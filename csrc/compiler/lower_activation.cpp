// Lowering of the activations and unary math ops (ActOp kernels): one table
// row per op says how its node's inputs map onto the elementwise operands.
#include "lowering.h"

namespace openneuron::compiler::detail {

using kernels::ActOp;

namespace {

struct Spec {
  Op op;
  ActOp act;
  int tensors;       // leading tensor inputs (Fmod's second may be a scalar)
  int coefs;         // then scalar coefficients -> ElementwiseParams::coef
  bool input_scale;  // then Elu's input_scale, passed as a scalar operand
  bool bool_out;
};

constexpr Spec kSpecs[] = {
    {Op::Softplus, ActOp::Softplus, 1, 2, false, false},
    {Op::Mish, ActOp::Mish, 1, 0, false, false},
    {Op::Hardswish, ActOp::Hardswish, 1, 0, false, false},
    {Op::Hardsigmoid, ActOp::Hardsigmoid, 1, 0, false, false},
    {Op::LogSigmoid, ActOp::LogSigmoid, 1, 0, false, false},
    {Op::Elu, ActOp::Elu, 1, 2, true, false},
    {Op::LeakyRelu, ActOp::LeakyRelu, 1, 1, false, false},
    {Op::Hardtanh, ActOp::Hardtanh, 1, 2, false, false},
    {Op::Exp2, ActOp::Exp2, 1, 0, false, false},
    {Op::Expm1, ActOp::Expm1, 1, 0, false, false},
    {Op::Log1p, ActOp::Log1p, 1, 0, false, false},
    {Op::Log2, ActOp::Log2, 1, 0, false, false},
    {Op::Log10, ActOp::Log10, 1, 0, false, false},
    {Op::Trunc, ActOp::Trunc, 1, 0, false, false},
    {Op::Frac, ActOp::Frac, 1, 0, false, false},
    {Op::Tan, ActOp::Tan, 1, 0, false, false},
    {Op::Asin, ActOp::Asin, 1, 0, false, false},
    {Op::Acos, ActOp::Acos, 1, 0, false, false},
    {Op::Atan, ActOp::Atan, 1, 0, false, false},
    {Op::Sinh, ActOp::Sinh, 1, 0, false, false},
    {Op::Cosh, ActOp::Cosh, 1, 0, false, false},
    {Op::Asinh, ActOp::Asinh, 1, 0, false, false},
    {Op::Acosh, ActOp::Acosh, 1, 0, false, false},
    {Op::Atanh, ActOp::Atanh, 1, 0, false, false},
    {Op::IsInf, ActOp::IsInf, 1, 0, false, true},
    {Op::IsFinite, ActOp::IsFinite, 1, 0, false, true},
    {Op::Fmod, ActOp::Fmod, 2, 0, false, false},
    {Op::SoftplusBackward, ActOp::SoftplusBackward, 2, 2, false, false},
    {Op::MishBackward, ActOp::MishBackward, 2, 0, false, false},
    {Op::HardswishBackward, ActOp::HardswishBackward, 2, 0, false, false},
    {Op::HardsigmoidBackward, ActOp::HardsigmoidBackward, 2, 0, false, false},
    {Op::LogSigmoidBackward, ActOp::LogSigmoidBackward, 2, 0, false, false},
    {Op::EluBackward, ActOp::EluBackward, 2, 2, true, false},
    {Op::LeakyReluBackward, ActOp::LeakyReluBackward, 2, 1, false, false},
    {Op::HardtanhBackward, ActOp::HardtanhBackward, 2, 2, false, false},
};

const Spec* find_spec(Op op) {
  for (const Spec& s : kSpecs)
    if (s.op == op) return &s;
  return nullptr;
}

}  // namespace

void lower_activation(LowerCtx& ctx) {
  const Spec* s = find_spec(ctx.op());
  if (!s) ctx.fail("not an activation op");
  ctx.expect_counts(s->tensors + s->coefs + (s->input_scale ? 1 : 0), 1);
  const Ref& out = ctx.out(0);
  const char* name = op_name(ctx.op());

  // Bool-valued ops compute in their input's dtype; the others in out's.
  const Ref& first = ctx.in(0);
  ctx.expect_tensor(first, "input");
  const DType d = s->bool_out ? first.type.dtype : out.type.dtype;
  std::vector<Ref> ins, coefs;
  for (int i = 0; i < s->tensors; ++i) {
    const Ref& r = ctx.in(i);
    if (r.is_none()) ctx.fail("input " + std::to_string(i) + " is missing");
    if (r.is_scalar() && ctx.op() != Op::Fmod)
      ctx.fail("input " + std::to_string(i) + " must be a tensor");
    ins.push_back(ctx.as_dtype(r, d));
  }
  for (int j = 0; j < s->coefs; ++j) {
    const Ref& c = ctx.in(s->tensors + j);
    if (!c.is_scalar()) ctx.fail("coefficient " + std::to_string(j) + " must be a scalar");
    coefs.push_back(c);
  }
  if (s->input_scale) {
    const Ref& c = ctx.in(s->tensors + s->coefs);
    if (!c.is_scalar()) ctx.fail("input_scale must be a scalar");
    ins.push_back(c);
  }

  ActOp act = s->act;
  if (ctx.op() == Op::EluBackward) {
    const int64_t is_result = ctx.attr(0, 0);
    if (is_result != 0 && is_result != 1) ctx.fail("attr[0] (is_result) must be 0 or 1");
    if (is_result) act = ActOp::EluBackwardResult;
  }
  const DType od = s->bool_out ? DType::Bool : d;
  onrt_kernel_fn fn = kernels::activation_kernel(act, od, d);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(d));
  const auto op = static_cast<uint16_t>(act);
  if (out.type.dtype == od) return emit_elementwise(ctx, name, fn, op, out, ins, coefs);
  // A Bool result for a non-Bool out goes through a temporary.
  if (!s->bool_out) ctx.fail("output dtype must match the input's");
  Ref t = ctx.temp(contiguous_type(DType::Bool, out.type.ndim, out.type.sizes));
  emit_elementwise(ctx, name, fn, op, t, ins, coefs);
  emit_copy(ctx, out, t);
}

}  // namespace openneuron::compiler::detail
