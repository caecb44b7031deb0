// The lowering context: operand locations, scratch temporaries, instruction
// building and validation messages.
#include <algorithm>

#include "lowering.h"

namespace openneuron::compiler::detail {

Ref Ref::imm_int(int64_t v) {
  Ref r;
  r.kind = ValueKind::ScalarInt;
  r.scalar = ScalarArg::imm_int(v);
  return r;
}

Ref Ref::imm_float(double v) {
  Ref r;
  r.kind = ValueKind::ScalarFloat;
  r.scalar = ScalarArg::imm_float(v);
  return r;
}

int32_t ArgMap::local(int32_t launch_slot) {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i] == launch_slot) return static_cast<int32_t>(i);
  slots_.push_back(launch_slot);
  return static_cast<int32_t>(slots_.size() - 1);
}

TensorArg ArgMap::tensor(const Ref& r) {
  TensorArg a;
  if (!r.is_tensor()) return a;  // absent
  a.slot = local(r.slot);
  a.byte_offset = r.offset;
  a.type = r.type;
  return a;
}

ScalarArg ArgMap::scalar(const Ref& r) {
  ScalarArg s = r.scalar;
  s.is_float = r.kind == ValueKind::ScalarFloat;
  if (r.slot >= 0) s.slot = local(r.slot);
  return s;
}

std::string describe(const TensorType& t) {
  std::string s = dtype_name(t.dtype);
  s += '[';
  for (int d = 0; d < t.ndim; ++d) {
    if (d) s += ", ";
    s += std::to_string(t.sizes[d]);
  }
  s += ']';
  if (!t.is_contiguous()) {
    s += "{strides ";
    for (int d = 0; d < t.ndim; ++d) {
      if (d) s += ", ";
      s += std::to_string(t.strides[d]);
    }
    s += '}';
  }
  return s;
}

std::string describe(const Ref& r) {
  switch (r.kind) {
    case ValueKind::Tensor: return describe(r.type);
    case ValueKind::ScalarInt: return "int";
    case ValueKind::ScalarFloat: return "float";
    case ValueKind::None: return "None";
  }
  return "?";
}

TensorType contiguous_type(DType dtype, int ndim, const int64_t* sizes) {
  TensorType t;
  t.dtype = dtype;
  t.ndim = ndim;
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    t.sizes[d] = sizes[d];
    t.strides[d] = st;
    st *= std::max<int64_t>(sizes[d], 1);
  }
  return t;
}

bool same_sizes(const TensorType& a, const TensorType& b) {
  if (a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.sizes[d] != b.sizes[d]) return false;
  return true;
}

uint64_t storage_bytes(const TensorType& t) {
  int64_t span = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.sizes[d] == 0) return 0;
    span += (t.sizes[d] - 1) * t.strides[d];
  }
  return static_cast<uint64_t>(span) * dtype_size(t.dtype);
}

LowerCtx::LowerCtx(const Graph& g, std::vector<Ref> refs, int32_t scratch_slot, uint64_t temp_base)
    : g_(g),
      refs_(std::move(refs)),
      scratch_slot_(scratch_slot),
      temp_base_(align_up(temp_base)),
      temp_cur_(temp_base_),
      temp_high_(temp_base) {}

void LowerCtx::begin_node(int index) {
  node_ = &g_.nodes()[index];
  temp_cur_ = temp_base_;  // temporaries live within one node
}

Ref LowerCtx::temp(const TensorType& t) {
  Ref r;
  r.kind = ValueKind::Tensor;
  r.slot = scratch_slot_;
  r.offset = static_cast<int64_t>(temp_cur_);
  r.type = t;
  temp_cur_ = align_up(temp_cur_ + std::max<uint64_t>(storage_bytes(t), 1));
  temp_high_ = std::max(temp_high_, temp_cur_);
  return r;
}

Ref LowerCtx::as_dtype(const Ref& r, DType d) {
  if (!r.is_tensor() || r.type.dtype == d) return r;
  Ref t = temp(contiguous_type(d, r.type.ndim, r.type.sizes));
  emit_copy(*this, t, r);
  return t;
}

Ref LowerCtx::contiguous(const Ref& r) {
  if (!r.is_tensor() || r.type.is_contiguous()) return r;
  Ref t = temp(contiguous_type(r.type.dtype, r.type.ndim, r.type.sizes));
  emit_copy(*this, t, r);
  return t;
}

void LowerCtx::emit_raw(const char* name, onrt_kernel_fn fn, const void* params, size_t size,
                        const ArgMap& args) {
  Instruction ins;
  ins.name = name;
  ins.fn = fn;
  ins.params.resize((size + 7) / 8);
  if (size) std::memcpy(ins.params.data(), params, size);
  ins.params_size = size;
  ins.arg_slots = args.slots();
  instrs_.push_back(std::move(ins));
}

void LowerCtx::fail(const std::string& what) const {
  std::string msg = op_name(node_->op);
  msg += ": ";
  msg += what;
  msg += " (operands: ";
  for (size_t i = 0; i < node_->inputs.size(); ++i) {
    if (i) msg += ", ";
    msg += describe(refs_[node_->inputs[i]]);
  }
  msg += " -> ";
  for (size_t i = 0; i < node_->outputs.size(); ++i) {
    if (i) msg += ", ";
    msg += describe(refs_[node_->outputs[i]]);
  }
  msg += ')';
  throw CompileError(msg);
}

void LowerCtx::expect_counts(int nin, int nout) const { expect_counts(nin, nin, nout); }

void LowerCtx::expect_counts(int nin_min, int nin_max, int nout) const {
  const int ni = num_inputs(), no = num_outputs();
  if (ni < nin_min || ni > nin_max || no != nout) {
    std::string want = std::to_string(nin_min);
    if (nin_max != nin_min) want += ".." + std::to_string(nin_max);
    fail("expected " + want + " inputs and " + std::to_string(nout) + " outputs, got " +
         std::to_string(ni) + " and " + std::to_string(no));
  }
  for (int i = 0; i < no; ++i)
    if (!out(i).is_tensor()) fail("output " + std::to_string(i) + " must be a tensor");
}

int LowerCtx::wrap_dim(int64_t dim, int ndim) const {
  const int n = std::max(ndim, 1);
  if (dim < -n || dim >= n)
    fail("dim " + std::to_string(dim) + " out of range for " + std::to_string(ndim) + " dims");
  return static_cast<int>(dim < 0 ? dim + n : dim);
}

void LowerCtx::expect_tensor(const Ref& r, const char* what) const {
  if (!r.is_tensor()) fail(std::string(what) + " must be a tensor");
}

void LowerCtx::expect_same_sizes(const Ref& a, const TensorType& like, const char* what) const {
  if (a.is_tensor() && !same_sizes(a.type, like))
    fail(std::string(what) + " has sizes " + describe(a.type) + ", expected those of " +
         describe(like));
}

ScalarArg scalar_arg(LowerCtx& ctx, ArgMap& am, const Ref& r, const char* what) {
  if (!r.is_scalar()) ctx.fail(std::string(what) + " must be a scalar");
  return am.scalar(r);
}

}  // namespace openneuron::compiler::detail
