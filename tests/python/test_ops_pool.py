"""Pooling and upsampling on neuron against the CPU, forward and backward."""

import functools

import pytest
import torch
import torch.nn.functional as F

import helpers

pytestmark = pytest.mark.usefixtures("no_fallback")

check = functools.partial(helpers.check, equal_nan=True, tols={
    torch.float32: dict(rtol=1e-5, atol=1e-5), None: dict(rtol=2e-2, atol=2e-2)})


MAXPOOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
           dict(kernel_size=(3, 2), stride=(2, 1), dilation=2, ceil_mode=True),
           dict(kernel_size=3, stride=2, ceil_mode=True)]


@pytest.mark.parametrize("kw", MAXPOOL, ids=[str(k) for k in MAXPOOL])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max_pool2d(neuron, kw, dtype):
    torch.manual_seed(0)
    check(lambda x: F.max_pool2d(x, return_indices=True, **kw), [torch.randn(2, 3, 11, 9)], neuron, dtype)


def test_max_pool2d_unbatched_nan(neuron):
    x = torch.randn(3, 6, 6)
    x[0, 1, 1] = float("nan")
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), [x], neuron, grad_idx=())


@pytest.mark.parametrize("kw", MAXPOOL, ids=[str(k) for k in MAXPOOL])
def test_max_pool2d_ties_nans_and_infinities_pick_the_cpus_element(neuron, kw):
    """Windows full of ties, several NaNs, -inf: the max and its index are the CPU's (the
    first maximum in row-major window order; the last NaN)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-1, 2, (2, 3, 23, 29), generator=g).float()
    x[torch.rand(x.shape, generator=g) < 0.05] = float("nan")
    x[:, 1, 4:9] = float("-inf")
    check(lambda x: F.max_pool2d(x, return_indices=True, **kw), [x], neuron, grad_idx=())


AVGPOOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
           dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
           dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=2, divisor_override=3)]


@pytest.mark.parametrize("kw", AVGPOOL, ids=[str(k) for k in AVGPOOL])
def test_avg_pool2d(neuron, kw):
    torch.manual_seed(1)
    check(lambda x: F.avg_pool2d(x, **kw), [torch.randn(2, 3, 10, 9)], neuron)


@pytest.mark.parametrize("size", [(1, 1), (3, 4), (7, 5), (10, 9)])
def test_adaptive_pools(neuron, size):
    torch.manual_seed(2)
    x = torch.randn(2, 3, 10, 9)
    check(lambda x: F.adaptive_avg_pool2d(x, size), [x], neuron)
    check(lambda x: F.adaptive_max_pool2d(x, size, return_indices=True), [x], neuron)


def test_pool1d_variants(neuron):
    torch.manual_seed(3)
    x = torch.randn(2, 3, 17)
    check(lambda x: F.max_pool1d(x, 3, 2), [x], neuron)
    check(lambda x: F.avg_pool1d(x, 3, 2, padding=1), [x], neuron)
    check(lambda x: F.adaptive_avg_pool1d(x, 5), [x], neuron)


UPSAMPLE = [dict(scale_factor=2, mode="nearest"), dict(size=(7, 5), mode="nearest"),
            dict(scale_factor=1.7, mode="nearest"), dict(scale_factor=2, mode="bilinear"),
            dict(size=(9, 4), mode="bilinear", align_corners=True),
            dict(scale_factor=0.6, mode="bilinear"), dict(size=(9, 13), mode="bilinear")]


@pytest.mark.parametrize("kw", UPSAMPLE, ids=[str(k) for k in UPSAMPLE])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_upsample2d(neuron, kw, dtype):
    torch.manual_seed(4)
    check(lambda x: F.interpolate(x, **kw), [torch.randn(2, 3, 6, 5)], neuron, dtype)


def test_pool_errors(neuron):
    x = torch.randn(1, 1, 4, 4, device=neuron)
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size|pad should be smaller than or equal to half"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.max_pool2d(x, 5)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)


@pytest.mark.parametrize("fn", [
    lambda t: F.max_pool2d(t, 2), lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True),
    lambda t: F.avg_pool2d(t, 2), lambda t: F.adaptive_avg_pool2d(t, 3),
    lambda t: F.adaptive_max_pool2d(t, 3, return_indices=True),
    lambda t: F.interpolate(t, scale_factor=2), lambda t: F.interpolate(t, size=(5, 7), mode="bilinear"),
], ids=["max", "max_indices", "avg", "adaptive_avg", "adaptive_max", "nearest", "bilinear"])
def test_channels_last_in_channels_last_out(neuron, fn):
    # As on the CPU: results and input gradients keep a channels-last input's layout
    # (a .view() after them and the next conv's layout choice depend on it).
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
    xc, xn = x.clone().requires_grad_(), x.to(neuron).requires_grad_()
    outs = [fn(xc), fn(xn)]
    for c, n in zip(*[o if isinstance(o, tuple) else (o,) for o in outs]):
        assert n.stride() == c.stride()
        torch.testing.assert_close(n.cpu(), c)
    first = [o[0] if isinstance(o, tuple) else o for o in outs]
    for t in first:
        t.sum().backward()
    assert xn.grad.stride() == xc.grad.stride()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)


@pytest.mark.parametrize("fn", [F.adaptive_avg_pool2d, F.adaptive_max_pool2d])
def test_adaptive_pooling_to_an_empty_output_has_no_gradient(neuron, fn):
    # As on the CPU: the forward gives an empty result, its backward raises.
    helpers.same_error(lambda t: fn(t.requires_grad_(), 0).sum().backward(),
                       torch.randn(1, 4, 10, 9))


@pytest.mark.parametrize("kw", MAXPOOL, ids=[str(k) for k in MAXPOOL])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_channels_last_max_pool_picks_the_cpus_elements(neuron, kw, dtype):
    """Channels-last max pooling runs over channels in place: values and indices equal the
    CPU's, ties (small integers) and NaN/-inf included, with the CPU's channels_last strides."""
    g = torch.Generator().manual_seed(7)
    x = torch.randint(-3, 4, (2, 19, 11, 13), generator=g).to(dtype)
    x[0, 1, 2, 3] = float("nan")
    x[1, 5, 0, 0] = float("-inf")
    x = x.to(memory_format=torch.channels_last)
    want, want_i = F.max_pool2d(x, return_indices=True, **kw)
    got, got_i = F.max_pool2d(x.to(neuron), return_indices=True, **kw)
    assert got.stride() == want.stride() and got_i.stride() == want_i.stride()
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(got_i.cpu(), want_i)
