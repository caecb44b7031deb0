// The tensor engine's convolutions: oneDNN's convolution primitive (forward,
// backward data, backward weights). Never a hand-written convolution. Operands
// are contiguous or channels_last; the primitive works in the layout oneDNN
// prefers (blocked or channels-last), because on contiguous layouts it only
// offers its im2col GEMM path, 1.5-8x slower than the direct kernels plus the
// reorders in and out (what PyTorch's CPU convolution does too). Channels-last
// activations are what its direct kernels read and write, so they need no
// reorder at all.
// Primitives are kept in the oneDNN primitive cache (dnnl_context.h), keyed by
// the problem; oneDNN parallelises internally.
#include <dnnl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "dnnl_context.h"
#include "error.h"
#include "openneuron/kernels/kernels.h"
#include "storage.h"

namespace openneuron::kernels {
namespace detail {
namespace {

// Convolutions are lowered for f32 and bf16 only; f16 is not offered.
dnnl_data_type_t dnnl_dt(DType d) {
  return d == DType::Float16 ? dnnl_data_type_undef : dnnl_type(d);
}

dnnl_format_tag_t plain_tag(int ndims) {
  switch (ndims) {
    case 1: return dnnl_a;
    case 3: return dnnl_abc;
    case 4: return dnnl_abcd;
    case 5: return dnnl_abcde;
    case 6: return dnnl_abcdef;
    default: return dnnl_format_tag_undef;
  }
}

// The user's layout of an [N|O, C, *spatial] operand: contiguous, or channels last,
// which oneDNN's direct kernels read and write in place (no reorder).
dnnl_format_tag_t user_tag(int ndims, bool channels_last) {
  if (!channels_last) return plain_tag(ndims);
  switch (ndims) {
    case 3:
      return dnnl_acb;
    case 4:
      return dnnl_acdb;
    case 5:
      return dnnl_acdeb;
    default:
      return dnnl_format_tag_undef;
  }
}

// The problem, without the operands' locations.
struct Key {
  DType dtype;
  int32_t op, nsp, groups, has_bias, src_cl, dst_cl, wei_cl;
  int64_t src[5], wei[6], dst[5], stride[3], pad_l[3], pad_r[3], dil[3];
};

// One operand: the caller's plain memory and, when the primitive wants another
// layout, a memory in that layout and the reorder between them.
struct Operand {
  dnnl_memory_t user = nullptr, inner = nullptr;
  dnnl_primitive_t reorder = nullptr;
  size_t inner_bytes = 0, inner_offset = 0;  // in the thread's layout workspace
  bool output = false;
  ~Operand() {
    for (dnnl_memory_t m : {user, inner})
      if (m) dnnl_memory_destroy(m);
    if (reorder) dnnl_primitive_destroy(reorder);
  }
  dnnl_memory_t arg() const { return inner ? inner : user; }
};

struct Prim : DnnlPrimitive {
  Operand src, wei, dst;  // roles of the forward problem (diff_* in the backward ones)
  dnnl_memory_t bias = nullptr;
  size_t workspace_bytes = 0;
  ~Prim() override {
    if (bias) dnnl_memory_destroy(bias);
  }
};

// Reordered operands live in one per-thread buffer shared by all cached
// problems, so the cache does not keep a copy of every activation shape.
std::vector<uint64_t>& layout_workspace() {
  thread_local std::vector<uint64_t> ws;
  return ws;
}

// Binds `op` to the user's plain layout and, if the primitive chose `want`,
// a memory in that layout plus the reorder (in for inputs, out for outputs).
dnnl_status_t bind(Operand& op, const dnnl_memory_desc_t& plain, const dnnl_memory_desc_t* want,
                   bool output, size_t& workspace) {
  dnnl_engine_t eng = dnnl_cpu_engine();
  op.output = output;
  dnnl_status_t s = dnnl_memory_create(&op.user, &plain, eng, DNNL_MEMORY_NONE);
  if (s != dnnl_success || !want || dnnl_memory_desc_equal(want, &plain)) return s;
  if ((s = dnnl_memory_create(&op.inner, want, eng, DNNL_MEMORY_NONE)) != dnnl_success) return s;
  op.inner_bytes = dnnl_memory_desc_get_size(want);
  op.inner_offset = workspace;
  workspace += (op.inner_bytes + 63) / 64 * 64;
  dnnl_primitive_desc_t rpd = nullptr;
  s = output ? dnnl_reorder_primitive_desc_create(&rpd, want, eng, &plain, eng, nullptr)
             : dnnl_reorder_primitive_desc_create(&rpd, &plain, eng, want, eng, nullptr);
  if (s != dnnl_success) return s;
  s = dnnl_primitive_create(&op.reorder, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return s;
}

dnnl_status_t run_reorder(const Operand& op, dnnl_stream_t stream) {
  dnnl_exec_arg_t ex[2] = {{DNNL_ARG_FROM, op.output ? op.inner : op.user},
                           {DNNL_ARG_TO, op.output ? op.user : op.inner}};
  return dnnl_primitive_execute(op.reorder, stream, 2, ex);
}

std::unique_ptr<Prim> build(const Key& k) {
  auto p = std::make_unique<Prim>();
  dnnl_engine_t eng = dnnl_cpu_engine();
  if (!eng) {
    p->error = "oneDNN CPU engine unavailable";
    return p;
  }
  const dnnl_data_type_t dt = dnnl_dt(k.dtype);
  const int nd = 2 + k.nsp;
  const int wnd = nd + (k.groups > 1 ? 1 : 0);
  dnnl_dims_t src_dims, wei_dims, dst_dims, strides, dil, pl, pr;
  for (int i = 0; i < nd; ++i) {
    src_dims[i] = k.src[i];
    dst_dims[i] = k.dst[i];
  }
  for (int i = 0; i < wnd; ++i) wei_dims[i] = k.wei[i];
  for (int i = 0; i < k.nsp; ++i) {
    strides[i] = k.stride[i];
    dil[i] = k.dil[i];
    pl[i] = k.pad_l[i];
    pr[i] = k.pad_r[i];
  }
  dnnl_memory_desc_t src_md, wei_md, dst_md, bias_md, src_any, wei_any, dst_any;
  dnnl_status_t s;
  if ((s = dnnl_memory_desc_init_by_tag(&src_md, nd, src_dims, dt, user_tag(nd, k.src_cl))) !=
          dnnl_success ||
      (s = dnnl_memory_desc_init_by_tag(&wei_md, wnd, wei_dims, dt, user_tag(wnd, k.wei_cl))) !=
          dnnl_success ||
      (s = dnnl_memory_desc_init_by_tag(&dst_md, nd, dst_dims, dt, user_tag(nd, k.dst_cl))) !=
          dnnl_success ||
      (s = dnnl_memory_desc_init_by_tag(&src_any, nd, src_dims, dt, dnnl_format_tag_any)) !=
          dnnl_success ||
      (s = dnnl_memory_desc_init_by_tag(&wei_any, wnd, wei_dims, dt, dnnl_format_tag_any)) !=
          dnnl_success ||
      (s = dnnl_memory_desc_init_by_tag(&dst_any, nd, dst_dims, dt, dnnl_format_tag_any)) !=
          dnnl_success) {
    p->error = "memory descriptor: " + dnnl_status_str(s);
    return p;
  }
  const dnnl_dims_t bdims = {k.dst[1]};
  dnnl_memory_desc_init_by_tag(&bias_md, 1, bdims, dt, dnnl_a);

  dnnl_convolution_desc_t fwd;
  s = dnnl_dilated_convolution_forward_desc_init(
      &fwd, k.op == 0 ? dnnl_forward_inference : dnnl_forward_training, dnnl_convolution_direct,
      &src_any, &wei_any, k.op == 0 && k.has_bias ? &bias_md : nullptr, &dst_any, strides, dil, pl, pr);
  if (s != dnnl_success) {
    p->error = "convolution descriptor: " + dnnl_status_str(s);
    return p;
  }
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_attr_create(&attr);
  dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_primitive_desc_t fwd_pd = nullptr, pd = nullptr;
  s = dnnl_primitive_desc_create(&fwd_pd, &fwd, k.op == 0 ? attr : nullptr, eng, nullptr);
  if (s == dnnl_success && k.op == 0) {
    pd = fwd_pd;
    fwd_pd = nullptr;
  } else if (s == dnnl_success) {
    dnnl_convolution_desc_t bwd;
    if (k.op == 1)
      s = dnnl_dilated_convolution_backward_data_desc_init(&bwd, dnnl_convolution_direct, &src_any,
                                                           &wei_any, &dst_any, strides, dil, pl, pr);
    else
      s = dnnl_dilated_convolution_backward_weights_desc_init(
          &bwd, dnnl_convolution_direct, &src_any, &wei_any, nullptr, &dst_any, strides, dil, pl,
          pr);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &bwd, attr, eng, fwd_pd);
  }
  dnnl_primitive_attr_destroy(attr);
  if (fwd_pd) dnnl_primitive_desc_destroy(fwd_pd);
  if (s != dnnl_success) {
    p->error = std::string("no oneDNN convolution for this ") + dtype_name(k.dtype) + " problem (" +
               dnnl_status_str(s) + ")";
    return p;
  }
  s = p->create(pd, eng);
  if (s == dnnl_success) {
    auto md = [&](dnnl_query_t q) { return dnnl_primitive_desc_query_md(pd, q, 0); };
    const dnnl_query_t q_src = k.op == 1 ? dnnl_query_diff_src_md : dnnl_query_src_md;
    const dnnl_query_t q_wei = k.op == 2 ? dnnl_query_diff_weights_md : dnnl_query_weights_md;
    const dnnl_query_t q_dst = k.op == 0 ? dnnl_query_dst_md : dnnl_query_diff_dst_md;
    size_t ws = 0;
    if ((s = bind(p->src, src_md, md(q_src), k.op == 1, ws)) == dnnl_success &&
        (s = bind(p->wei, wei_md, md(q_wei), k.op == 2, ws)) == dnnl_success)
      s = bind(p->dst, dst_md, md(q_dst), k.op == 0, ws);
    p->workspace_bytes = ws;
  }
  dnnl_primitive_desc_destroy(pd);
  if (s != dnnl_success) {
    p->error = "convolution primitive: " + dnnl_status_str(s);
    if (p->prim) dnnl_primitive_destroy(p->prim);
    p->prim = nullptr;
    return p;
  }
  if (k.op == 0 && k.has_bias) dnnl_memory_create(&p->bias, &bias_md, eng, DNNL_MEMORY_NONE);
  return p;
}

Key make_key(const ConvParams& p) {
  Key k;
  std::memset(&k, 0, sizeof k);
  k.dtype = p.dtype;
  k.op = p.op;
  k.nsp = p.nsp;
  k.groups = p.groups;
  k.has_bias = p.bias.present() ? 1 : 0;
  k.src_cl = p.src_channels_last;
  k.dst_cl = p.dst_channels_last;
  k.wei_cl = p.wei_channels_last && p.groups == 1;
  std::memcpy(k.src, p.src_dims, sizeof k.src);
  std::memcpy(k.wei, p.wei_dims, sizeof k.wei);
  std::memcpy(k.dst, p.dst_dims, sizeof k.dst);
  std::memcpy(k.stride, p.stride, sizeof k.stride);
  std::memcpy(k.pad_l, p.pad_l, sizeof k.pad_l);
  std::memcpy(k.pad_r, p.pad_r, sizeof k.pad_r);
  std::memcpy(k.dil, p.dilation, sizeof k.dil);
  return k;
}

// Multiply-adds times two, in every direction: each weight meets each position
// of the smaller of the two spatial extents (the output of a strided
// convolution, the input of a transposed one), per image.
double conv_flops(const ConvParams& p) {
  double src = 1, dst = 1, wei = 1;
  for (int i = 0; i < p.nsp; ++i) {
    src *= static_cast<double>(p.src_dims[2 + i]);
    dst *= static_cast<double>(p.dst_dims[2 + i]);
  }
  for (int64_t d : p.wei_dims) wei *= d > 0 ? static_cast<double>(d) : 1.0;
  return 2.0 * static_cast<double>(p.src_dims[0]) * std::min(src, dst) * wei;
}

int conv_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const ConvParams*>(params);
  const DnnlTeamFor team(conv_flops(p));
  Prim& pr = cached_primitive(DnnlPrimitiveKind::Convolution, make_key(p), &build);
  if (!pr.prim) return fail(err, errlen, "convolution: %s", pr.error.c_str());
  dnnl_memory_set_data_handle(pr.src.user, p.src.resolve(args));
  dnnl_memory_set_data_handle(pr.wei.user, p.weights.resolve(args));
  dnnl_memory_set_data_handle(pr.dst.user, p.dst.resolve(args));
  auto& ws = layout_workspace();
  if (ws.size() * 8 < pr.workspace_bytes) {
    ws.clear();
    ws.shrink_to_fit();
    ws.resize(pr.workspace_bytes / 8 + 8);
  }
  auto* wsp = reinterpret_cast<char*>(ws.data());
  dnnl_stream_t stream = dnnl_thread_stream();
  dnnl_status_t s = dnnl_success;
  for (Operand* o : {&pr.src, &pr.wei, &pr.dst}) {
    if (!o->inner) continue;
    dnnl_memory_set_data_handle(o->inner, wsp + o->inner_offset);
    if (!o->output && s == dnnl_success) s = run_reorder(*o, stream);
  }
  dnnl_exec_arg_t ex[6];
  int n = 0;
  switch (p.op) {
    case 0:
      ex[n++] = {DNNL_ARG_SRC, pr.src.arg()};
      ex[n++] = {DNNL_ARG_WEIGHTS, pr.wei.arg()};
      ex[n++] = {DNNL_ARG_DST, pr.dst.arg()};
      if (pr.bias) {
        dnnl_memory_set_data_handle(pr.bias, p.bias.resolve(args));
        ex[n++] = {DNNL_ARG_BIAS, pr.bias};
      }
      break;
    case 1:
      ex[n++] = {DNNL_ARG_DIFF_SRC, pr.src.arg()};
      ex[n++] = {DNNL_ARG_WEIGHTS, pr.wei.arg()};
      ex[n++] = {DNNL_ARG_DIFF_DST, pr.dst.arg()};
      break;
    default:
      ex[n++] = {DNNL_ARG_SRC, pr.src.arg()};
      ex[n++] = {DNNL_ARG_DIFF_WEIGHTS, pr.wei.arg()};
      ex[n++] = {DNNL_ARG_DIFF_DST, pr.dst.arg()};
      break;
  }
  if (pr.scratch) ex[n++] = {DNNL_ARG_SCRATCHPAD, pr.scratch};
  if (s == dnnl_success) s = dnnl_primitive_execute(pr.prim, stream, n, ex);
  for (const Operand* o : {&pr.src, &pr.wei, &pr.dst})
    if (o->inner && o->output && s == dnnl_success) s = run_reorder(*o, stream);
  if (s == dnnl_success) s = dnnl_stream_wait(stream);
  if (s != dnnl_success)
    return fail(err, errlen, "convolution: oneDNN execution failed (status %d)", static_cast<int>(s));
  return 0;
}

}  // namespace
}  // namespace detail

onrt_kernel_fn conv_kernel(DType dtype) {
  return detail::dnnl_dt(dtype) == dnnl_data_type_undef ? nullptr : &detail::conv_entry;
}

// oneDNN 2.6's bf16 convolutions multiply pairs of channels or taps at once
// (AVX512_BF16 dot products, or their emulation), padding odd counts with
// zero weights: an inf or NaN input then turns its neighbours' outputs into
// NaN (inf * 0). With an even number of channels in the reduction (input
// channels per group forward, output channels per group backward data) the pairs
// are channel pairs and nothing is padded, on a host with AVX512_BF16 (emulation
// differs); backward weights reduce over positions, which can be odd, so stay
// in float32 like every other case (exact for bf16 inputs, one rounding out).
bool conv_native(DType dtype, int32_t op, int64_t reduced_channels) {
  if (dtype == DType::Float32) return true;
  if (dtype != DType::BFloat16 || op == 2 || reduced_channels % 2 != 0) return false;
  const dnnl_cpu_isa_t bf16_isa = dnnl_cpu_isa_avx512_core_bf16;
  return (dnnl_get_effective_cpu_isa() & bf16_isa) == bf16_isa;
}

}  // namespace openneuron::kernels
