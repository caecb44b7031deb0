// Lowerings of the elementwise ops: unary, binary, comparisons,
// logical/bitwise, ternary (where, addcmul/addcdiv, lerp, clamp) and the
// elementwise backward ops; emit_elementwise, which every elementwise-engine
// instruction goes through.
#include <limits>

#include "lowering.h"

namespace openneuron::compiler::detail {

using kernels::BinaryOp;
using kernels::ElementwiseParams;
using kernels::Operand;
using kernels::UnaryOp;

void emit_elementwise(LowerCtx& ctx, const char* name, onrt_kernel_fn fn, uint16_t op,
                      const Ref& out, const std::vector<Ref>& ins, const std::vector<Ref>& coefs) {
  const TensorType& ot = out.type;
  for (int d = 0; d < ot.ndim; ++d)
    if (ot.sizes[d] > 1 && ot.strides[d] == 0)
      ctx.fail("output " + describe(ot) + " has overlapping elements (stride 0)");
  if (ot.numel() == 0) return;
  ElementwiseParams p;
  ArgMap am;
  p.op = op;
  p.nin = static_cast<uint8_t>(ins.size());
  const TensorType* types[kernels::kMaxOperands] = {};
  p.ops[0].kind = Operand::Tensor;
  p.ops[0].dtype = ot.dtype;
  const TensorArg oa = am.tensor(out);
  p.ops[0].slot = oa.slot;
  p.ops[0].byte_offset = oa.byte_offset;
  types[0] = &ot;
  for (size_t i = 0; i < ins.size(); ++i) {
    const Ref& r = ins[i];
    Operand& o = p.ops[i + 1];
    if (r.is_tensor()) {
      ctx.expect_same_sizes(r, ot, "input");
      const TensorArg ta = am.tensor(r);
      o.kind = Operand::Tensor;
      o.dtype = r.type.dtype;
      o.slot = ta.slot;
      o.byte_offset = ta.byte_offset;
      types[i + 1] = &r.type;
    } else if (r.is_scalar()) {
      o.kind = Operand::Scalar;
      o.scalar = am.scalar(r);
    } else {
      ctx.fail("input " + std::to_string(i) + " is missing");
    }
  }
  for (size_t i = 0; i < coefs.size() && i < 2; ++i) {
    if (!coefs[i].is_scalar()) ctx.fail("coefficient must be a scalar");
    p.coef[i] = am.scalar(coefs[i]);
  }
  p.plan = kernels::make_loop_plan(types, static_cast<int>(ins.size()) + 1);
  ctx.emit(name, fn, p, am);
}

namespace {

[[noreturn]] void unsupported(LowerCtx& ctx, DType d) {
  ctx.fail(std::string("unsupported dtype ") + dtype_name(d));
}

int int_rank(DType d) {
  switch (d) {
    case DType::Bool: return 0;
    case DType::UInt8: return 1;
    case DType::Int8: return 1;
    case DType::Int16: return 2;
    case DType::Int32: return 3;
    case DType::Int64: return 4;
    default: return -1;
  }
}

// PyTorch's promote_types for the dtypes the engines compute on.
DType promote(DType a, DType b) {
  if (a == b) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) return DType::Float32;  // f16+bf16, fp8 mixes, anything with f32
  if (fa) return a;
  if (fb) return b;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if ((a == DType::UInt8 && b == DType::Int8) || (a == DType::Int8 && b == DType::UInt8))
    return DType::Int16;
  return int_rank(a) >= int_rank(b) ? a : b;
}

// The dtype a comparison or logical op computes in: the tensors' promoted
// type, widened where a scalar of a higher category takes part (PyTorch's
// result_type with "wrapped number" scalars).
DType compute_dtype(const std::vector<Ref>& ins) {
  bool have_tensor = false, float_scalar = false, int_scalar = false;
  DType d = DType::Bool;
  for (const Ref& r : ins) {
    if (r.is_tensor()) {
      d = have_tensor ? promote(d, r.type.dtype) : r.type.dtype;
      have_tensor = true;
    } else if (r.kind == ValueKind::ScalarFloat) {
      float_scalar = true;
    } else if (r.kind == ValueKind::ScalarInt) {
      int_scalar = true;
    }
  }
  if (!have_tensor) return float_scalar ? DType::Float32 : DType::Int64;
  if (float_scalar && !is_floating(d)) return DType::Float32;
  if (int_scalar && d == DType::Bool) return DType::Int64;
  return d;
}

// Runs a Bool-producing kernel, through a Bool temporary when out is not Bool.
void emit_bool_result(LowerCtx& ctx, const char* name, onrt_kernel_fn fn, uint16_t op,
                      const std::vector<Ref>& ins) {
  const Ref& out = ctx.out(0);
  if (out.type.dtype == DType::Bool) return emit_elementwise(ctx, name, fn, op, out, ins);
  Ref t = ctx.temp(contiguous_type(DType::Bool, out.type.ndim, out.type.sizes));
  emit_elementwise(ctx, name, fn, op, t, ins);
  emit_copy(ctx, out, t);
}

}  // namespace

void lower_unary(LowerCtx& ctx) {
  ctx.expect_counts(1, 1);
  UnaryOp uop;
  switch (ctx.op()) {
#define ON_CASE(X) case Op::X: uop = UnaryOp::X; break;
    ON_CASE(Neg) ON_CASE(Abs) ON_CASE(Exp) ON_CASE(Log) ON_CASE(Sqrt) ON_CASE(Rsqrt)
    ON_CASE(Reciprocal) ON_CASE(Sin) ON_CASE(Cos) ON_CASE(Tanh) ON_CASE(Sigmoid) ON_CASE(Relu)
    ON_CASE(Silu) ON_CASE(Erf) ON_CASE(Floor) ON_CASE(Ceil) ON_CASE(Round) ON_CASE(Sign)
    ON_CASE(LogicalNot)
#undef ON_CASE
    case Op::Gelu: {
      const int64_t approx = ctx.attr(0, 0);
      if (approx != 0 && approx != 1) ctx.fail("attr[0] (approximate) must be 0 or 1");
      uop = approx ? UnaryOp::GeluTanh : UnaryOp::GeluErf;
      break;
    }
    default: ctx.fail("not a unary op");
  }
  const Ref& out = ctx.out(0);
  const Ref& in = ctx.in(0);
  if (in.is_none()) ctx.fail("input is missing");
  ctx.expect_same_sizes(in, out.type, "input");
  const char* name = op_name(ctx.op());
  if (uop == UnaryOp::LogicalNot) {
    const DType cd = compute_dtype({in});
    onrt_kernel_fn fn = kernels::unary_kernel(uop, DType::Bool, cd);
    if (!fn) unsupported(ctx, cd);
    return emit_bool_result(ctx, name, fn, static_cast<uint16_t>(uop), {ctx.as_dtype(in, cd)});
  }
  const DType d = out.type.dtype;
  onrt_kernel_fn fn = kernels::unary_kernel(uop, d, d);
  if (!fn) unsupported(ctx, d);
  emit_elementwise(ctx, name, fn, static_cast<uint16_t>(uop), out, {ctx.as_dtype(in, d)});
}

void lower_binary(LowerCtx& ctx) {
  BinaryOp bop;
  bool has_alpha = false;
  switch (ctx.op()) {
    case Op::Add: bop = BinaryOp::Add; has_alpha = true; break;
    case Op::Sub: bop = BinaryOp::Sub; has_alpha = true; break;
#define ON_CASE(X) case Op::X: bop = BinaryOp::X; break;
    ON_CASE(Mul) ON_CASE(Div) ON_CASE(Maximum) ON_CASE(Minimum) ON_CASE(Pow) ON_CASE(Remainder)
    ON_CASE(FloorDivide) ON_CASE(DivTrunc) ON_CASE(Atan2)
#undef ON_CASE
    default: ctx.fail("not a binary op");
  }
  ctx.expect_counts(2, has_alpha ? 3 : 2, 1);
  const Ref& out = ctx.out(0);
  const DType d = out.type.dtype;
  onrt_kernel_fn fn = kernels::binary_kernel(bop, d, d);
  if (!fn) unsupported(ctx, d);
  std::vector<Ref> coefs;
  if (has_alpha) {
    if (ctx.num_inputs() == 3) {
      if (!ctx.in(2).is_scalar()) ctx.fail("alpha must be a scalar");
      coefs.push_back(ctx.in(2));
    } else {
      coefs.push_back(Ref::imm_int(1));
    }
  }
  emit_elementwise(ctx, op_name(ctx.op()), fn, static_cast<uint16_t>(bop), out,
                   {ctx.as_dtype(ctx.in(0), d), ctx.as_dtype(ctx.in(1), d)}, coefs);
}

void lower_compare(LowerCtx& ctx) {
  BinaryOp bop;
  switch (ctx.op()) {
#define ON_CASE(X) case Op::X: bop = BinaryOp::X; break;
    ON_CASE(Eq) ON_CASE(Ne) ON_CASE(Lt) ON_CASE(Le) ON_CASE(Gt) ON_CASE(Ge)
    ON_CASE(LogicalAnd) ON_CASE(LogicalOr)
#undef ON_CASE
    default: ctx.fail("not a comparison");
  }
  ctx.expect_counts(2, 1);
  const DType cd = compute_dtype({ctx.in(0), ctx.in(1)});
  onrt_kernel_fn fn = kernels::binary_kernel(bop, DType::Bool, cd);
  if (!fn) unsupported(ctx, cd);
  emit_bool_result(ctx, op_name(ctx.op()), fn, static_cast<uint16_t>(bop),
                   {ctx.as_dtype(ctx.in(0), cd), ctx.as_dtype(ctx.in(1), cd)});
}

void lower_bitwise(LowerCtx& ctx) {
  BinaryOp bop;
  switch (ctx.op()) {
#define ON_CASE(X) case Op::X: bop = BinaryOp::X; break;
    ON_CASE(BitwiseAnd) ON_CASE(BitwiseOr) ON_CASE(BitwiseXor)
#undef ON_CASE
    default: ctx.fail("not a bitwise op");
  }
  ctx.expect_counts(2, 1);
  const Ref& out = ctx.out(0);
  const DType d = out.type.dtype;
  onrt_kernel_fn fn = kernels::binary_kernel(bop, d, d);
  if (!fn) unsupported(ctx, d);
  emit_elementwise(ctx, op_name(ctx.op()), fn, static_cast<uint16_t>(bop), out,
                   {ctx.as_dtype(ctx.in(0), d), ctx.as_dtype(ctx.in(1), d)});
}

void lower_backward_binary(LowerCtx& ctx) {
  BinaryOp bop;
  std::vector<Ref> coefs;
  switch (ctx.op()) {
    case Op::ThresholdBackward:
      ctx.expect_counts(3, 1);
      if (!ctx.in(2).is_scalar()) ctx.fail("threshold must be a scalar");
      coefs.push_back(ctx.in(2));
      bop = BinaryOp::ThresholdBackward;
      break;
    case Op::GeluBackward: {
      ctx.expect_counts(2, 1);
      const int64_t approx = ctx.attr(0, 0);
      if (approx != 0 && approx != 1) ctx.fail("attr[0] (approximate) must be 0 or 1");
      bop = approx ? BinaryOp::GeluTanhBackward : BinaryOp::GeluErfBackward;
      break;
    }
    case Op::SigmoidBackward: ctx.expect_counts(2, 1); bop = BinaryOp::SigmoidBackward; break;
    case Op::TanhBackward: ctx.expect_counts(2, 1); bop = BinaryOp::TanhBackward; break;
    case Op::SiluBackward: ctx.expect_counts(2, 1); bop = BinaryOp::SiluBackward; break;
    default: ctx.fail("not an elementwise backward op");
  }
  const Ref& out = ctx.out(0);
  const DType d = out.type.dtype;
  onrt_kernel_fn fn = kernels::binary_kernel(bop, d, d);
  if (!fn) unsupported(ctx, d);
  emit_elementwise(ctx, op_name(ctx.op()), fn, static_cast<uint16_t>(bop), out,
                   {ctx.as_dtype(ctx.in(0), d), ctx.as_dtype(ctx.in(1), d)}, coefs);
}

void lower_where(LowerCtx& ctx) {
  ctx.expect_counts(3, 1);
  const Ref& out = ctx.out(0);
  const DType d = out.type.dtype;
  onrt_kernel_fn fn = kernels::ternary_kernel(kernels::TernaryOp::Where, d, d);
  if (!fn) unsupported(ctx, d);
  Ref cond = ctx.in(0);
  if (cond.is_none()) ctx.fail("condition is missing");
  emit_elementwise(ctx, "Where", fn, static_cast<uint16_t>(kernels::TernaryOp::Where), out,
                   {ctx.as_dtype(cond, DType::Bool), ctx.as_dtype(ctx.in(1), d),
                    ctx.as_dtype(ctx.in(2), d)});
}

void lower_pointwise3(LowerCtx& ctx) {
  kernels::TernaryOp top;
  std::vector<Ref> coefs;
  switch (ctx.op()) {
    case Op::Addcmul:
    case Op::Addcdiv:
      top = ctx.op() == Op::Addcmul ? kernels::TernaryOp::Addcmul : kernels::TernaryOp::Addcdiv;
      ctx.expect_counts(3, 4, 1);
      if (ctx.num_inputs() == 4) {
        if (!ctx.in(3).is_scalar()) ctx.fail("value must be a scalar");
        coefs.push_back(ctx.in(3));
      } else {
        coefs.push_back(Ref::imm_int(1));
      }
      break;
    case Op::Lerp:
      top = kernels::TernaryOp::Lerp;
      ctx.expect_counts(3, 1);
      break;
    default: ctx.fail("not a pointwise op");
  }
  const Ref& out = ctx.out(0);
  const DType d = out.type.dtype;
  onrt_kernel_fn fn = kernels::ternary_kernel(top, d, d);
  if (!fn) unsupported(ctx, d);
  emit_elementwise(ctx, op_name(ctx.op()), fn, static_cast<uint16_t>(top), out,
                   {ctx.as_dtype(ctx.in(0), d), ctx.as_dtype(ctx.in(1), d),
                    ctx.as_dtype(ctx.in(2), d)},
                   coefs);
}

void lower_clamp(LowerCtx& ctx) {
  ctx.expect_counts(3, 1);
  const Ref& out = ctx.out(0);
  const DType d = out.type.dtype;
  onrt_kernel_fn fn = kernels::ternary_kernel(kernels::TernaryOp::Clamp, d, d);
  if (!fn) unsupported(ctx, d);
  Ref lo = ctx.in(1), hi = ctx.in(2);
  if (lo.is_none() && hi.is_none()) ctx.fail("at least one of min and max must be given");
  // An absent bound becomes the dtype's extreme, so one kernel serves all.
  auto extreme = [&](bool upper) -> Ref {
    if (is_floating(d))
      return Ref::imm_float(upper ? std::numeric_limits<double>::infinity()
                                  : -std::numeric_limits<double>::infinity());
    switch (d) {
      case DType::UInt8: return Ref::imm_int(upper ? 255 : 0);
      case DType::Int8: return Ref::imm_int(upper ? 127 : -128);
      case DType::Int16: return Ref::imm_int(upper ? 32767 : -32768);
      case DType::Int32:
        return Ref::imm_int(upper ? std::numeric_limits<int32_t>::max()
                                  : std::numeric_limits<int32_t>::min());
      default:
        return Ref::imm_int(upper ? std::numeric_limits<int64_t>::max()
                                  : std::numeric_limits<int64_t>::min());
    }
  };
  if (lo.is_none()) lo = extreme(false);
  if (hi.is_none()) hi = extreme(true);
  emit_elementwise(ctx, "Clamp", fn, static_cast<uint16_t>(kernels::TernaryOp::Clamp), out,
                   {ctx.as_dtype(ctx.in(0), d), ctx.as_dtype(lo, d), ctx.as_dtype(hi, d)});
}

}  // namespace openneuron::compiler::detail
