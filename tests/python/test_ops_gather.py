"""Native gather/scatter (and their reductions), index_add/copy, advanced indexing and
index_put, sort/topk, isin, flip/roll, histc, composites built on them, and complex
scalars through the host library, against the CPU."""

import functools

import pytest
import torch

import helpers
from helpers import same_error
import openneuron

pytestmark = pytest.mark.usefixtures("no_fallback")

# assert_close's float32 tolerances
same = functools.partial(helpers.same, rtol=1.3e-6, atol=1e-5)

X = torch.randn(6, 7, 5)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_isin(neuron, dtype):
    el = torch.randint(0, 20, (4, 9)).to(dtype)
    test = torch.tensor([3, 5, 7, 100]).to(dtype)
    same(lambda a, b: torch.isin(a, b), el, test, exact=True)
    same(lambda a, b: torch.isin(a, b, invert=True), el, test, exact=True)
    same(lambda a: torch.isin(a, 5), el, exact=True)
    same(lambda b: torch.isin(5, b), test, exact=True)
    same(lambda a, b: torch.isin(a, b), el, test[:0], exact=True)


def test_isin_nan(neuron):
    a = torch.tensor([1.0, float("nan"), 2.0])
    same(lambda a, b: torch.isin(a, b), a, torch.tensor([float("nan"), 2.0]), exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_gather_scatter(neuron, dtype):
    x = (X * 10).to(dtype)
    idx = torch.randint(0, 7, (6, 4, 5))
    same(lambda a, i: torch.gather(a, 1, i), x, idx, exact=True)
    same(lambda a, i: torch.gather(a.transpose(0, 2), 1, i.transpose(0, 2)), x, idx, exact=True)
    src = (torch.randn(6, 4, 5) * 10).to(dtype)
    same(lambda a, i, s: a.scatter(1, i, s), x, idx, src, exact=dtype == torch.int32)
    same(lambda a, i: a.clone().scatter_(1, i, 3), x, idx, exact=True)
    same(lambda a, i, s: a.scatter_add(1, i, s), x, idx, src, rtol=1.6e-2, atol=1e-1)
    same(lambda a, i, s: a.scatter(1, i, s, reduce="add"), x, idx, src, rtol=1.6e-2, atol=1e-1)


def test_scatter_unique_index_exact(neuron):
    x = torch.zeros(3, 8)
    idx = torch.stack([torch.randperm(8)[:5] for _ in range(3)])
    src = torch.randn(3, 5)
    same(lambda a, i, s: a.scatter(1, i, s), x, idx, src, exact=True)


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(neuron, reduce, include_self):
    x = torch.randn(5, 6)
    idx = torch.randint(0, 6, (5, 9))
    src = torch.randn(5, 9)
    same(lambda a, i, s: a.scatter_reduce(1, i, s, reduce, include_self=include_self), x, idx, src)
    xi = torch.randint(-9, 9, (5, 6))
    si = torch.randint(-9, 9, (5, 9))
    same(lambda a, i, s: a.scatter_reduce(0, i[:, :6] % 5, s[:, :6], reduce, include_self=include_self),
         xi, idx, si, exact=True)


def test_gather_scatter_backward(neuron):
    x = torch.randn(4, 6, requires_grad=True)
    idx = torch.randint(0, 6, (4, 3))
    xd = x.detach().to(neuron).requires_grad_()
    torch.gather(x, 1, idx).pow(2).sum().backward()
    torch.gather(xd, 1, idx.to(neuron)).pow(2).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_gather_scatter_errors(neuron):
    x = torch.randn(3, 4, device=neuron)
    # int32 indices are valid, as on the CPU (they run as a host library kernel).
    i32 = torch.tensor([[3, 0], [1, 1], [2, 0]], dtype=torch.int32)
    torch.testing.assert_close(torch.gather(x, 1, i32.to(neuron)).cpu(),
                               torch.gather(x.cpu(), 1, i32))
    with pytest.raises(RuntimeError, match="Expected dtype int32/int64 for index"):
        torch.gather(x, 1, torch.zeros(3, 4, dtype=torch.int16, device=neuron))
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        torch.gather(x, 1, torch.zeros(3, dtype=torch.long, device=neuron))
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, amax or amin"):
        x.scatter_reduce(1, torch.zeros(3, 4, dtype=torch.long, device=neuron), x, "max")
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.gather(x, 1, torch.full((3, 4), 9, device=neuron)).cpu()
    # One bad index anywhere in a long line, negative or too large, is found.
    wide = torch.randn(3, 40, device=neuron)
    for pos, bad in ((0, -1), (17, 40), (38, -(2 ** 40)), (39, 2 ** 33)):
        idx = torch.randint(0, 40, (3, 40))
        idx[1, pos] = bad
        with pytest.raises(RuntimeError, match="out of bounds"):
            torch.gather(wide, 1, idx.to(neuron)).cpu()
        idx[1, pos] = 5
        torch.testing.assert_close(torch.gather(wide, 1, idx.to(neuron)).cpu(), torch.gather(wide.cpu(), 1, idx))


def test_index_add_copy(neuron):
    x = torch.randn(5, 4)
    idx = torch.tensor([0, 2, 2, 4])
    src = torch.randn(5, 4)
    same(lambda a, i, s: a.index_add(1, i % 4, s), x, idx, src)
    same(lambda a, i, s: a.index_add(1, i % 4, s, alpha=-2.5), x, idx, src)
    same(lambda a, i, s: a.index_add(0, i, s[:4]), x, idx, src)
    same(lambda a, i, s: a.index_copy(0, torch.tensor([4, 0, 1, 3]).to(a.device), s[:4]), x, idx, src, exact=True)
    with pytest.raises(RuntimeError, match="Number of indices"):
        x.to(neuron).index_add(0, idx.to(neuron), src.to(neuron))


def test_advanced_indexing(neuron):
    x = torch.randn(6, 7, 5)
    i = torch.tensor([0, 5, 2, 2, -1])
    j = torch.tensor([[1, 0], [6, 3]])
    same(lambda a, i: a[i], x, i, exact=True)
    same(lambda a, i: a[:, i], x, i, exact=True)
    same(lambda a, i: a[..., i], x, i % 5, exact=True)
    same(lambda a, j: a[j, :, j], x, j % 5, exact=True)  # non-adjacent: indexed dims first
    same(lambda a, j: a[1:4, j], x, j, exact=True)
    same(lambda a, i, j: a[i[:2], j[0]], x, i, j, exact=True)
    same(lambda a: a.transpose(0, 1)[torch.tensor([3, 1], device=a.device)], x, exact=True)
    m = x[..., 0] > 0
    same(lambda a, m: a[m], x, m, exact=True)
    same(lambda a, m: torch.masked_select(a, m), x, m.unsqueeze(-1), exact=True)
    same(lambda a: torch.nonzero(a > 0.5), x, exact=True)
    same(lambda a: (a > 0.5).nonzero(as_tuple=True), x, exact=True)
    gpt2 = torch.randn(2, 9, 11)
    same(lambda a, b: a[torch.arange(2, device=a.device), b], gpt2, torch.tensor([8, 3]), exact=True)


def test_index_put(neuron):
    x = torch.randn(6, 5)
    i = torch.tensor([0, 2, 2, 5])
    v = torch.randn(4, 5)
    same(lambda a, i, v: a.clone().index_put_((i,), v, accumulate=True), x, i, v)
    same(lambda a, i, v: a.clone().index_put_((i[:2], i[2:] % 5), v[0, :2]), x, i, v, exact=True)
    m = x > 0
    same(lambda a, m: a.clone().masked_fill(m, 0.0), x, m, exact=True)

    def setitem(a, m):
        a = a.clone()
        a[m] = 7.0
        return a

    same(setitem, x, m, exact=True)

    def setrow(a, i):
        a = a.clone()
        a[:, i[1:3]] = 1.5
        return a

    same(setrow, x, i, exact=True)
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
        x.to(neuron).index_put_((i.to(neuron),), torch.ones(4, 5, dtype=torch.long, device=neuron))


def test_index_backward(neuron):
    x = torch.randn(6, 5, requires_grad=True)
    i = torch.tensor([0, 2, 2, 5])
    xd = x.detach().to(neuron).requires_grad_()
    (x[i] * torch.arange(5.0)).sum().backward()
    (xd[i.to(neuron)] * torch.arange(5.0, device=neuron)).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_sort_topk(neuron, dtype):
    x = torch.randint(-5, 5, (4, 30)).to(dtype)  # many ties: stable order matters
    same(lambda a: torch.sort(a, stable=True), x, exact=True)
    same(lambda a: torch.sort(a, dim=0, descending=True, stable=True), x, exact=True)
    same(lambda a: torch.argsort(a, stable=True), x, exact=True)
    same(lambda a: torch.topk(a, 5).values, x, exact=True)
    same(lambda a: torch.topk(a, 3, dim=0, largest=False).values, x, exact=True)
    y = (torch.randperm(150).view(3, 50) - 75).to(dtype)  # distinct values, exact in bf16
    same(lambda a: torch.topk(a, 7), y, exact=True)  # no ties: indices too


def test_sort_nan_and_errors(neuron):
    x = torch.tensor([3.0, float("nan"), -1.0, float("nan"), 2.0])
    same(lambda a: torch.sort(a, stable=True), x, exact=True)
    same(lambda a: torch.sort(a, descending=True, stable=True), x, exact=True)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torch.topk(x.to(neuron), 6)


def test_sort_backward(neuron):
    x = torch.randn(3, 8, requires_grad=True)
    xd = x.detach().to(neuron).requires_grad_()
    (torch.topk(x, 3).values * 2).sum().backward()
    (torch.topk(xd, 3).values * 2).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.int64, torch.int16])
def test_sort_unstable_matches_cpu_tie_order(neuron, dtype):
    # at::sort(stable=False) on the CPU is std::sort: not stable. The order among equal values
    # decides where sort/msort's backward puts each gradient, so it must be the CPU's.
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(20, 400, generator=g) * 3).round().to(dtype)
    for fn in (lambda a: torch.sort(a), lambda a: torch.sort(a, dim=0),
               lambda a: torch.sort(a, descending=True), lambda a: torch.msort(a),
               lambda a: torch.argsort(a, dim=0, descending=True),
               lambda a: torch.sort(a[:, :1].expand(20, 30), dim=1)):  # stride 0: identity
        same(fn, x, exact=True)
    big = torch.randint(0, 9, (40000,), generator=g).to(dtype)  # CPU: radix sort for integers
    same(lambda a: torch.sort(a), big, exact=True)
    same(lambda a: torch.sort(a, descending=True), big, exact=True)
    if dtype.is_floating_point:
        x = x.clone()
        x[3, 5:300:7] = float("nan")
        same(lambda a: torch.sort(a), x, exact=True)
        same(lambda a: torch.sort(a, descending=True), x, exact=True)
        xc = torch.randn(40, 200, generator=g).round().to(dtype).requires_grad_()
        xd = xc.detach().to(neuron).requires_grad_()
        gy = torch.randn(40, 200, generator=g).to(dtype)
        torch.msort(xc).backward(gy)
        torch.msort(xd).backward(gy.to(neuron))
        assert torch.equal(xd.grad.cpu(), xc.grad)


def test_flip_roll(neuron):
    same(lambda a: torch.flip(a, [0, 2]), X, exact=True)
    same(lambda a: torch.flip(a.transpose(0, 1), [-1]), X, exact=True)
    same(lambda a: torch.roll(a, 2, 1), X, exact=True)
    same(lambda a: torch.roll(a, (-3, 8), (0, 2)), X, exact=True)
    same(lambda a: torch.roll(a, 4), X, exact=True)
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        torch.roll(X.to(neuron), (1, 2), (0,))


def test_composites_stay_native(neuron):
    x = torch.randn(4, 6)
    same(lambda a: torch.logsumexp(a, 1), x)
    same(lambda a: torch.nn.functional.pad(a, (1, 2, 0, 1), value=3.0), x, exact=True)
    same(lambda a: a.repeat(2, 3), x, exact=True)
    w = torch.randn(10, 3)
    same(lambda w, i: torch.nn.functional.embedding(i, w), w, torch.tensor([[1, 9], [0, 0]]), exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_histc(neuron, dtype):
    x = torch.randint(0, 8, (200,))
    ref = torch.histc(x.float(), bins=8, min=0, max=7)
    got = torch.histc(x.to(dtype).to(neuron), bins=8, min=0, max=7)
    assert got.dtype == dtype
    torch.testing.assert_close(got.cpu().float(), ref)
    y = torch.randn(300)
    same(lambda a: torch.histc(a, bins=10, min=-1, max=1), y, exact=True)
    same(lambda a: torch.histc(a, bins=5), y, exact=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_scatter_sums_in_half_types_round_once_like_the_cpu(neuron, dtype):
    # The CPU accumulates these in float and rounds each destination once; rounding per
    # addition drifts a unit in the last place on many elements with repeated indices.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 33, generator=g).to(dtype)
    src = torch.randn(64, 33, generator=g).to(dtype)
    idx = torch.randint(0, 4, (64, 33), generator=g)
    same(lambda a, i, s: a.clone().scatter_add_(0, i, s), x, idx, src, exact=True)
    for reduce in ("sum", "mean", "prod"):
        for include_self in (True, False):
            same(lambda a, i, s: a.clone().scatter_reduce_(0, i, s, reduce, include_self=include_self),
                 x, idx, src, exact=True)
    same(lambda a, i, s: a.clone().index_add_(0, i, s), x, idx[:, 0], src, exact=True)
    same(lambda a, i, s: a.clone().index_add_(1, i, s), x.t().contiguous(), idx[:, 0],
         src.t().contiguous(), exact=True)


def test_complex_scalars_run_natively_through_the_host_library(neuron):
    a = torch.randn(3, 4, dtype=torch.complex64)
    b = torch.randn(4, 5, dtype=torch.complex64)
    c = torch.randn(3, 5, dtype=torch.complex64)
    openneuron.reset_library_stats()
    same(lambda c, a, b: torch.addmm(c, a, b, beta=1 - 2j, alpha=0.5 + 1j), c, a, b)
    same(lambda a: torch.full_like(a, 2 - 3j), a, exact=True)
    ran = openneuron.library_stats()  # the CPU fallback would raise here (no_fallback)
    assert ran.get("aten::addmm") == 1 and ran.get("aten::fill_.Scalar") == 1
    same(lambda a, b: torch._foreach_add([a, b], 1 + 1j), a, b.t().contiguous(), exact=True)
    same(lambda a: torch.lerp(a, a * 2, 0.25 + 0.5j), a)


def test_empty_index_of_any_shape_does_nothing(neuron):
    """As on the CPU: an empty index is not checked against self (~60 of PyTorch's scatter
    tests pass such an index)."""
    base = torch.randn(3, 4, 5)
    empty = torch.empty(0, dtype=torch.long)
    for fn in (lambda b, i: b.scatter(1, i, 2.0), lambda b, i: b.scatter_add(0, i, b),
               lambda b, i: b.scatter_reduce(2, i, b, "amax"), lambda b, i: torch.gather(b, 1, i)):
        want = fn(base, empty)
        got = fn(base.to(neuron), empty.to(neuron))
        assert got.shape == want.shape and torch.equal(got.cpu(), want)


def test_flip_of_a_0d_tensor(neuron):
    x = torch.tensor(2.5)
    assert torch.equal(x.to(neuron).flip(0).cpu(), x.flip(0))
    assert torch.equal(x.to(neuron).flip(-1).cpu(), x.flip(-1))


@pytest.mark.parametrize("shape", [(5,), (5, 3)])
def test_index_add_in_half_rounds_like_the_cpu(neuron, shape):
    """The CPU's index_add_ rounds each addition into a 1-d self, once per element over
    slices: both give its bits."""
    torch.manual_seed(0)
    for _ in range(50):
        dst = (torch.randn(*shape) * 8).half()
        src = (torch.randn(6, *shape[1:]) * 8).half()
        idx = torch.randint(0, 5, (6,))
        got = dst.to(neuron).index_add_(0, idx.to(neuron), src.to(neuron)).cpu()
        assert torch.equal(got, dst.clone().index_add_(0, idx, src))


def test_scatter_into_a_dim_of_size_zero_raises_as_on_the_cpu(neuron):
    # Every index is out of range there, so the CPU raises although nothing would be written.
    empty, idx = torch.zeros(0, 3), torch.tensor([0])
    same_error(lambda s, i, v: s.scatter_reduce(0, i, v, "sum"), empty, idx.view(1, 1), torch.ones(1, 1))


def test_index_ops_into_a_dim_of_size_zero_raise_at_once_as_on_the_cpu(neuron):
    # No number indexes a dim of size 0: index_add, index_select, embedding and
    # advanced-index writes raise the CPU's error at the call, not later on the stream.
    idx = torch.tensor([0, 1])
    same_error(lambda s, i, v: s.index_add(0, i, v), torch.zeros(0, dtype=torch.long), idx, torch.ones(2).long())
    same_error(lambda s, i: s.index_select(0, i), torch.zeros(0), idx)
    same_error(lambda s, i: s.index_select(0, i), torch.zeros(0, 3), idx)
    same_error(lambda s, i: s.index_select(0, i), torch.zeros(3, 0), torch.tensor([-1]))
    same_error(lambda s, i: s.index_select(0, i), torch.zeros(3, 0), torch.tensor([5]))
    same_error(lambda i, w: torch.nn.functional.embedding(i, w), idx, torch.zeros(0, 3))
    same_error(lambda s, i, v: s.index_put_((i,), v, accumulate=True), torch.zeros(0), idx, torch.ones(1))
    same_error(lambda s, i: s.__setitem__((slice(None), i), 1.0), torch.zeros(3, 0), idx)
    with pytest.raises(RuntimeError, match=r"index_copy_\(\): index out of range: dimension 0 of self has size 0"):
        torch.zeros(0, device=neuron).index_copy(0, idx.to(neuron), torch.ones(2, device=neuron))
    # Where the CPU checks nothing (a dim of size 0 that is not indexed), neither does neuron.
    for device in ("cpu", neuron):
        assert torch.zeros(0, 3, device=device).index_add(0, idx.to(device), torch.ones(2, 3, device=device)).shape == (0, 3)
        assert torch.zeros(3, 0, device=device).index_copy(0, torch.tensor([0, 7], device=device),
                                                           torch.ones(2, 0, device=device)).shape == (3, 0)
        assert torch.zeros(0, 0, device=device).index_copy(0, torch.tensor([0], device=device),
                                                           torch.ones(1, 0, device=device)).shape == (0, 0)


def test_index_put_checks_and_warnings_as_the_cpu(neuron):
    # A uint8 mask warns once per indexing call (y[mask] in index's meta function,
    # index_put_ in its own checks); a value of the wrong shape is a shape mismatch before
    # it is a dtype mismatch; indices that do not broadcast raise IndexError.
    import warnings

    for device in ("cpu", neuron):
        mask = torch.zeros(10, dtype=torch.uint8, device=device)
        y = torch.ones(10, 10, device=device)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y.index_put_((mask,), y[mask], accumulate=True)
        assert [str(x.message).split(" (Triggered")[0] for x in w] == [
            "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool "
            "instead."] * 2, device
    a = torch.arange(4)
    same_error(lambda t: t.__setitem__(t > -1, torch.tensor([], device=t.device)), a)
    same_error(lambda t: t.__setitem__(t > -1, torch.tensor([1.0, 2.0, 3.0], device=t.device)), a)
    same_error(lambda t: t.__setitem__(([0, 1], [0, 1, 2]), 0.0), torch.zeros(5, 5))
    same_error(lambda t: t.index_put_((t.new_tensor([0, 1]).long(), t.new_tensor([0, 1, 2]).long()),
                                      t.new_tensor(1.0)), torch.zeros(5, 5))
