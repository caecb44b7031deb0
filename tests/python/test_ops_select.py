"""Native cat/stack, tril/triu, where and masked_fill, isinf/isnan/..., arg-reductions
(argmax/argmin, max/min over a dim), bitwise ops, prod and scans (cumsum/cumprod) against
the CPU."""

import pytest
import torch

import openneuron
from helpers import same

pytestmark = pytest.mark.usefixtures("no_fallback")

X = torch.randn(5, 7, 9)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_cat_and_stack(neuron, dtype):
    a, b = X[:, :3].to(dtype), X[:, 3:].to(dtype)
    same(lambda a, b: torch.cat([a, b], 1), a, b, exact=True)
    same(lambda a, b: torch.cat([a, b.transpose(0, 1).transpose(0, 1)], -2), a, b, exact=True)
    same(lambda a, b: torch.stack([a, a], 2), a, b, exact=True)
    same(lambda a: torch.cat([a, torch.empty(0, dtype=a.dtype, device=a.device)]), a, exact=True)


def test_cat_promotes_and_errors(neuron):
    same(lambda a, b: torch.cat([a, b]), torch.arange(3), torch.randn(2))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0"):
        torch.cat([torch.ones(2, 3, device=neuron), torch.ones(2, 4, device=neuron)])
    with pytest.raises(RuntimeError, match="Tensors must have same number of dimensions"):
        torch.cat([torch.ones(2, 3, device=neuron), torch.ones(2, device=neuron)])


@pytest.mark.parametrize("k", [-2, 0, 1, 3])
def test_tril_triu(neuron, k):
    same(lambda a: torch.tril(a, k), X, exact=True)
    same(lambda a: torch.triu(a.transpose(1, 2), k), X, exact=True)
    same(lambda a: a.clone().tril_(k), X, exact=True)
    same(lambda m: torch.triu(m, k), torch.ones(6, 6, dtype=torch.bool), exact=True)
    m = torch.full((4, 4), float("-inf"))
    same(lambda m: torch.triu(m, 1), m, exact=True)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.tril(torch.ones(3, device=neuron))


def test_where_out_masked_fill_and_isx(neuron):
    c = X > 0
    same(lambda c, a: torch.where(c, a, -a), c, X, exact=True)
    same(lambda c, a: torch.where(c, a, 0.5), c, X, exact=True)
    out = torch.empty(0, device=neuron)
    torch.where(c.to(neuron), X.to(neuron), torch.ones(()).to(neuron), out=out)
    torch.testing.assert_close(out.cpu(), torch.where(c, X, 1.0))
    same(lambda a, c: a.masked_fill(c, -1e9), X, c, exact=True)
    same(lambda a, c: a.masked_fill(c[0], float("-inf")), X, c, exact=True)
    same(lambda a, c: a.clone().masked_fill_(c, torch.tensor(2.0)), X, c, exact=True)
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        X.to(neuron).masked_fill_(c.to(neuron).int(), 1.0)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        X.to(neuron).masked_fill_(c.to(neuron), torch.ones(2))
    s = torch.tensor([1.0, float("inf"), -float("inf"), float("nan"), 0.0])
    for fn in [torch.isneginf, torch.isposinf, torch.isnan, torch.isinf, torch.isfinite]:
        same(fn, s, exact=True)
    same(torch.isneginf, torch.arange(3), exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_argmax_max_min(neuron, dtype):
    t = (X * 10).to(dtype)
    for fn in [torch.argmax, torch.argmin, lambda a: a.argmax(1), lambda a: a.argmin(-1, keepdim=True),
               lambda a: a.max(1), lambda a: a.min(0, keepdim=True), lambda a: a.max(), lambda a: a.min(),
               lambda a: a.transpose(0, 2).argmax(0), lambda a: a.argmax(keepdim=True)]:
        same(fn, t, exact=True)


def test_argmax_nan_ties_and_errors(neuron):
    t = torch.tensor([[1.0, 3.0, 3.0, float("nan"), 5.0], [2.0, 2.0, 0.0, 1.0, 2.0]])
    same(lambda a: a.argmax(1), t, exact=True)
    same(lambda a: a.max(1), t, exact=True)
    same(lambda a: a.argmin(1), t, exact=True)
    with pytest.raises(IndexError, match="Expected reduction dim to be specified"):
        torch.empty(0, device=neuron).argmax()
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        torch.empty(2, 0, device=neuron).max(1)
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        torch.empty(0, device=neuron).max()


def test_bitwise_prod_cumsum(neuron):
    a, b = torch.randint(-50, 50, (6, 5)), torch.randint(-50, 50, (6, 5))
    same(torch.bitwise_and, a, b, exact=True)
    same(torch.bitwise_or, a, b, exact=True)
    same(torch.bitwise_xor, a, b, exact=True)
    same(lambda a: a & 7, a, exact=True)
    same(torch.bitwise_not, a, exact=True)
    same(torch.bitwise_not, a > 0, exact=True)
    same(lambda a, b: (a > 0) | (b > 0), a, b, exact=True)
    with pytest.raises(RuntimeError, match="not implemented for 'Float'"):
        torch.bitwise_and(X.to(neuron), X.to(neuron))
    small = torch.rand(4, 6) + 0.5
    same(torch.prod, small, rtol=1e-5)
    same(lambda t: t.prod(1), small, rtol=1e-5)
    same(lambda t: t.prod(0, keepdim=True), a, exact=True)
    same(lambda t: t.cumsum(1), X, rtol=1e-5, atol=1e-5)
    same(lambda t: t.cumsum(0, dtype=torch.float32), a, exact=True)
    same(lambda t: t.cumsum(-1), a.int(), exact=True)  # int -> int64
    same(lambda t: t.cumprod(1), small)
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]])
    same(lambda m: m.long().cumsum(-1) - 1, mask, exact=True)  # HF position ids


def test_bf16_cumsum_and_transposed(neuron):
    same(lambda t: t.transpose(0, 2).cumsum(1), X.bfloat16(), rtol=2e-2, atol=2e-2)
