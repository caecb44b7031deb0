"""Elementwise ops on neuron against the CPU: binary and ternary arithmetic, broadcasting
and strided operands, unary math, pow and floor_divide, in-place and out= variants, 0-dim
operands, and the vector loops against the scalar ones bit for bit. Activations and the
unary math of the activation engine are in test_ops_activation.py."""

import math

import pytest
import torch
import torch.nn.functional as F

import openneuron
from helpers import FLOATS, same, same_error

pytestmark = pytest.mark.usefixtures("no_fallback")

X = torch.randn(17, 33)
Y = torch.randn(17, 33)
ROW = torch.randn(33)
X3 = torch.randn(6, 7, 5)


@pytest.mark.parametrize("fn", [
    lambda a, b: a + b, lambda a, b: a - 2.5 * b, lambda a, b: torch.add(a, b, alpha=3),
    lambda a, b: a * b, lambda a, b: a / (b.abs() + 1), lambda a, b: torch.maximum(a, b),
    lambda a, b: torch.where(a > b, a, b), lambda a, b: (a < b).float(), lambda a, b: a + 1,
    lambda a, b: 2 - a, lambda a, b: torch.addcmul(a, a, b, value=0.5),
])
def test_binary_and_ternary(neuron, fn):
    same(fn, X, Y, equal_nan=False)


def test_broadcasting_and_noncontiguous(neuron):
    same(lambda a, r: a + r, X, ROW, equal_nan=False)
    same(lambda a, r: a.t() * r[:17], X, ROW, equal_nan=False)
    same(lambda a, b: a[:, 1::2] - b[:, 1::2], X, Y, equal_nan=False)
    same(lambda a, b: a[::3, ::2].t() * b.t()[::2, ::3], X, Y, equal_nan=False)


@pytest.mark.parametrize("fn", [
    torch.relu, torch.exp, torch.tanh, torch.sigmoid, torch.neg, torch.abs, F.silu,
    lambda a: F.gelu(a), lambda a: F.gelu(a, approximate="tanh"), lambda a: a.abs().sqrt(),
    lambda a: a.abs().add(0.1).log(), lambda a: a.abs().add(0.1).rsqrt(),
])
def test_unary(neuron, fn):
    same(fn, X, equal_nan=False)


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


def test_in_place_and_out_variants(neuron):
    a = X.clone().to(neuron)
    a.add_(Y.to(neuron), alpha=2).mul_(0.5)
    torch.testing.assert_close(a.cpu(), (X + 2 * Y) * 0.5)
    out = torch.empty(0, device=neuron)
    torch.mul(X.to(neuron), Y.to(neuron), out=out)
    torch.testing.assert_close(out.cpu(), X * Y)


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


@pytest.mark.parametrize("e", [2, 3, 0.5, -1, 1, 0, 2.5, -0.5])
def test_pow_scalar(neuron, e):
    x = X3.abs() + 0.1
    same(lambda a: a.pow(e), x, rtol=1.3e-6, atol=1e-5)
    same(lambda a: a.pow(e), x.to(torch.bfloat16), rtol=1.6e-2, atol=1e-2)
    same(lambda a: torch.pow(a, e), X3.transpose(0, 2).abs(), rtol=1.3e-6, atol=1e-5)


def test_pow_variants_and_errors(neuron):
    same(lambda a, b: torch.pow(a, b), X3.abs(), torch.randn(7, 1), rtol=1.3e-6, atol=1e-5)
    same(lambda a: torch.pow(2.0, a), X3, rtol=1.3e-6, atol=1e-5)
    same(lambda a: a.pow(3), torch.arange(-5, 5), exact=True)
    same(lambda a: a.clone().pow_(2), X3, rtol=1.3e-6, atol=1e-5)
    same(lambda a: a.pow(2).mean(-1, keepdim=True), X3, rtol=1.3e-6, atol=1e-5)  # HF RMSNorm
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        torch.arange(3, device=neuron).pow(-1)


def test_pow_backward(neuron):
    x = (X3.abs() + 0.1).requires_grad_()
    xd = x.detach().to(neuron).requires_grad_()
    x.pow(3).sum().backward()
    xd.pow(3).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_floor_divide(neuron):
    same(lambda a, b: torch.floor_divide(a, b), torch.arange(-7, 7), torch.tensor(3), exact=True)
    same(lambda a, b: torch.floor_divide(a, b), X3, X3.abs() + 0.5, rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, -2, 1.7])
def test_pow_by_scalar_takes_the_cpus_shortcuts(neuron, exponent):
    # pow by 2, 3, -0.5, -1, -2 is computed as the CPU computes it (x*x, x*x*x, 1/sqrt(x),
    # ...) and equals it bit for bit. By 0.5 both take the square root, but the CPU's float32
    # sqrt is not correctly rounded (about 0.7% of values a unit off) while neuron's is.
    x = torch.rand(4096, generator=torch.Generator().manual_seed(1)) * 10 + 0.01
    same(lambda a: a.pow(exponent), x, rtol=1.3e-6, atol=1e-5, exact=exponent in (2, 3, -0.5, -1, -2))
    same(lambda a: a.pow(exponent), x, rtol=1.3e-6, atol=0)
    same(lambda a: a.pow(torch.full_like(a, exponent)), x, rtol=1.3e-6, atol=0)


def test_pow_specials_like_the_cpu(neuron):
    # By a Python number the CPU takes sqrt and rsqrt for 0.5 and -0.5 (not in float16):
    # (-inf) ** 0.5 is nan, (-0.0) ** -0.5 -inf. By a tensor (0-dim included) it takes C's
    # pow: inf and inf, and (-inf) ** -0.5 is 0.
    inf = float("inf")
    for dt in FLOATS:
        b = torch.tensor([-inf, -0.0, 0.0, inf, math.nan, 4.0, -4.0], dtype=dt)
        for e in (0.5, -0.5):
            same(lambda a: a ** e, b, exact=True)
            same(lambda a: a ** torch.full_like(a, e), b, exact=True)
            same(lambda a: a ** torch.tensor(e, dtype=dt), b, exact=True)
            same(lambda a: torch.pow(-inf, a), torch.full((2,), e, dtype=dt), exact=True)


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
    # The reference in float64: on AVX-512 hosts PyTorch's vectorised float32 gelu gives NaN
    # for +inf (its scalar loop and its float64 kernel give +inf).
    reference = op(vals.view(-1, 16).double()).float()
    torch.testing.assert_close(contiguous, reference, rtol=1.3e-6, atol=atol, equal_nan=True)


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


def test_ternary_dtype_checks_match_the_cpu(neuron):
    # addcdiv of integer tensor1 and tensor2 is no longer supported (empty ones too); an
    # in-place or out= result must hold the result type; lerp's end (and a weight that is
    # not 0-dim) must have self's dtype.
    f, i = torch.rand(4, 3) + 0.5, torch.arange(1, 13).view(4, 3)
    for fn in [lambda a, b: torch.addcdiv(a, b, b), lambda a, b: torch.addcdiv(a[:0], b[:0], b[:0].bool()),
               lambda a, b: a.addcdiv_(b, b), lambda a, b: torch.addcdiv(a, b, b, out=torch.empty_like(a)),
               lambda a, b: b.addcmul_(b, a), lambda a, b: b.addcmul_(b, a[0, 0]),
               lambda a, b: torch.addcmul(b, b, a, out=torch.empty_like(b)),
               lambda a, b: b.addcdiv_(a, a), lambda a, b: a.lerp_(b, 0.5),
               lambda a, b: a.lerp_(b.float(), b.half()), lambda a, b: a.lerp_(a.half(), a)]:
        same_error(fn, f, i)
    same(lambda a, b: torch.addcdiv(a, b, b.float()), f, i)
    same(lambda a, b: b.clone().addcmul_(b, b, value=2), f, i, exact=True)
    same(lambda a: a.clone().lerp_(a * 2, torch.tensor(0.25, dtype=torch.float64)), f)
    same(lambda a: a.clone().lerp_(a * 2, torch.tensor(0.25, dtype=torch.float16)), f)


def test_argument_and_dtype_checks_match_the_cpu(neuron):
    """Errors the CPU raises are raised on neuron too (PyTorch's test_type_promotion)."""
    for device in ("cpu", neuron):
        t = torch.ones(4, dtype=torch.int32, device=device)
        with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
            torch.add(t, t, alpha=1.1)
        with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
            torch.add(t.bool(), t.bool(), alpha=1.1)
        for op in (torch.neg, torch.floor, torch.abs):
            with pytest.raises(RuntimeError):
                op(torch.ones(2, device=device), out=torch.empty(0, dtype=torch.int64, device=device))
        with pytest.raises(RuntimeError, match="can't be cast"):
            t.clone().clamp_(0.5)
        assert torch.clamp(t, 0.5).dtype == torch.float32
        assert torch.clamp(t, 1, 3).dtype == torch.int32
        assert torch.clamp(t.bool(), 0.5).dtype == torch.float32
    torch.testing.assert_close(torch.clamp(torch.arange(5, device=neuron), 0.5, 2.5).cpu(),
                               torch.clamp(torch.arange(5), 0.5, 2.5))


def test_half_times_float_scalar_tensor_into_a_float_out_rounds_to_the_result_type(neuron):
    # bfloat16 * float32 0-dim tensor has result type bfloat16: the CPU rounds to it, then
    # widens into the float32 out.
    a, b = torch.tensor([1.0039, 3.1], dtype=torch.bfloat16), torch.tensor(1.001)
    want = torch.empty(2)
    torch.mul(a, b, out=want)
    got = torch.empty(2, device=neuron)
    torch.mul(a.to(neuron), b.to(neuron), out=got)
    assert torch.equal(got.cpu(), want), (got, want)


def test_an_out_that_is_also_an_input_is_not_resized(neuron):
    # TensorIterator's rule: out=x is read as well as written, so it cannot grow.
    same_error(lambda a, o: torch.add(a, o, out=o), torch.randn(4), torch.tensor(1.0))
    same_error(lambda a, o: torch.mul(a, o, out=o), torch.randn(2, 3), torch.randn(1, 3))


def test_writing_over_part_of_an_input_raises_as_on_the_cpu(neuron):
    # Partial overlap between the written tensor and an input: TensorIterator refuses it
    # (before any resize of out=); full overlap (x.addcmul_(x, x)) is fine.
    same_error(lambda x: torch.mul(x, 2, out=x.unsqueeze(1)), torch.randn(5))
    same_error(lambda x: x.addcmul_(x[0], x[0]), torch.randn(2))
    same_error(lambda x: x.lerp_(x.squeeze(0), 0.5), torch.randn(1, 3))
    same(lambda x: (lambda y: y.addcmul_(y, y, value=0.5))(x.clone()), torch.randn(4))


def test_argument_checks_also_run_on_empty_tensors(neuron):
    empty_bool = torch.ones(0, dtype=torch.bool)
    same_error(lambda x: -x, empty_bool)
    same_error(torch.relu, empty_bool)
    same_error(lambda d, s: d.copy_(s), torch.empty(0), torch.ones(3))
    same_error(lambda b, x, y: torch.addmm(b, x, y), torch.ones(2), torch.ones(3, 1), torch.ones(1, 0))
    same_error(lambda x: torch.cat([x, x], out=x), torch.zeros(3, 0))


@pytest.mark.parametrize("fn", [
    lambda x: torch.clamp_min(x, 0.25), lambda x: torch.clamp_max(x, -0.5),
    lambda x: x.clone().clamp_min_(0.0), lambda x: x.clone().clamp_max_(1.0),
    lambda x: torch.clamp_min(x, float("nan")),
    lambda x: torch.clamp(x, -1, 1, out=torch.empty_like(x)),
    lambda x: torch.clamp_min(x, 0.5, out=torch.empty(0, device=x.device)),
    lambda x: torch.clamp_max((x.where(~x.isnan(), 0.0) * 10).int(), 3),
    lambda x: torch.clamp_min((x.where(~x.isnan(), 0.0) * 10).to(torch.int8), -3),
    lambda x: torch.clamp_max((x.where(~x.isnan(), 0.0) * 10).to(torch.int16), 4),
    lambda x: torch.clamp_min((x.where(~x.isnan(), 0.0) * 10).int(), 0.5),
    lambda x: torch.clamp_min(x.t(), 0.0),
])
def test_clamp_min_max_run_natively(neuron, fn):
    # A mean-pooling denominator (torch.clamp(mask.sum(1), min=1e-9)) is clamp_min: it
    # must not leave the device for PyTorch's CPU kernel (a compiled graph would then run
    # op by op).
    x = X.clone()
    x[0, :3] = float("nan")
    before = dict(openneuron.library_stats())
    same(fn, x, exact=True)
    assert dict(openneuron.library_stats()) == before


def test_clamp_out_checks_as_the_cpu(neuron):
    for dtype in (torch.int64, torch.bfloat16):
        same_error(lambda x: torch.clamp_min(x, 0.5, out=torch.empty(3, dtype=dtype,
                                                                        device=x.device)), X)
    same_error(lambda x: torch.clamp(x, out=x), X)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_floor_trunc_division_and_modulo_are_the_cpus_bits(neuron, dtype):
    # The CPU's half-type kernels round every step to the type when the divisor is a
    # tensor (trunc(round(a / b))), compute in float when it is a number or broadcast
    # 0-dim tensor, and cast a number to the type for fmod/remainder. One in five
    # bfloat16 trunc quotients differed by one before neuron did the same.
    torch.manual_seed(0)
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 2.5, -7.0])
    a = torch.cat([torch.randn(4000) * 100, special.repeat_interleave(len(special))]).to(dtype)
    b = torch.cat([torch.randn(4000), special.repeat(len(special))]).to(dtype)
    for divisor in (b, 0.37, -2.91, torch.tensor(-0.37, dtype=dtype)):
        fns = [lambda x, y: torch.div(x, y, rounding_mode="trunc"),
               lambda x, y: torch.div(x, y, rounding_mode="floor"),
               lambda x, y: torch.fmod(x, y), lambda x, y: torch.remainder(x, y)]
        for fn in fns:
            if isinstance(divisor, torch.Tensor):
                same(fn, a, divisor, exact=True)
            else:
                same(lambda x: fn(x, divisor), a, exact=True)


def test_complex32_pow_is_complex64_pow_rounded_once(neuron):
    # The CPU has no complex32 pow (it raises "not implemented for 'ComplexHalf'"); CUDA
    # has one. neuron computes it in complex64 and rounds the result to complex32.
    torch.manual_seed(0)
    x = torch.randn(50).half()
    z = torch.randn(50, dtype=torch.complex64).to(torch.complex32)
    cases = [(lambda a: torch.pow(2.2 - 1.6j, a), x), (lambda a: torch.pow(a, 2), z),
             (lambda a: torch.pow(a, 0.5j), x), (lambda a: torch.pow(a, a), z)]
    for fn, arg in cases:
        dev = fn(arg.to(neuron))
        ref = fn(arg.to(torch.complex64) if arg.is_complex() else arg.float()).to(torch.complex32)
        assert dev.dtype == torch.complex32
        assert torch.equal(dev.cpu().view(torch.float16), ref.view(torch.float16))


@pytest.mark.parametrize("empty", [False, True])
def test_in_place_ternary_ops_keep_their_output_shape_as_on_the_cpu(neuron, empty):
    # An in-place result is not resized: inputs that broadcast to a larger shape, or do not
    # broadcast, raise the CPU's message, also when the output is empty and nothing would run.
    n = 0 if empty else 4
    same_error(lambda s, t: s.addcmul_(t, s), torch.zeros(n), torch.ones(3, n))
    same_error(lambda s, t: s.addcdiv_(s, t), torch.zeros(n), torch.ones(3, n))
    same_error(lambda s, t: s.addcmul_(t, t), torch.zeros(n), torch.ones(n + 3))
    same_error(lambda s, t: s.lerp_(t, 0.5), torch.zeros(n, 4), torch.ones(1, n, 1))
    same_error(lambda s, w: s.lerp_(s, w), torch.zeros(n), torch.ones(2, n))


@pytest.mark.parametrize("name,fn", [
    ("exp", lambda v, o: torch.exp(v, out=o)), ("add", lambda v, o: torch.add(v, v, out=o)),
    ("pow", lambda v, o: torch.pow(v, 2, out=o)), ("fmod", lambda v, o: torch.fmod(v, 1.5, out=o)),
    ("addcmul", lambda v, o: torch.addcmul(v, v, v, out=o)), ("clamp", lambda v, o: torch.clamp(v, -1, 1, out=o)),
    ("gelu", lambda v, o: torch._C._nn.gelu(v, out=o)),
    ("silu", lambda v, o: torch._C._nn.silu(v, out=o)), ("sign", lambda v, o: torch.sign(v, out=o)),
    ("atan2", lambda v, o: torch.atan2(v, v, out=o)), ("where", lambda v, o: torch.where(v > 0, v, 1.0, out=o)),
])
def test_out_that_is_a_reshaped_view_of_an_input_raises_as_on_the_cpu(neuron, name, fn):
    # out= must be resized to the input's shape; it shares the input's memory under other
    # strides, which TensorIterator refuses before the resize would hide it.
    def call(x):
        fn(x.unflatten(1, (1, 3)), x)
    same_error(call, torch.randn(1, 3))


def test_log_sigmoid_out_into_a_reshaped_view_of_its_input_works_as_on_the_cpu(neuron):
    # Its CPU kernel resizes out without TensorIterator's overlap check: out then holds
    # the same elements as the input, computed in place.
    results = []
    for device in ("cpu", neuron):
        x = torch.linspace(-3, 3, 3, device=device).view(1, 3)
        torch._C._nn.log_sigmoid(x.unflatten(1, (1, 3)), out=x)
        results.append(x.cpu())
    assert results[1].shape == (1, 1, 3)
    torch.testing.assert_close(results[1], results[0])
