"""Reductions on neuron against the CPU: sum/mean/amax/amin, integer sums, var/std,
vector norms, all/any."""

import pytest
import torch

import openneuron
from helpers import same, same_error

pytestmark = pytest.mark.usefixtures("no_fallback")

# Inputs of the sum/mean tests (X), the var/std and norm tests (X3), the all/any tests (Z).
X = torch.randn(17, 33)
X3 = torch.randn(6, 7, 5)
Z = torch.randn(5, 7, 9)


@pytest.mark.parametrize("fn", [
    lambda a: a.sum(), lambda a: a.sum(0), lambda a: a.sum(1, keepdim=True), lambda a: a.mean(),
    lambda a: a.mean((0, 1)), lambda a: a.amax(1), lambda a: a.amin(0),
])
def test_reductions(neuron, fn):
    same(fn, X, rtol=1e-5, atol=1e-5, equal_nan=False)


def test_integer_sum_promotes_to_int64(neuron):
    t = torch.arange(10, dtype=torch.int32)
    r = t.to(neuron).sum()
    assert r.dtype == torch.int64 and r.item() == 45


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_var_std(neuron, dtype):
    tol = dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1.3e-6, atol=1e-5)
    x = X3.to(dtype)
    same(lambda a: a.var(), x, **tol)
    same(lambda a: a.var(1), x, **tol)
    same(lambda a: a.std((0, 2), keepdim=True, correction=0), x, **tol)
    same(lambda a: torch.var_mean(a, -1), x, **tol)
    same(lambda a: torch.std_mean(a, 0, correction=2), x, **tol)
    same(lambda a: a[:1].var(0), x, **tol)  # one sample: nan
    with pytest.raises(RuntimeError, match="std only supports floating-point"):
        torch.arange(3, device=neuron).std()


def test_var_backward(neuron):
    x = torch.randn(4, 9, requires_grad=True)
    xd = x.detach().to(neuron).requires_grad_()
    x.std(1).sum().backward()
    xd.std(1).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ord", [2, 1, float("inf"), -float("inf"), 0, 3.5])
def test_vector_norm(neuron, ord):
    same(lambda a: torch.linalg.vector_norm(a, ord), X3, rtol=1.3e-6, atol=1e-5)
    same(lambda a: torch.linalg.vector_norm(a, ord, dim=1, keepdim=True), X3, rtol=1.3e-6, atol=1e-5)
    same(lambda a: torch.linalg.vector_norm(a, ord, dim=(0, 2)), X3.to(torch.bfloat16), rtol=1.6e-2, atol=1e-2)


def test_empty_amax_amin_and_inf_norm_checks_match_the_cpu(neuron):
    # No identity: an empty tensor needs dims (RuntimeError), none of them empty (IndexError
    # for amax/amin); reducing non-empty dims gives an empty result.
    e = torch.empty(0, 4)
    for fn in [lambda a: a.amax(), lambda a: a.amin(), lambda a: a.amax(0), lambda a: a.amin((1, -2)),
               lambda a: torch.linalg.vector_norm(a, float("inf")),
               lambda a: torch.linalg.vector_norm(a, -1, dim=0)]:
        same_error(fn, e)
    for fn in [lambda a: a.amax(1), lambda a: a.amin(-1, keepdim=True),
               lambda a: torch.linalg.vector_norm(a, float("inf"), dim=1),
               lambda a: torch.linalg.vector_norm(a, -float("inf"), dim=(1,), keepdim=True),
               lambda a: torch.linalg.vector_norm(a, 0.5)]:
        same(fn, e, exact=True)


def test_vector_norm_backward_and_clip(neuron):
    x = torch.randn(5, 6, requires_grad=True)
    xd = x.detach().to(neuron).requires_grad_()
    torch.linalg.vector_norm(x, dim=1).sum().backward()
    torch.linalg.vector_norm(xd, dim=1).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.uint8, torch.int32])
def test_all_any(neuron, dtype):
    t = (Z > 0.5).to(dtype)
    for fn in [torch.all, torch.any, lambda a: a.all(1), lambda a: a.any(-1, keepdim=True),
               lambda a: a.all(dim=(0, 2)), lambda a: torch.ones_like(a).all()]:
        same(fn, t, exact=True)
    same(torch.all, torch.empty(0, dtype=dtype), exact=True)
    same(torch.any, torch.empty(0, dtype=dtype), exact=True)


def test_sum_into_an_out_of_another_dtype_sums_in_the_outs_dtype(neuron):
    # The CPU converts the elements to out's dtype first: three -1.5s into int64 sum to -3.
    x = torch.tensor([-1.5, -1.5, -1.5, 2.7])
    for dev in ("cpu", neuron):
        out = torch.empty((), dtype=torch.int64, device=dev)
        torch.sum(x.to(dev), 0, out=out)
        assert out.item() == -1, (dev, out)


def test_std_of_values_whose_squares_overflow_float32(neuron):
    x = torch.tensor([[1e20, -1e20, 3e19], [1.0, 2.0, 3.0]])
    same(lambda a: a.std(1), x)
    same(lambda a: torch.std_mean(a, 1)[0], x)
    assert torch.isinf(x.to(neuron).var(1)[0]).item()  # the variance itself overflows, as on the CPU


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_nansum_and_nanmean_run_natively_rounding_once_whatever_the_layout(neuron, dtype):
    # NaN reads as 0; a half-type result is the float sum rounded once, for a strided view
    # as for its contiguous copy (the CPU's own kernel rounds those two differently).
    g = torch.Generator().manual_seed(0)
    x = torch.randn(300, 70, generator=g).to(dtype)
    x[x > 1.5] = float("nan")
    before = openneuron.fallback_stats()
    d = x.to(neuron)
    for args in ((), (0,), (1, True)):
        want = torch.nansum(x.double(), *args).to(dtype)
        got = torch.nansum(d, *args)
        assert got.dtype == dtype
        torch.testing.assert_close(got.cpu(), want, rtol=0 if dtype != torch.float32 else 1e-5, atol=0 if dtype != torch.float32 else 1e-4)
        assert torch.equal(torch.nansum(d.t().contiguous().t(), *args).cpu(), got.cpu())
    torch.testing.assert_close(torch.nanmean(d, 0).cpu(), torch.nanmean(x.double(), 0).to(dtype))
    assert openneuron.fallback_stats() == before
    # Integers have no NaN; a dtype= widens; the gradient is 0 where the input was NaN.
    assert torch.nansum(torch.arange(5, device=neuron)).item() == 10
    assert torch.nansum(d, dtype=torch.float32).dtype == torch.float32
    t = torch.tensor([1.0, float("nan"), 3.0], device=neuron, requires_grad=True)
    torch.nansum(t).backward()
    assert t.grad.cpu().tolist() == [1.0, 0.0, 1.0]
    same_error(torch.nansum, torch.randn(3, dtype=torch.complex64))
