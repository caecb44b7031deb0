// Lowering of the nodes the fusion pass makes: FusedElementwise (fuse.cpp has
// its attribute layout) becomes one fused elementwise instruction.
#include "lowering.h"

namespace openneuron::compiler::detail {

using kernels::FusedElementwiseParams;
using kernels::FusedOp;
using kernels::Operand;

void lower_fused_elementwise(LowerCtx& ctx) {
  const std::vector<int64_t>& a = ctx.node().attrs;
  if (a.size() < 4) ctx.fail("attrs must start with nin, nscalars, nsteps, nout");
  const int64_t nin = a[0], nscalars = a[1], nsteps = a[2], nout = a[3];
  if (nin < 0 || nscalars < 0 || nout < 1 || nsteps < 1 ||
      nin + nout > kernels::kMaxFusedOperands || nscalars > kernels::kMaxFusedScalars ||
      nsteps > kernels::kMaxFusedSteps || a.size() != static_cast<size_t>(4 + 5 * nsteps + nout))
    ctx.fail("malformed attrs");
  ctx.expect_counts(static_cast<int>(nin + nscalars), static_cast<int>(nout));
  FusedElementwiseParams p;
  ArgMap am;
  p.nout = static_cast<uint8_t>(nout);
  p.nin = static_cast<uint8_t>(nin);
  p.nsteps = static_cast<uint8_t>(nsteps);
  p.nscalars = static_cast<uint8_t>(nscalars);
  const TensorType* types[kernels::kMaxFusedOperands] = {};
  auto tensor = [&](int k, const Ref& r) {
    ctx.expect_tensor(r, "operand");
    if (k > 0) ctx.expect_same_sizes(r, *types[0], "operand");
    const kernels::TensorArg t = am.tensor(r);
    Operand& o = p.tensors[k];
    o.kind = Operand::Tensor;
    o.dtype = r.type.dtype;
    o.slot = t.slot;
    o.byte_offset = t.byte_offset;
    types[k] = &r.type;
  };
  for (int k = 0; k < nout; ++k) tensor(k, ctx.out(k));
  for (int i = 0; i < nin; ++i) tensor(static_cast<int>(nout) + i, ctx.in(i));
  for (int s = 0; s < nscalars; ++s)
    p.scalars[s] = scalar_arg(ctx, am, ctx.in(static_cast<int>(nin) + s), "scalar operand");
  const int64_t nregs = nin + nsteps;
  auto source_ok = [&](int64_t r, int64_t step) {
    return (r >= 0 && r < nin + step) || (r < 0 && -1 - r < nscalars);
  };
  for (int k = 0; k < nsteps; ++k) {
    const int64_t* s = &a[4 + 5 * k];
    if (s[0] < 0 || s[0] > static_cast<int64_t>(FusedOp::SiluBackward)) ctx.fail("unknown step op");
    const DType d = static_cast<DType>(s[1]);
    if (d != DType::Float32 && d != DType::BFloat16 && d != DType::Float16)
      ctx.fail("step dtype must be Float32, BFloat16 or Float16");
    if (!source_ok(s[2], k) || !source_ok(s[3], k) || s[4] < -1 || s[4] >= nscalars)
      ctx.fail("step " + std::to_string(k) + " reads an unknown register");
    p.steps[k] = {static_cast<FusedOp>(s[0]), d, static_cast<int8_t>(s[2]),
                  static_cast<int8_t>(s[3]), static_cast<int8_t>(s[4])};
  }
  for (int k = 0; k < nout; ++k) {
    const int64_t r = a[4 + 5 * nsteps + k];
    if (r < nin || r >= nregs) ctx.fail("an output must store a step's result");
    p.out_reg[k] = static_cast<int8_t>(r);
  }
  if (types[0]->numel() == 0) return;
  p.plan = kernels::make_basic_loop_plan<kernels::kMaxFusedOperands>(types,
                                                                     static_cast<int>(nin + nout));
  ctx.emit("FusedElementwise", &kernels::fused_elementwise, p, am);
}

}  // namespace openneuron::compiler::detail
