"""Convolutions on neuron (oneDNN) against the CPU: 1-d/2-d/3-d, stride, padding,
dilation, groups, transposed (output_padding), bias, padding modes, backward, bf16."""

import functools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import helpers
import openneuron

pytestmark = pytest.mark.usefixtures("no_fallback")

# Gradients of weights sum hundreds of products: in half types an element that cancels to
# near zero carries the rounding of the large terms (both sides round, differently per
# engine), so its tolerance scales with the largest (half_grad_atol).
check = functools.partial(helpers.check, half_grad_atol=2e-2, tols={
    torch.float32: dict(rtol=1e-4, atol=1e-4), None: dict(rtol=2e-2, atol=5e-2)})


CONV2D = [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=(2, 1), padding=(0, 2), dilation=(1, 2)),
    dict(groups=2, padding=1),
    dict(groups=4, padding="same"),
    dict(padding="valid", dilation=2),
]


@pytest.mark.parametrize("kw", CONV2D, ids=[str(k) for k in CONV2D])
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d(neuron, kw, bias):
    torch.manual_seed(0)
    g = kw.get("groups", 1)
    x, w = torch.randn(2, 4, 9, 10), torch.randn(6 if g != 4 else 8, 4 // g, 3, 3)
    b = torch.randn(w.shape[0])
    if bias:
        check(lambda x, w, b: F.conv2d(x, w, b, **kw), [x, w, b], neuron)
    else:
        check(lambda x, w: F.conv2d(x, w, **kw), [x, w], neuron)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1),
                                dict(stride=3, dilation=2, groups=2), dict(padding=2)])
def test_conv_transpose2d(neuron, kw):
    torch.manual_seed(1)
    g = kw.get("groups", 1)
    x, w, b = torch.randn(2, 4, 5, 6), torch.randn(4, 6 // g, 3, 3), torch.randn(6)
    check(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), [x, w, b], neuron)


def test_conv1d_and_transpose1d(neuron):
    torch.manual_seed(2)
    x, w, b = torch.randn(3, 4, 20), torch.randn(5, 4, 3), torch.randn(5)
    check(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), [x, w, b], neuron)
    wt = torch.randn(4, 5, 4)
    check(lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1), [x, wt], neuron)


def test_conv3d(neuron):
    torch.manual_seed(3)
    x, w = torch.randn(1, 2, 5, 6, 7), torch.randn(3, 2, 2, 3, 3)
    check(lambda x, w: F.conv3d(x, w, padding=1), [x, w], neuron)


def test_conv2d_bf16(neuron):
    torch.manual_seed(4)
    x, w = torch.randn(2, 8, 12, 12), torch.randn(16, 8, 3, 3) * 0.2
    check(lambda x, w: F.conv2d(x, w, padding=1), [x, w], neuron, dtype=torch.bfloat16)


def test_conv_module_unbatched_and_channels_last(neuron):
    torch.manual_seed(5)
    m = nn.Conv2d(3, 4, 3, padding=1)
    md = nn.Conv2d(3, 4, 3, padding=1).to(neuron)
    md.load_state_dict(m.state_dict())
    x = torch.randn(3, 8, 8)  # unbatched
    torch.testing.assert_close(md(x.to(neuron)).detach().cpu(), m(x).detach(), rtol=1e-4, atol=1e-4)
    xc = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
    torch.testing.assert_close(md(xc.to(neuron)).detach().cpu(), m(xc).detach(), rtol=1e-4, atol=1e-4)


def test_conv_padding_mode_circular(neuron, monkeypatch):
    # Non-zero padding modes pad with F.pad first (reflect/replicate pads are not in this
    # family); circular padding is built from cat/slicing.
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent")
    openneuron.reset_fallback_stats()
    torch.manual_seed(6)
    m = nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular")
    md = nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular").to(neuron)
    md.load_state_dict(m.state_dict())
    x = torch.randn(1, 2, 6, 6)
    torch.testing.assert_close(md(x.to(neuron)).detach().cpu(), m(x).detach(), rtol=1e-4, atol=1e-4)
    assert not any("conv" in k for k in openneuron.fallback_stats())


def test_conv_errors(neuron):
    x = torch.randn(1, 4, 5, 5, device=neuron)
    with pytest.raises(RuntimeError, match="Given groups=1, weight of size"):
        F.conv2d(x, torch.randn(2, 3, 3, 3, device=neuron))
    with pytest.raises(RuntimeError, match="should be the same|same dtype"):
        F.conv2d(x, torch.randn(2, 4, 3, 3, device=neuron, dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="Calculated padded input size|too small"):
        F.conv2d(x, torch.randn(2, 4, 7, 7, device=neuron))


def test_small_cnn_trains_like_cpu(neuron):
    torch.manual_seed(7)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 8, 3, stride=2),
                        nn.ReLU(), nn.Flatten(), nn.Linear(8 * 3 * 3, 3))
    x, y = torch.randn(4, 1, 8, 8), torch.tensor([0, 1, 2, 1])
    import copy
    res = []
    for dev in ("cpu", neuron):
        m = copy.deepcopy(net).to(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(m(x.to(dev)), y.to(dev))
            loss.backward()
            opt.step()
        res.append(loss.item())
    assert abs(res[0] - res[1]) < 1e-4


@pytest.mark.parametrize("nsp", [1, 2, 3])
def test_conv_transpose_bias_bf16_rounds_once(neuron, nsp):
    # The CPU adds a transposed convolution's bias in float32 and rounds once; rounding the
    # convolution to bf16 before the bias is many ulps off where the bias cancels it.
    g = torch.Generator().manual_seed(nsp)
    x = torch.randn(2, 3, *([5] * nsp), generator=g).bfloat16()
    w = torch.randn(3, 4, *([3] * nsp), generator=g).bfloat16()
    b = (torch.randn(4, generator=g) * 8).bfloat16()
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nsp]
    ref = fn(x.float(), w.float(), b.float(), stride=2, padding=1).bfloat16()  # fp32, one rounding
    got = fn(x.to(neuron), w.to(neuron), b.to(neuron), stride=2, padding=1).cpu()
    # The reference is float32 rounded once, not the CPU's own bf16 kernel: that one
    # rounds once on AVX-512 hosts but rounds an intermediate on AVX2-only ones.
    assert torch.equal(got, ref)



@pytest.mark.parametrize("channels", [8, 3])
def test_conv_bf16_infinities_reach_only_their_outputs(neuron, channels):
    """bfloat16 convolutions with an even channel count run in bfloat16 (oneDNN pairs
    channels); odd counts compute in float32. Either way an inf or NaN input reaches the
    outputs it touches and no others, forward and backward data: the pattern of the float32
    convolution of the same values. (PyTorch's own CPU bf16 kernel pads odd channel counts
    with zero weights, and inf * 0 spreads NaN to a neighbouring output.)"""
    g = torch.Generator().manual_seed(channels)
    x = torch.randn(2, channels, 9, 9, generator=g).bfloat16()
    w = (torch.randn(channels * 2, channels, 3, 3, generator=g) * 0.2).bfloat16()
    x[0, channels - 1, 4, 4] = float("inf")
    x[1, 0, 2, 7] = float("nan")
    grad = torch.randn(2, channels * 2, 9, 9, generator=g).bfloat16()
    grad[1, channels, 3, 3] = float("-inf")
    outs = []
    for device, dtype in (("cpu", torch.float32), (neuron, torch.bfloat16)):
        xd = x.to(dtype).detach().to(device).requires_grad_()
        y = F.conv2d(xd, w.to(device, dtype), padding=1)
        y.backward(grad.to(device, dtype))
        outs.append((y.detach().cpu().float(), xd.grad.cpu().float()))
    for want, got in zip(*outs):
        assert want.isnan().any() or want.isinf().any()
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.isinf(), want.isinf())
        finite = want.isfinite()
        torch.testing.assert_close(got[finite], want[finite], rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("fn,nsp", [(F.conv1d, 1), (F.conv2d, 2), (F.conv_transpose3d, 3)])
def test_complex32_convolution_rounds_once(neuron, fn, nsp):
    """complex32 convolutions compute in complex64 and round once, forward and backward (the
    CPU's three half-precision real convolutions cancel, several ulps off): output and
    gradients equal complex64's rounded to complex32, and stay complex32."""
    g = torch.Generator().manual_seed(nsp)
    def make(*shape):  # values complex32 holds exactly
        t = torch.complex(torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)) * 3
        return t.to(torch.complex32).to(torch.complex64)
    x, w, b = make(2, 4, *([5] * nsp)), make(4, 4, *([3] * nsp)), make(4)
    go = make(*fn(x, w, b).shape)
    def run(device, dtype):
        args = [t.to(device, dtype).requires_grad_() for t in (x, w, b)]
        y = fn(*args)
        return [y, *torch.autograd.grad(y, args, go.to(device, dtype))]
    got = run(neuron, torch.complex32)
    once = run(neuron, torch.complex64)
    with torch.inference_mode():  # no autograd keys: the same path
        y = fn(x.to(neuron, torch.complex32), w.to(neuron, torch.complex32), b.to(neuron, torch.complex32))
    assert torch.equal(torch.view_as_real(y.cpu()), torch.view_as_real(got[0].detach().cpu()))
    cpu = run("cpu", torch.complex64)
    for gt, on, c in zip(got, once, cpu):
        assert gt.dtype == torch.complex32
        assert torch.equal(torch.view_as_real(gt.cpu()), torch.view_as_real(on.cpu().to(torch.complex32)))
        # Within one complex32 rounding of the CPU's complex64 result.
        torch.testing.assert_close(gt.cpu().to(torch.complex64), c, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("layout", ["input", "weight", "both", "3d", "grouped", "transposed", "bf16"])
def test_channels_last_convolutions_return_channels_last_as_on_the_cpu(neuron, layout):
    """A channels_last input or weight gives channels_last output, grad_input and grad_weight
    with the CPU's strides (the engine reads and writes them in place); values as the CPU's."""
    g = torch.Generator().manual_seed(3)
    nd = 3 if layout == "3d" else 2
    cl = torch.channels_last_3d if nd == 3 else torch.channels_last
    x = torch.randn(2, 8, *([7] * nd), generator=g)
    w = torch.randn(*((8, 5) if layout == "transposed" else (6, 4 if layout == "grouped" else 8)),
                    *([3] * nd), generator=g)
    if layout != "weight":
        x = x.to(memory_format=cl)
    if layout in ("weight", "both"):
        w = w.to(memory_format=cl)
    dtype = torch.bfloat16 if layout == "bf16" else torch.float32
    fn = {"grouped": functools.partial(F.conv2d, groups=2),
          "transposed": functools.partial(F.conv_transpose2d, stride=2),
          "3d": F.conv3d}.get(layout, functools.partial(F.conv2d, stride=2, padding=1))

    def run(device):
        xs = x.to(device, dtype).requires_grad_()
        ws = w.to(device, dtype).requires_grad_()
        y = fn(xs, ws)
        return (y, *torch.autograd.grad(y, (xs, ws), torch.ones_like(y)))

    tol = dict(rtol=2e-2, atol=1e-1) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    for got, want in zip(run(neuron), run("cpu")):
        assert got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want, **tol)
