"""Activations and unary math on neuron against the CPU: forward in float32/bfloat16/float16
(and integer dtypes where the CPU has them), in-place and out= variants, gradients through
autograd, special values, and that none of these ops falls back to the CPU."""

import functools
import math

import pytest
import torch
import torch.nn.functional as F

import helpers
import openneuron
from helpers import FLOATS


@pytest.fixture
def native(monkeypatch):
    """Every op in the test must run natively: a fallback raises, and none is counted."""
    monkeypatch.setenv("OPENNEURON_FALLBACK", "error")
    openneuron.reset_fallback_stats()
    yield
    torch.neuron.synchronize()
    assert openneuron.fallback_stats() == {}


close = functools.partial(helpers.close, equal_nan=True)


def sample(lo, hi, n=4099, points=()):
    """Uniform values in [lo, hi] plus the given boundary points (odd size: a ragged tail)."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, generator=g) * (hi - lo) + lo
    return torch.cat([x, torch.tensor(points, dtype=torch.float32)])


# name -> (fn(x), input range, boundary points). The boundaries are PyTorch's
# thresholds, so a kernel that gets a comparison wrong fails here.
ACTS = {
    "softplus": (F.softplus, (-30, 30), (0.0, 20.0, 20.001, 19.99, -20.0)),
    "softplus_beta": (lambda x: F.softplus(x, beta=2.0, threshold=5.0), (-10, 10),
                      (2.5, 2.49, 2.51, 0.0)),
    "mish": (F.mish, (-20, 20), (0.0,)),
    "hardswish": (F.hardswish, (-5, 5), (-3.0, 3.0, 0.0, -2.999, 2.999)),
    "hardsigmoid": (F.hardsigmoid, (-5, 5), (-3.0, 3.0, 0.0)),
    "elu": (lambda x: F.elu(x, alpha=0.7), (-10, 10), (0.0,)),
    "selu": (F.selu, (-10, 10), (0.0,)),
    "celu": (lambda x: F.celu(x, alpha=1.3), (-10, 10), (0.0,)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), (-10, 10), (0.0,)),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 1.25), (-3, 3), (-0.5, 1.25)),
    "relu6": (F.relu6, (-3, 9), (0.0, 6.0)),
    "logsigmoid": (F.logsigmoid, (-40, 40), (0.0,)),
}

MATH = {
    "exp2": (torch.exp2, (-30, 30)),
    "expm1": (torch.expm1, (-5, 5)),
    "log1p": (torch.log1p, (-0.99, 20)),
    "log2": (torch.log2, (1e-3, 1e3)),
    "log10": (torch.log10, (1e-3, 1e3)),
    "trunc": (torch.trunc, (-50, 50)),
    "frac": (torch.frac, (-50, 50)),
    "tan": (torch.tan, (-1.5, 1.5)),
    "asin": (torch.asin, (-1, 1)),
    "acos": (torch.acos, (-1, 1)),
    "atan": (torch.atan, (-20, 20)),
    "sinh": (torch.sinh, (-10, 10)),
    "cosh": (torch.cosh, (-10, 10)),
    "asinh": (torch.asinh, (-100, 100)),
    "acosh": (torch.acosh, (1, 100)),
    "atanh": (torch.atanh, (-0.99, 0.99)),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", ACTS)
def test_activation_forward_backward(neuron, native, name, dtype):
    fn, (lo, hi), points = ACTS[name]
    x = sample(lo, hi, points=points).to(dtype).requires_grad_()
    xd = x.detach().to(neuron).requires_grad_()
    ref, got = fn(x), fn(xd)
    close(got.detach(), ref.detach())
    g = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    ref.backward(g)
    got.backward(g.to(neuron))
    close(xd.grad, x.grad)


INPLACE = {
    "elu": lambda x: F.elu(x, alpha=0.7, inplace=True),
    "selu": lambda x: F.selu(x, inplace=True),
    "celu": lambda x: F.celu(x, alpha=1.3, inplace=True),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2, inplace=True),
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 1.25, inplace=True),
    "relu6": lambda x: F.relu6(x, inplace=True),
    "hardswish": lambda x: F.hardswish(x, inplace=True),
    "hardsigmoid": lambda x: F.hardsigmoid(x, inplace=True),
    "mish": lambda x: F.mish(x, inplace=True),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", INPLACE)
def test_activation_inplace_and_grad(neuron, native, name, dtype):
    # In-place on a non-leaf: elu/leaky_relu backward then run on the result
    # (is_result / self_is_result).
    fn = INPLACE[name]
    x = sample(-5, 5, n=1000, points=(0.0, -3.0, 3.0)).to(dtype).requires_grad_()
    xd = x.detach().to(neuron).requires_grad_()
    ref = fn(x * 1.5)
    got = fn(xd * 1.5)
    close(got.detach(), ref.detach())
    ref.sum().backward()
    got.sum().backward()
    close(xd.grad, x.grad)


OUT_VARIANTS = {
    "softplus": lambda x, out: torch.ops.aten.softplus.out(x, 1.5, 3.0, out=out),
    "mish": lambda x, out: torch.ops.aten.mish.out(x, out=out),
    "hardswish": lambda x, out: torch.ops.aten.hardswish.out(x, out=out),
    "hardsigmoid": lambda x, out: torch.ops.aten.hardsigmoid.out(x, out=out),
    "elu": lambda x, out: torch.ops.aten.elu.out(x, 0.5, 1.5, 2.0, out=out),
    "leaky_relu": lambda x, out: torch.ops.aten.leaky_relu.out(x, 0.3, out=out),
    "hardtanh": lambda x, out: torch.ops.aten.hardtanh.out(x, -2.0, 0.5, out=out),
    "log_sigmoid": lambda x, out: torch._C._nn.log_sigmoid(x, out=out),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", OUT_VARIANTS)
def test_activation_out(neuron, native, name, dtype):
    fn = OUT_VARIANTS[name]
    x = sample(-6, 6, n=300).to(dtype).reshape(20, 15)
    ref = fn(x, torch.empty(0, dtype=dtype))
    out = torch.empty(0, dtype=dtype, device=neuron)  # resized by the op
    res = fn(x.to(neuron), out)
    assert res is out
    close(out, ref)
    # A strided out (a transposed view) is written in place, not replaced.
    base = torch.zeros(15, 20, dtype=dtype, device=neuron)
    fn(x.to(neuron), base.t())
    close(base.t(), ref)


BACKWARD_OPS = {
    "softplus_backward": lambda g, x: torch.ops.aten.softplus_backward(g, x, 2.0, 3.0),
    "mish_backward": lambda g, x: torch.ops.aten.mish_backward(g, x),
    "hardswish_backward": lambda g, x: torch.ops.aten.hardswish_backward(g, x),
    "hardsigmoid_backward": lambda g, x: torch.ops.aten.hardsigmoid_backward(g, x),
    "elu_backward": lambda g, x: torch.ops.aten.elu_backward(g, 0.7, 1.2, 0.9, False, x),
    "elu_backward_result": lambda g, x: torch.ops.aten.elu_backward(g, 0.7, 1.2, 0.9, True, x),
    "leaky_relu_backward": lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, 0.1, False),
    "hardtanh_backward": lambda g, x: torch.ops.aten.hardtanh_backward(g, x, -1.0, 2.0),
    "log_sigmoid_backward": lambda g, x: torch.ops.aten.log_sigmoid_backward(
        g, x, torch.empty(0, dtype=x.dtype, device=x.device)),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", BACKWARD_OPS)
def test_backward_ops_direct(neuron, native, name, dtype):
    # Boundary points of each backward formula, on non-contiguous inputs.
    fn = BACKWARD_OPS[name]
    x = sample(-6, 6, n=510, points=(-3.0, 3.0, 0.0, -1.0, 2.0, 1.5)).to(dtype).reshape(2, 258)
    g = torch.randn(258, 2, generator=torch.Generator().manual_seed(3)).to(dtype)
    if name == "log_sigmoid_backward":
        # The CPU kernel reads its buffer; give it the one its forward makes.
        _, buf = torch.ops.aten.log_sigmoid_forward(x)
        ref = torch.ops.aten.log_sigmoid_backward(g.t(), x, buf)
    else:
        ref = fn(g.t(), x)
    close(fn(g.to(neuron).t(), x.to(neuron)), ref)


BACKWARD_OUT = {
    "softplus": lambda g, x, o: torch.ops.aten.softplus_backward.grad_input(g, x, 2.0, 3.0,
                                                                            grad_input=o),
    "hardswish": lambda g, x, o: torch.ops.aten.hardswish_backward.out(g, x, out=o),
    "hardsigmoid": lambda g, x, o: torch.ops.aten.hardsigmoid_backward.grad_input(g, x,
                                                                                  grad_input=o),
    "elu": lambda g, x, o: torch.ops.aten.elu_backward.grad_input(g, 0.7, 1.2, 0.9, False, x,
                                                                  grad_input=o),
    "leaky_relu": lambda g, x, o: torch.ops.aten.leaky_relu_backward.grad_input(g, x, 0.1, False,
                                                                                grad_input=o),
    "hardtanh": lambda g, x, o: torch.ops.aten.hardtanh_backward.grad_input(g, x, -1.0, 2.0,
                                                                            grad_input=o),
}


@pytest.mark.parametrize("name", BACKWARD_OUT)
def test_backward_out_variants(neuron, native, name):
    fn = BACKWARD_OUT[name]
    x = sample(-6, 6, n=200, points=(-3.0, 3.0, 0.0, -1.0, 2.0))
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(5))
    ref = fn(g, x, torch.empty(0))
    out = torch.empty(0, device=neuron)
    assert fn(g.to(neuron), x.to(neuron), out) is out
    close(out, ref)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", MATH)
def test_unary_math(neuron, native, name, dtype):
    fn, (lo, hi) = MATH[name]
    x = sample(lo, hi)
    if name == "expm1":  # tiny arguments, where exp(x) - 1 would cancel
        x = torch.cat([x, torch.tensor([1e-7, -3e-6, 2e-4, 0.0])])
    x = x.to(dtype)
    close(fn(x.to(neuron)), fn(x))
    # in-place and out=
    xd = x.to(neuron)
    getattr(xd, name + "_")()
    close(xd, fn(x))
    out = torch.empty(0, dtype=dtype, device=neuron)
    fn(x.to(neuron), out=out)
    close(out, fn(x))
    # a non-contiguous input
    xt = x[: 64 * 64].reshape(64, 64).t()
    close(fn(xt.to(neuron)), fn(xt))


@pytest.mark.parametrize("name", [n for n in MATH if n not in ("frac",)])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool], ids=str)
def test_unary_math_integers(neuron, native, name, dtype):
    # Integer and Bool inputs promote to float (trunc keeps integers, rejects Bool).
    fn = MATH[name][0]
    x = torch.arange(-5, 60).to(dtype) if dtype != torch.bool else torch.tensor([True, False])
    if name == "trunc" and dtype == torch.bool:
        with pytest.raises(NotImplementedError, match="Bool"):
            fn(x.to(neuron))
        return
    close(fn(x.to(neuron)), fn(x))


@pytest.mark.parametrize("name", ["exp2", "expm1", "log1p", "log2", "tan", "asin", "sinh",
                                  "cosh", "asinh", "acosh", "atanh", "trunc", "frac"])
def test_unary_math_special_values(neuron, native, name):
    fn = MATH[name][0]
    x = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 1e30, -1e30, 89.0,
                      -89.0, 200.0, 1e-40])
    close(fn(x.to(neuron)), fn(x), rtol=1e-6, atol=0)


def test_activation_special_values(neuron, native):
    x = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-40, 88.0, -104.0])
    for fn in [F.softplus, F.mish, F.hardswish, F.hardsigmoid, F.elu, F.selu, F.leaky_relu,
               F.hardtanh, F.relu6, F.logsigmoid]:
        close(fn(x.to(neuron)), fn(x))
    # hardtanh is clamp: min above max gives max, a NaN bound gives NaN.
    for lo, hi in [(2.0, 1.0), (math.nan, 1.0), (-1.0, math.nan)]:
        close(torch.ops.aten.hardtanh(x.to(neuron), lo, hi), torch.ops.aten.hardtanh(x, lo, hi))


def test_math_inplace_integer_rejected(neuron):
    x = torch.arange(4, dtype=torch.int32, device=neuron)
    with pytest.raises(RuntimeError, match="can't be cast"):
        x.exp2_()
    with pytest.raises(NotImplementedError, match="Int"):
        torch.frac(x)
    with pytest.raises(NotImplementedError, match="Int"):
        F.softplus(x)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16, torch.uint8], ids=str)
def test_hardtanh_integers(neuron, native, dtype):
    x = torch.arange(-20, 40).to(dtype)
    limits = [(0, 6), (3, 17)] + ([] if dtype == torch.uint8 else [(-1, 1), (-7, 2)])
    for lo, hi in limits:
        close(F.hardtanh(x.to(neuron), lo, hi), F.hardtanh(x, lo, hi))
    close(F.relu6(x.to(neuron)), F.relu6(x))
    with pytest.raises(RuntimeError, match="Bool inputs not supported"):
        F.hardtanh(torch.ones(2, dtype=torch.bool, device=neuron))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64, torch.uint8, torch.bool],
                         ids=str)
def test_isinf_isfinite(neuron, native, dtype):
    if dtype.is_floating_point:
        x = torch.tensor([math.nan, math.inf, -math.inf, 0.0, 1.0, -65504.0, 3e38]).to(dtype)
    else:
        x = torch.arange(0, 5).to(dtype)
    for fn in (torch.isinf, torch.isfinite):
        close(fn(x.to(neuron)), fn(x))
    out = torch.empty(0, dtype=torch.bool, device=neuron)
    torch.ops.aten.isinf.out(x.to(neuron), out=out)
    close(out, torch.isinf(x))


def test_isinf_isfinite_complex(neuron, native):
    x = torch.tensor([complex(math.inf, 0), complex(0, -math.inf), complex(math.nan, 1),
                      complex(1, 2), complex(0, math.nan)], dtype=torch.complex64)
    for fn in (torch.isinf, torch.isfinite):
        close(fn(x.to(neuron)), fn(x))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64, torch.int8], ids=str)
def test_fmod(neuron, native, dtype):
    g = torch.Generator().manual_seed(4)
    if dtype.is_floating_point:
        a = (torch.randn(37, 41, generator=g) * 20).to(dtype)
        b = (torch.randn(41, generator=g) * 3).to(dtype)
        b[b == 0] = 1
        s = -2.5
    else:
        a = torch.randint(-100, 100, (37, 41), generator=g).to(dtype)
        b = torch.randint(1, 9, (41,), generator=g).to(dtype) * torch.tensor([1, -1]).repeat(21)[:41].to(dtype)
        s = -7
    ad, bd = a.to(neuron), b.to(neuron)
    close(torch.fmod(ad, bd), torch.fmod(a, b))
    close(torch.fmod(ad, s), torch.fmod(a, s))
    close(torch.fmod(ad.t(), 3), torch.fmod(a.t(), 3))
    # A float scalar promotes an integer tensor (result_type), as on the CPU.
    close(torch.fmod(ad, 2.5), torch.fmod(a, 2.5))
    x = ad.clone()
    x.fmod_(bd)
    close(x, torch.fmod(a, b))
    x = ad.clone()
    x.fmod_(s)
    close(x, torch.fmod(a, s))
    out = torch.empty(0, dtype=dtype, device=neuron)
    torch.fmod(ad, bd, out=out)
    close(out, torch.fmod(a, b))


def test_fmod_integer_division_by_zero(neuron):
    a = torch.tensor([1, 2, 3], device=neuron)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.fmod(a, torch.tensor([1, 0, 1], device=neuron)).cpu()
    # A float divisor of zero gives NaN, as on the CPU.
    close(torch.fmod(a.float(), 0.0), torch.fmod(a.float().cpu(), 0.0))


def test_large_parallel(neuron, native):
    # Enough elements for the intra-op pool to split the work (> 2 * kGrain).
    x = torch.randn(256, 1031) * 4
    xd = x.to(neuron)
    for fn in (F.mish, F.softplus, F.logsigmoid, torch.tan, torch.log1p, F.elu):
        arg = x.abs() if fn is torch.log1p else x
        close(fn(arg.to(neuron)), fn(arg))
    close(F.hardswish(xd[:, ::2]), F.hardswish(x[:, ::2]))


def test_log_sigmoid_module_and_buffer(neuron, native):
    # log_sigmoid_forward leaves its buffer empty (backward recomputes it),
    # and the module path and its gradient still match the CPU.
    x = torch.randn(5, 7)
    out, buf = torch.ops.aten.log_sigmoid_forward(x.to(neuron))
    close(out, F.logsigmoid(x))
    assert buf.numel() == 0
    m = torch.nn.LogSigmoid()
    xd = x.to(neuron).requires_grad_()
    xc = x.clone().requires_grad_()
    m(xd).sum().backward()
    m(xc).sum().backward()
    close(xd.grad, xc.grad)


def test_negative_slope_inplace_backward_rejected(neuron):
    x = torch.randn(4, requires_grad=True, device=neuron)
    y = F.leaky_relu(x * 1.0, -0.5, inplace=True)
    with pytest.raises(RuntimeError, match="negative slope"):
        y.sum().backward()


def test_gelu_vector_path_equals_the_scalar_path_bit_for_bit(neuron):
    g = torch.Generator().manual_seed(0)
    vals = torch.cat([torch.randn(4000, generator=g) * 5, torch.linspace(-20, 20, 4000),
                      torch.tensor([0.0, -0.0, float("nan"), float("-inf"), 1e-30, -1e-30, 1e30, -1e30]
                               + [0.0] * 8)])
    x = vals.view(-1, 16).to(neuron)
    contiguous = torch.nn.functional.gelu(x).cpu()
    strided = torch.empty(16, x.shape[0], device=neuron).t()
    torch.ops.aten.gelu.out(x, out=strided)
    assert not strided.is_contiguous()
    assert torch.equal(contiguous.view(torch.int32), strided.cpu().contiguous().view(torch.int32))
    torch.testing.assert_close(contiguous, torch.nn.functional.gelu(vals.view(-1, 16)), equal_nan=True)
