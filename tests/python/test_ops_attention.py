"""scaled_dot_product_attention on neuron: the fused memory-efficient kernel
(forward and backward) against the CPU's F.scaled_dot_product_attention, the
routing of unsupported cases to the math path, dropout and memory use."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from helpers import FLOATS

FUSED = "ScaledDotProductFusedAttentionOverrideable"
# Inputs are rounded to the dtype first; the CPU reference then runs in float32.
TOL = {torch.float32: 2e-5, torch.bfloat16: 3e-2, torch.float16: 4e-3}


pytestmark = pytest.mark.usefixtures("no_fallback")


def rand(*shape, dtype=torch.float32, gen=None):
    return torch.randn(*shape, generator=gen).to(dtype)


def run_both(q, k, v, grad=True, **kw):
    """Runs SDPA on neuron (inputs' dtype) and on the CPU in float32 from the
    same values; returns (neuron out, neuron grads, cpu out, cpu grads)."""
    mask = kw.pop("attn_mask", None)
    ins_n = [t.detach().to("neuron").requires_grad_(grad) for t in (q, k, v)]
    ins_c = [t.detach().float().requires_grad_(grad) for t in (q, k, v)]
    mask_n = mask.to("neuron") if mask is not None else None
    mask_c = mask.float() if mask is not None and mask.is_floating_point() else mask
    out_n = F.scaled_dot_product_attention(*ins_n, attn_mask=mask_n, **kw)
    out_c = F.scaled_dot_product_attention(*ins_c, attn_mask=mask_c, **kw)
    if not grad:
        return out_n, None, out_c, None
    assert type(out_n.grad_fn).__name__.startswith(FUSED), type(out_n.grad_fn).__name__
    g = torch.randn(out_c.shape, generator=torch.Generator().manual_seed(7)).to(q.dtype)
    out_n.backward(g.to("neuron"))
    out_c.backward(g.float())
    return out_n, [t.grad for t in ins_n], out_c, [t.grad for t in ins_c]


def compare(out_n, grads_n, out_c, grads_c, dtype):
    """run_both's neuron results against its CPU ones, within TOL[dtype]."""
    tol = TOL[dtype]
    assert out_n.device.type == "neuron" and out_n.dtype == dtype
    torch.testing.assert_close(out_n.cpu().float(), out_c.detach(), rtol=tol, atol=tol)
    if grads_n is not None:
        for name, gn, gc in zip("qkv", grads_n, grads_c):
            assert gn.dtype == dtype, name
            # Gradients sum over a whole sequence: scale the tolerance with them.
            scale = max(1.0, gc.abs().max().item())
            torch.testing.assert_close(gn.cpu().float(), gc, rtol=tol, atol=tol * scale,
                                       msg=lambda m, n=name: f"grad {n}: {m}")


@pytest.mark.parametrize("dtype", FLOATS)
def test_no_mask_default_scale(neuron, dtype):
    g = torch.Generator().manual_seed(0)
    q, k, v = (rand(2, 3, 70, 32, dtype=dtype, gen=g), rand(2, 3, 300, 32, dtype=dtype, gen=g),
               rand(2, 3, 300, 32, dtype=dtype, gen=g))
    compare(*run_both(q, k, v), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_causal_custom_scale_and_value_dim(neuron, dtype):
    g = torch.Generator().manual_seed(1)
    # L > S and L < S both: PyTorch's causal mask is top-left aligned.
    for L, S in [(130, 100), (40, 150)]:
        q, k = rand(1, 2, L, 16, dtype=dtype, gen=g), rand(1, 2, S, 16, dtype=dtype, gen=g)
        v = rand(1, 2, S, 24, dtype=dtype, gen=g)  # Ev != E
        compare(*run_both(q, k, v, is_causal=True, scale=0.17), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kind", ["bool_2d", "bool_4d_bcast", "additive_full", "additive_pad"])
def test_masks(neuron, dtype, kind):
    g = torch.Generator().manual_seed(2)
    B, H, L, S = 2, 4, 65, 257
    q, k, v = (rand(B, H, L, 32, dtype=dtype, gen=g), rand(B, H, S, 32, dtype=dtype, gen=g),
               rand(B, H, S, 16, dtype=dtype, gen=g))
    if kind == "bool_2d":
        mask = torch.rand(L, S, generator=g) > 0.3
        mask[:, 0] = True  # every row keeps a key (a fully masked row is tested below)
    elif kind == "bool_4d_bcast":
        mask = torch.rand(B, 1, L, S, generator=g) > 0.5
        mask[..., 3] = True
    elif kind == "additive_full":
        mask = rand(B, H, L, S, dtype=dtype, gen=g)
    else:  # padding: the last keys of batch 1 masked with -inf, broadcast over H and L
        mask = torch.zeros(B, 1, 1, S)
        mask[1, ..., 200:] = float("-inf")
        mask = mask.to(dtype)
    compare(*run_both(q, k, v, attn_mask=mask), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_gqa(neuron, dtype):
    g = torch.Generator().manual_seed(3)
    q = rand(2, 8, 50, 32, dtype=dtype, gen=g)
    k, v = rand(2, 2, 90, 32, dtype=dtype, gen=g), rand(2, 2, 90, 32, dtype=dtype, gen=g)
    compare(*run_both(q, k, v, enable_gqa=True), dtype)
    compare(*run_both(q, k, v, enable_gqa=True, is_causal=True), dtype)


def test_transposed_inputs_and_output_layout(neuron):
    """[B, L, H, E] projections viewed as [B, H, L, E] go in without copies."""
    g = torch.Generator().manual_seed(4)
    q, k, v = (rand(2, 40, 4, 16, gen=g).transpose(1, 2) for _ in range(3))
    out_n, grads_n, out_c, grads_c = run_both(q, k, v)
    compare(out_n, grads_n, out_c, grads_c, torch.float32)
    # The result is usually transposed back and flattened: that must be a view.
    assert out_n.transpose(1, 2).is_contiguous()


def test_single_rows_with_a_short_row_stride(neuron):
    """One query and one key whose size-1 dims have stride 1 (permuted from [E, 1, 1, 1]):
    a row's stride is below its width, which the GEMMs, forward and backward, must take."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (rand(8, 1, 1, 1, gen=g).permute(1, 2, 3, 0) for _ in range(3))
    assert q.stride() == (1, 1, 1, 1)
    out_n, grads_n, out_c, grads_c = run_both(q, k, v)
    compare(out_n, grads_n, out_c, grads_c, torch.float32)


def test_fully_masked_row_matches_math(neuron):
    g = torch.Generator().manual_seed(5)
    q, k, v = rand(1, 2, 20, 16, gen=g), rand(1, 2, 30, 16, gen=g), rand(1, 2, 30, 16, gen=g)
    mask = torch.rand(20, 30, generator=g) > 0.5
    mask[4] = False
    qn, kn, vn = (t.to("neuron").requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(qn, kn, vn, attn_mask=mask.to("neuron"))
    assert type(out.grad_fn).__name__.startswith(FUSED)
    with sdpa_kernel(SDPBackend.MATH):
        qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
        ref = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=mask)
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=2e-5, atol=2e-5)
    assert torch.all(out[:, :, 4].detach().cpu() == 0)
    out.sum().backward()
    ref.sum().backward()
    for a, b in ((qn, qc), (kn, kc), (vn, vc)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=2e-5, atol=2e-5)


def test_choice_routes_unsupported_cases_to_math(neuron):
    dev = neuron
    q, k, v = (torch.randn(1, 2, 8, 4, device=dev) for _ in range(3))
    fused, math = int(SDPBackend.OVERRIDEABLE), int(SDPBackend.MATH)
    assert torch._fused_sdp_choice(q, k, v) == fused
    assert torch._fused_sdp_choice(q, k, v, dropout_p=0.3, is_causal=True, scale=0.5) == fused
    assert torch._fused_sdp_choice(q[0], k[0], v[0]) == math  # 3-D
    assert torch._fused_sdp_choice(q.half(), k, v) == math  # mixed dtypes
    assert torch._fused_sdp_choice(q, k[:, :1], v[:, :1]) == math  # heads differ, no gqa flag
    assert torch._fused_sdp_choice(q, k[:, :1], v[:, :1], enable_gqa=True) == fused
    m = torch.zeros(8, 8, device=dev)
    assert torch._fused_sdp_choice(q, k, v, m) == fused
    assert torch._fused_sdp_choice(q, k, v, m, is_causal=True) == math
    assert torch._fused_sdp_choice(q, k, v, m.requires_grad_()) == math
    with sdpa_kernel(SDPBackend.MATH):
        assert torch._fused_sdp_choice(q, k, v) == math


def test_routed_cases_still_match_cpu(neuron):
    g = torch.Generator().manual_seed(6)
    # 3-D inputs and a mask that needs its own gradient take the math path.
    q, k, v = rand(3, 10, 8, gen=g), rand(3, 12, 8, gen=g), rand(3, 12, 8, gen=g)
    out = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"))
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v),
                               rtol=2e-5, atol=2e-5)
    q, k, v = rand(1, 2, 10, 8, gen=g), rand(1, 2, 12, 8, gen=g), rand(1, 2, 12, 8, gen=g)
    bias = rand(10, 12, gen=g)
    bn = bias.to("neuron").requires_grad_()
    bc = bias.clone().requires_grad_()
    out_n = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"),
                                           attn_mask=bn)
    assert not type(out_n.grad_fn).__name__.startswith(FUSED)
    out_c = F.scaled_dot_product_attention(q, k, v, attn_mask=bc)
    out_n.sum().backward()
    out_c.sum().backward()
    torch.testing.assert_close(out_n.detach().cpu(), out_c.detach(), rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(bn.grad.cpu(), bc.grad, rtol=2e-5, atol=2e-5)


def test_long_sequence_memory(neuron):
    """L = S = 2048: the math path would hold B*H*L*S float scores (32 MiB
    here); the fused kernel needs only its inputs and outputs."""
    g = torch.Generator().manual_seed(8)
    B, H, L, E = 1, 2, 2048, 32
    q, k, v = (rand(B, H, L, E, gen=g) for _ in range(3))
    qn, kn, vn = (t.to("neuron").requires_grad_() for t in (q, k, v))
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    out = F.scaled_dot_product_attention(qn, kn, vn, is_causal=True)
    torch.neuron.synchronize()
    fwd_peak = torch.neuron.max_memory_allocated() - base
    one_score_matrix = L * L * 4  # a single head's scores, in float32
    assert fwd_peak < one_score_matrix // 4, fwd_peak
    out.backward(torch.ones_like(out))
    torch.neuron.synchronize()
    bwd_peak = torch.neuron.max_memory_allocated() - base
    assert bwd_peak < one_score_matrix // 2, bwd_peak
    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True)
    ref.backward(torch.ones_like(ref))
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-4)
    for a, b in ((qn, qc), (kn, kc), (vn, vc)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------ dropout

def dropout_run(seed, p, q, k, v, **kw):
    torch.neuron.manual_seed(seed)
    ins = [t.to("neuron").requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*ins, dropout_p=p, **kw)
    assert type(out.grad_fn).__name__.startswith(FUSED)
    return out, ins


def test_dropout_same_seed_same_result(neuron):
    g = torch.Generator().manual_seed(9)
    q, k, v = rand(2, 2, 33, 16, gen=g), rand(2, 2, 70, 16, gen=g), rand(2, 2, 70, 16, gen=g)
    a, ia = dropout_run(123, 0.3, q, k, v, is_causal=True)
    b, ib = dropout_run(123, 0.3, q, k, v, is_causal=True)
    c, _ = dropout_run(124, 0.3, q, k, v, is_causal=True)
    assert torch.equal(a.detach().cpu(), b.detach().cpu())
    assert not torch.equal(a.detach().cpu(), c.detach().cpu())
    # Consecutive calls draw fresh masks.
    torch.neuron.manual_seed(123)
    first = F.scaled_dot_product_attention(*(t.to("neuron") for t in (q, k, v)), dropout_p=0.3)
    second = F.scaled_dot_product_attention(*(t.to("neuron") for t in (q, k, v)), dropout_p=0.3)
    assert not torch.equal(first.cpu(), second.cpu())
    a.sum().backward()
    b.sum().backward()
    for x, y in zip(ia, ib):
        assert torch.equal(x.grad.cpu(), y.grad.cpu())


def test_dropout_half_statistics(neuron):
    """Uniform attention over V = I makes each output element one dropout
    draw: 2/S when kept (probability 1/2), else 0."""
    L = S = 256
    q = torch.zeros(1, 2, L, 16)
    k = torch.randn(1, 2, S, 16)
    v = torch.eye(S).expand(1, 2, S, S).contiguous()
    out, _ = dropout_run(5, 0.5, q, k, v)
    out = out.detach().cpu().double() * S / 2  # 1 kept, 0 dropped
    assert set(out.unique().tolist()) <= {0.0, 1.0}
    n = out.numel()
    mean, var = out.mean().item(), out.var().item()
    # Bernoulli(1/2): mean 1/2, variance 1/4; 5 standard errors of slack.
    assert abs(mean - 0.5) < 5 * 0.5 / n ** 0.5, mean
    assert abs(var - 0.25) < 0.01, var
    # Unbiased: E[dropout(P) @ V] = P @ V.
    assert abs((out * 2 / S).mean().item() - 1 / S) < 5 * (1 / S) / n ** 0.5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_gradients_consistent_with_mask(neuron, dtype):
    """The backward regenerates the forward's mask: recover the mask with
    V = I, then compare gradients with the CPU using that explicit mask."""
    g = torch.Generator().manual_seed(10)
    B, H, L, S, E, p = 1, 2, 40, 90, 16, 0.4
    q, k = rand(B, H, L, E, dtype=dtype, gen=g), rand(B, H, S, E, dtype=dtype, gen=g)
    v = rand(B, H, S, 24, dtype=dtype, gen=g)
    eye = torch.eye(S, dtype=dtype).expand(B, H, S, S).contiguous()
    probe, _ = dropout_run(77, p, q, k, eye, is_causal=True)
    keep = probe.detach().cpu() != 0
    out, ins = dropout_run(77, p, q, k, v, is_causal=True)
    grad = rand(B, H, L, 24, gen=g)
    out.backward(grad.to(dtype).to("neuron"))
    qc, kc, vc = (t.float().requires_grad_() for t in (q, k, v))
    causal = torch.ones(L, S, dtype=torch.bool).tril()
    attn = (qc @ kc.transpose(-1, -2) / E ** 0.5).masked_fill(~causal, float("-inf")).softmax(-1)
    # Causally masked positions have probability 0 and look "dropped" in the probe.
    ref = (attn * keep / (1 - p)) @ vc
    ref.backward(grad.to(dtype).float())
    tol = TOL[dtype] if dtype != torch.float32 else 1e-5
    torch.testing.assert_close(out.detach().cpu().float(), ref.detach(), rtol=tol, atol=tol)
    for a, b in zip(ins, (qc, kc, vc)):
        torch.testing.assert_close(a.grad.cpu().float(), b.grad, rtol=tol, atol=tol)
