"""Native ops against the CPU reference (the full OpInfo sweep lives in tests/conformance)."""

import math

import pytest
import torch
import torch.nn.functional as F

import openneuron


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    """The ops in this file must run natively: any CPU fallback raises."""
    monkeypatch.setenv("OPENNEURON_FALLBACK", "error")


def same(fn, *args, rtol=1e-5, atol=1e-6):
    cpu = fn(*args)
    dev = fn(*[a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args])
    assert dev.device.type == "neuron"
    torch.testing.assert_close(dev.cpu(), cpu, rtol=rtol, atol=atol)


X = torch.randn(17, 33)
Y = torch.randn(17, 33)
ROW = torch.randn(33)


@pytest.mark.parametrize("fn", [
    lambda a, b: a + b, lambda a, b: a - 2.5 * b, lambda a, b: torch.add(a, b, alpha=3),
    lambda a, b: a * b, lambda a, b: a / (b.abs() + 1), lambda a, b: torch.maximum(a, b),
    lambda a, b: torch.where(a > b, a, b), lambda a, b: (a < b).float(), lambda a, b: a + 1,
    lambda a, b: 2 - a, lambda a, b: torch.addcmul(a, a, b, value=0.5),
])
def test_binary_and_ternary(neuron, fn):
    same(fn, X, Y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.int64, torch.bool])
@pytest.mark.parametrize("make", [
    lambda a: a.t(),  # 2-D transpose
    lambda a: a[:130].t(),  # sliced source, sides not a multiple of the tile
    lambda a: a.view(5, 52, 200).transpose(1, 2),  # batched
    lambda a: a.view(5, 52, 10, 20).permute(0, 2, 1, 3),  # heads permute, inner run kept
    lambda a: a.t()[3:150:2],  # strided rows
    lambda a: a[:, :1].expand(260, 140).t(),  # broadcast source
])
def test_transposed_copies_are_exact(neuron, dtype, make):
    # Sides above every dtype's tile (32-128 elements) exercise the tiled transposed copy.
    a = (torch.randn(260, 200) * 50).to(dtype)
    cpu = make(a).contiguous()
    dev = make(a.to("neuron")).contiguous()
    assert dev.is_contiguous()
    assert torch.equal(dev.cpu(), cpu)


def test_broadcasting_and_noncontiguous(neuron):
    same(lambda a, r: a + r, X, ROW)
    same(lambda a, r: a.t() * r[:17], X, ROW)
    same(lambda a, b: a[:, 1::2] - b[:, 1::2], X, Y)
    same(lambda a, b: a[::3, ::2].t() * b.t()[::2, ::3], X, Y)


@pytest.mark.parametrize("fn", [
    torch.relu, torch.exp, torch.tanh, torch.sigmoid, torch.neg, torch.abs, F.silu,
    lambda a: F.gelu(a), lambda a: F.gelu(a, approximate="tanh"), lambda a: a.abs().sqrt(),
    lambda a: a.abs().add(0.1).log(), lambda a: a.abs().add(0.1).rsqrt(),
])
def test_unary(neuron, fn):
    same(fn, X)


@pytest.mark.parametrize("fn", [
    lambda a: a.sum(), lambda a: a.sum(0), lambda a: a.sum(1, keepdim=True), lambda a: a.mean(),
    lambda a: a.mean((0, 1)), lambda a: a.amax(1), lambda a: a.amin(0),
])
def test_reductions(neuron, fn):
    same(fn, X, rtol=1e-5, atol=1e-5)


def test_integer_sum_promotes_to_int64(neuron):
    t = torch.arange(10, dtype=torch.int32)
    r = t.to(neuron).sum()
    assert r.dtype == torch.int64 and r.item() == 45


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.bfloat16, 2e-2)])
def test_matmul_family(neuron, dtype, tol):
    a, b, c = torch.randn(31, 64, dtype=dtype), torch.randn(64, 23, dtype=dtype), torch.randn(23, dtype=dtype)
    same(torch.mm, a, b, rtol=tol, atol=tol)
    same(lambda a, b: a.t().t() @ b.t().contiguous().t(), a, b, rtol=tol, atol=tol)
    same(lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=2.0), a, b, c, rtol=tol, atol=tol)
    same(lambda a, b: F.linear(a, b.t()), a, b, rtol=tol, atol=tol)
    x, y = torch.randn(3, 8, 16, dtype=dtype), torch.randn(3, 16, 5, dtype=dtype)
    same(torch.bmm, x, y, rtol=tol, atol=tol)


# Float32 GEMM goes to BLIS, split over the pool by batch, row blocks or column
# blocks; other layouts go to oneDNN. Sizes are above the split threshold.
GEMM_LAYOUTS = [
    ("rows", lambda a, b: a[:96, :130] @ b[:130, :200]),
    ("columns", lambda a, b: a[:40, :80] @ b[:80, :1000]),
    ("transposed", lambda a, b: a[:130, :96].t() @ b[:200, :130].t()),
    ("strided rows", lambda a, b: a[::2, :130] @ b[:130, ::1][:, :300]),
    ("general strides", lambda a, b: a[::2, ::2][:64, :130] @ b[::2, ::3][:130, :200]),
    ("vector", lambda a, b: a[:1, :300] @ b[:300, :700]),
    ("column", lambda a, b: a[:600, :300] @ b[:300, :1]),
    ("batch 1", lambda a, b: a[:128, :256].unsqueeze(0) @ b[:256, :128].unsqueeze(0)),
    ("batch", lambda a, b: a[:192, :64].reshape(3, 64, 64) @ b[:192, :100].reshape(3, 64, 100)),
    ("broadcast batch", lambda a, b: torch.bmm(a[:256, :64].reshape(4, 64, 64),
                                               b[:64, :200].expand(4, 64, 200))),
    ("addmm", lambda a, b: torch.addmm(b[:96, :200], a[:96, :130], b[:130, :200], beta=0.5, alpha=-2.0)),
    ("baddbmm", lambda a, b: torch.baddbmm(b[:64, :100].expand(3, 64, 100), a[:192, :64].reshape(3, 64, 64),
                                           b[:192, :100].reshape(3, 64, 100), beta=1.5, alpha=0.25)),
    # Dense but not row-major: a linear layer's transposed weight, a permuted batch.
    ("linear weight", lambda a, b: a[:64, :130] @ b.reshape(-1)[:200 * 130].reshape(200, 130).t()),
    ("permuted batch", lambda a, b: a[:192, :64].reshape(64, 3, 64).permute(1, 0, 2)
     @ b.reshape(-1)[:3 * 64 * 50].reshape(64, 3, 50).transpose(0, 1)),
]


@pytest.mark.parametrize("name,fn", GEMM_LAYOUTS)
def test_float32_gemm_layouts_match_cpu(neuron, name, fn):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1200, 1200, generator=g), torch.randn(1200, 1200, generator=g)
    same(fn, a, b, rtol=1e-4, atol=1e-4)


# Half types: oneDNN's half matmul where the host has one, else the float32 engine on
# converted operands (a dense operand converted in its own memory order), rounded once.
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name,fn", GEMM_LAYOUTS)
def test_half_gemm_layouts_match_cpu(neuron, dtype, name, fn):
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(1200, 1200, generator=g).to(dtype) for _ in range(2))
    same(fn, a, b, rtol=2e-2, atol=1e-1)


def test_float32_gemm_beta_zero_ignores_nan_output(neuron):
    # beta == 0 means C is not read: NaN in `input` or `out` must not leak through.
    a, b = torch.randn(200, 300), torch.randn(300, 250)
    nan = torch.full((200, 250), float("nan"))
    same(lambda c, a, b: torch.addmm(c, a, b, beta=0), nan, a, b, rtol=1e-4, atol=1e-4)
    out = torch.full((200, 250), float("nan"), device=neuron)
    torch.mm(a.to(neuron), b.to(neuron), out=out)
    torch.testing.assert_close(out.cpu(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_addr_rounds_like_cpu(neuron, dtype):
    # The CPU's addr computes beta*self + (alpha*vec1)*vec2 in the dtype with beta/alpha
    # rounded to it; where the two terms cancel, any other order is off by many bf16 ulps.
    g = torch.Generator().manual_seed(0)
    m = (torch.randn(5, 10, generator=g) * 5).to(dtype)
    v1, v2 = (torch.randn(5, generator=g) * 4).to(dtype), (torch.randn(10, generator=g) * 4).to(dtype)
    for beta, alpha in ((0.6, 0.2), (1, 1), (0, 0.3), (2.5, 1)):
        same(lambda a, b, c: torch.addr(a, b, c, beta=beta, alpha=alpha), m, v1, v2, rtol=0, atol=0)
        same(lambda a, b, c: torch.addr(a, b, c, beta=beta, alpha=alpha), m[0], v1, v2, rtol=0, atol=0)
    out = torch.empty(5, 10, dtype=dtype, device=neuron)
    torch.addr(m.to(neuron), v1.to(neuron), v2.to(neuron), beta=0.6, alpha=0.2, out=out)
    assert torch.equal(out.cpu(), torch.addr(m, v1, v2, beta=0.6, alpha=0.2))
    md = m.to(neuron)
    md.addr_(v1.to(neuron), v2.to(neuron), beta=0.6, alpha=0.2)
    assert torch.equal(md.cpu(), m.clone().addr_(v1, v2, beta=0.6, alpha=0.2))
    i = torch.randint(-5, 5, (5, 10), generator=g)
    same(lambda a, b, c: torch.addr(a, b, c, beta=2, alpha=3), i, i[:, 0], i[0], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mul_div_by_0dim_wider_tensor_like_cpu(neuron, dtype):
    # CPU mul/div read a single-element second operand unrounded (float) for Half/BFloat16;
    # a 0-dim float32 device tensor (a norm, a loss scale) must not be rounded first.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, generator=g).to(dtype)
    for s in (torch.tensor(0.4318763), torch.tensor(3.0000001, dtype=torch.float64), torch.tensor(3000001)):
        for fn in (torch.mul, torch.div, lambda a, b: a * b, lambda a, b: a.mul(b)):
            assert torch.equal(fn(x.to(neuron), s.to(neuron)).cpu(), fn(x, s))
        xd = x.to(neuron)
        xd.mul_(s.to(neuron))
        assert torch.equal(xd.cpu(), x.clone().mul_(s))
        assert torch.equal(torch.add(x.to(neuron), s.to(neuron)).cpu(), torch.add(x, s))


def test_softmax_and_cross_entropy(neuron):
    same(lambda a: torch.softmax(a, dim=1), X)
    same(lambda a: torch.log_softmax(a, dim=0), X)
    target = torch.randint(0, 33, (17,))
    target[3] = -100
    same(lambda a, t: F.cross_entropy(a, t), X, target)
    same(lambda a, t: F.cross_entropy(a, t, reduction="sum"), X, target)
    same(lambda a, t: F.nll_loss(a, t, reduction="none", ignore_index=5), X, target.clamp(min=0))


def test_copies_views_and_dtype_conversion(neuron):
    d = X.to(neuron)
    assert torch.equal(d.cpu(), X)
    assert torch.equal(d.t().contiguous().cpu(), X.t().contiguous())
    assert torch.equal(d[2:5, 1:10:3].cpu(), X[2:5, 1:10:3])
    assert torch.equal(d.view(33, 17).cpu(), X.view(33, 17))
    assert torch.equal(d.unsqueeze(0).expand(2, 17, 33).cpu(), X.unsqueeze(0).expand(2, 17, 33))
    assert torch.equal(d.to(torch.bfloat16).cpu(), X.to(torch.bfloat16))
    assert torch.equal(d.to(torch.int32).cpu(), X.to(torch.int32))
    assert torch.equal(d.to("neuron:1").cpu(), X)
    e = torch.zeros(17, 33, device=neuron)
    e[:, 3] = 7.0
    expected = torch.zeros(17, 33)
    expected[:, 3] = 7.0
    assert torch.equal(e.cpu(), expected)
    d.t().copy_(torch.ones(33, 17))
    assert torch.equal(d.cpu(), torch.ones(17, 33))


def test_creation_ops(neuron):
    assert torch.equal(torch.zeros(3, 4, device=neuron).cpu(), torch.zeros(3, 4))
    assert torch.equal(torch.full((2, 2), 3.5, device=neuron).cpu(), torch.full((2, 2), 3.5))
    assert torch.equal(torch.arange(2, 11, 3, device=neuron).cpu(), torch.arange(2, 11, 3))
    assert torch.equal(torch.arange(0, 1, 0.25, device=neuron).cpu(), torch.arange(0, 1, 0.25))
    assert torch.ones(5, dtype=torch.int64, device=neuron).sum().item() == 5


def test_item_and_scalars(neuron):
    assert torch.tensor(3.25, device=neuron).item() == 3.25
    assert torch.tensor(True, device=neuron).item() is True
    assert torch.tensor([7], dtype=torch.int32, device=neuron).item() == 7


def test_in_place_and_out_variants(neuron):
    a = X.clone().to(neuron)
    a.add_(Y.to(neuron), alpha=2).mul_(0.5)
    torch.testing.assert_close(a.cpu(), (X + 2 * Y) * 0.5)
    out = torch.empty(0, device=neuron)
    torch.mul(X.to(neuron), Y.to(neuron), out=out)
    torch.testing.assert_close(out.cpu(), X * Y)


def test_device_errors_surface_at_sync_with_op_name(neuron):
    logits = torch.randn(4, 3, device=neuron)
    bad_target = torch.tensor([0, 1, 7, 2], device=neuron)
    with pytest.raises(RuntimeError, match="out of bounds"):
        F.nll_loss(logits, bad_target).item()
    assert torch.ones(2, device=neuron).sum().item() == 2.0  # the stream recovers


def test_conjugate_views_copy_correctly(neuron):
    x = torch.randn(5, dtype=torch.complex64)
    d = x.to(neuron)
    torch.testing.assert_close(d.conj().cpu(), x.conj())
    torch.testing.assert_close(d.conj().resolve_conj().cpu(), x.conj().resolve_conj())
    y = torch.empty(5, dtype=torch.complex64, device=neuron)
    y.copy_(d.conj())
    torch.testing.assert_close(y.cpu(), x.conj())


def test_integer_true_division_and_transposed_vector_matmul(neuron):
    a, b = torch.tensor([7, -8]), torch.tensor([2, 3])
    torch.testing.assert_close((a.to(neuron) / b.to(neuron)).cpu(), a / b)
    x, y = torch.randn(2, 3), torch.randn(1, 3)
    torch.testing.assert_close((x.to(neuron) @ y.to(neuron).T).cpu(), x @ y.T)
    assert torch.equal(torch.arange(0, 2.5, 1.2, dtype=torch.int64, device=neuron).cpu(),
                       torch.arange(0, 2.5, 1.2, dtype=torch.int64))
    # Narrower integer types count the length from the real bounds (ATen does).
    for dt in (torch.int8, torch.int16, torch.int32, torch.uint8):
        for args in ((3.1,), (1.0, 5.000001, 2.0), (2.1, -2.9, -1.0) if dt != torch.uint8 else (0, 3)):
            assert torch.equal(torch.arange(*args, dtype=dt, device=neuron).cpu(),
                               torch.arange(*args, dtype=dt)), (dt, args)
    assert torch.tensor(3.0, device=neuron).sum(0).item() == 3.0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_log_softmax_in_half_types_rounds_like_the_cpu(neuron, dtype):
    # Over the last dim the CPU rounds the row's sum and its log to the input type before
    # subtracting; over other dims it does not. Both are matched bit for bit.
    x = (torch.randn(64, 48, generator=torch.Generator().manual_seed(0)) * 4).to(dtype)
    for dim in (-1, 0):
        torch.testing.assert_close(torch.log_softmax(x.to(neuron), dim).cpu(),
                                   torch.log_softmax(x, dim), rtol=0, atol=0)


def test_chunked_linear_cross_entropy_uses_the_cpu_defaults(neuron):
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 8, generator=g).to(torch.bfloat16)
    w = torch.randn(32, 8, generator=g).to(torch.bfloat16)
    t = torch.randint(0, 32, (16,), generator=g)

    def loss(device):
        xi = x.to(device).requires_grad_()
        wi = w.to(device).requires_grad_()
        out = torch.nn.functional.linear_cross_entropy(
            xi, wi, t.to(device), reduction="none", options=LinearCrossEntropyOptions())
        out.backward(torch.ones_like(out))
        return out.cpu(), xi.grad.cpu(), wi.grad.cpu()

    for got, ref in zip(loss(neuron), loss("cpu")):
        torch.testing.assert_close(got, ref, rtol=0, atol=0)


@pytest.mark.parametrize("op,atol", [(torch.exp, 1e-44), (torch._C._nn.gelu, 1.5e-6)])
def test_vector_path_equals_the_scalar_path_bit_for_bit(neuron, op, atol):
    # Contiguous float32 exp (and softmax) and gelu run an 8- or 16-lane AVX loop;
    # strided layouts run the scalar formula. Both must give the same bits, specials
    # included; gelu's vector exp skips the cases that cannot change its result
    # (gelu's exp underflowing below 2^-126 for x < -13.2 is one of them).
    g = torch.Generator().manual_seed(0)
    vals = torch.cat([torch.randn(4000, generator=g) * 30, torch.linspace(-110, 95, 4000),
                      torch.linspace(-19, -12, 992),
                      torch.tensor([0.0, -0.0, float("nan"), float("inf"), float("-inf"), 88.7228394,
                                    88.8, 1e30, -1e30, -103.972084, -104.0, 1e-30] + [0.0] * 4)])
    x = vals.view(-1, 16).to(neuron)  # 9008 x 16
    contiguous = op(x).cpu()
    strided = torch.empty(16, x.shape[0], device=neuron).t()
    op(x, out=strided)  # a transposed output: no flat loop covers both
    assert not strided.is_contiguous()
    assert torch.equal(contiguous.view(torch.int32), strided.cpu().contiguous().view(torch.int32))
    torch.testing.assert_close(contiguous, op(vals.view(-1, 16)), rtol=1.3e-6, atol=atol,
                               equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_type_rsqrt_and_pow_minus_half_are_the_cpu_kernels_bit_for_bit(neuron, dtype):
    # In float16/bfloat16, rsqrt and pow(x, -0.5) run PyTorch's CPU kernel in place on
    # device memory (host library): the CPU rounds sqrt(x) to the half type first in the
    # scalar tail of its vectorised loop (all of a small tensor) but not in the vector
    # body, so only its own kernel matches it at every size. float32 keeps our lowering.
    info = torch.finfo(dtype)
    min_subnormal = info.smallest_normal * info.eps
    lo, hi = math.log2(min_subnormal), math.log2(info.max)
    specials = torch.tensor([0.0, -0.0, math.inf, -1.0, math.nan, min_subnormal, info.max])
    fns = {
        "rsqrt": torch.rsqrt,
        "rsqrt_": lambda t: t.clone().rsqrt_(),
        "rsqrt.out": lambda t: torch.rsqrt(t, out=torch.empty_like(t)),
        "pow": lambda t: torch.pow(t, -0.5),
        "pow_": lambda t: t.clone().pow_(-0.5),
        "pow.out": lambda t: torch.pow(t, -0.5, out=torch.empty_like(t)),
    }
    g = torch.Generator().manual_seed(0)
    openneuron.reset_library_stats()
    for n in (7, 33, 100, 4099):
        # log-uniform over the whole range, subnormals up to the largest finite value, and a
        # third of the values subnormal
        e = torch.empty(n).uniform_(lo, hi, generator=g)
        e[::3] = torch.empty(e[::3].numel()).uniform_(lo, math.log2(info.smallest_normal),
                                                      generator=g)
        x = torch.exp2(e)
        if n > len(specials):
            x[-len(specials):] = specials
        x = x.to(dtype)
        assert (x != 0).logical_and(x.abs() < info.smallest_normal).any(), "no subnormal input"
        d = x.to(neuron)
        for name, fn in fns.items():
            got, want = fn(d).cpu(), fn(x)
            assert got.dtype == dtype
            assert torch.equal(got.view(torch.int16), want.view(torch.int16)), (name, n)
    ran = openneuron.library_stats()  # the CPU fallback would raise here (no_fallback)
    for op in ("aten::rsqrt", "aten::rsqrt_", "aten::rsqrt.out", "aten::pow.Tensor_Scalar_out"):
        assert ran.get(op, 0) >= 4, (op, ran)

    # float32 stays on our own lowering
    openneuron.reset_library_stats()
    x = torch.rand(100, generator=g) + 0.1
    torch.testing.assert_close(torch.rsqrt(x.to(neuron)).cpu(), torch.rsqrt(x))
    torch.testing.assert_close(torch.pow(x.to(neuron), -0.5).cpu(), torch.pow(x, -0.5))
    assert not any("rsqrt" in op or "pow" in op for op in openneuron.library_stats())
