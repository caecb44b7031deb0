"""Native norms (layer, RMS, group, batch) against the CPU, forward and backward."""

import copy

import pytest
import torch
import torch.nn.functional as F

import openneuron
from helpers import backward, close


pytestmark = pytest.mark.usefixtures("no_fallback")


TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def pair(t):
    """A CPU leaf and its neuron copy, both requiring grad."""
    a = t.detach().clone().requires_grad_()
    b = t.detach().to("neuron").requires_grad_()
    return a, b


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_backward(neuron, dtype, affine):
    tol = TOL[dtype]
    x, xn = pair(torch.randn(4, 7, 96, dtype=dtype))
    args, nargs = [], []
    if affine:
        w, wn = pair(torch.randn(96, dtype=dtype))
        b, bn = pair(torch.randn(96, dtype=dtype))
        args, nargs = [w, b], [wn, bn]
    y = F.layer_norm(x, (96,), *args, eps=1e-5)
    yn = F.layer_norm(xn, (96,), *nargs, eps=1e-5)
    close(yn, y, tol)
    backward(y, yn)
    close(xn.grad, x.grad, tol * 2)
    for c, n in zip(args, nargs):
        close(n.grad, c.grad, tol * 10)


def test_layer_norm_multi_dim_noncontiguous_and_stats(neuron):
    x = torch.randn(6, 5, 8).transpose(0, 1)
    w, b = torch.randn(6, 8), torch.randn(6, 8)
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, [6, 8], w, b, 1e-5)
    outn, meann, rstdn = torch.ops.aten.native_layer_norm(x.to(neuron), [6, 8], w.to(neuron),
                                                          b.to(neuron), 1e-5)
    close(outn, out, 1e-5)
    close(meann, mean, 1e-5)
    close(rstdn, rstd, 1e-4)
    assert meann.shape == mean.shape and meann.dtype == mean.dtype


def test_layer_norm_mixed_dtype_stats_are_float(neuron):
    x = torch.randn(3, 16, dtype=torch.bfloat16)
    w = torch.randn(16)
    ref = torch.ops.aten.native_layer_norm(x, [16], w, None, 1e-5)
    got = torch.ops.aten.native_layer_norm(x.to(neuron), [16], w.to(neuron), None, 1e-5)
    for r, g in zip(ref, got):
        assert r.dtype == g.dtype
        close(g, r, 2e-2)


def test_layer_norm_bad_shape_message(neuron):
    x = torch.randn(3, 5)
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 4\], but got input of size"):
        F.layer_norm(x.to(neuron), (4,))
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape as normalized_shape"):
        F.layer_norm(x.to(neuron), (5,), torch.ones(4, device=neuron))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_forward_backward(neuron, dtype):
    tol = TOL[dtype]
    x, xn = pair(torch.randn(2, 9, 64, dtype=dtype))
    w, wn = pair(torch.randn(64, dtype=dtype))
    y = F.rms_norm(x, (64,), w, 1e-6)
    yn = F.rms_norm(xn, (64,), wn, 1e-6)
    close(yn, y, tol)
    backward(y, yn)
    close(xn.grad, x.grad, tol * 2)
    close(wn.grad, w.grad, tol * 10)
    # eps=None: the dtype's epsilon, as on the CPU.
    close(F.rms_norm(xn, (64,), wn), F.rms_norm(x, (64,), w), tol)


def test_rms_norm_uses_fused_kernel(neuron):
    out, rstd = torch.ops.aten._fused_rms_norm(torch.randn(4, 32, device=neuron), [32], None, 1e-5)
    assert rstd.shape == (4, 1) and rstd.dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_group_norm_forward_backward(neuron, dtype):
    tol = TOL[dtype]
    x, xn = pair(torch.randn(3, 6, 5, 7, dtype=dtype))
    w, wn = pair(torch.randn(6, dtype=dtype))
    b, bn = pair(torch.randn(6, dtype=dtype))
    y = F.group_norm(x, 3, w, b, 1e-5)
    yn = F.group_norm(xn, 3, wn, bn, 1e-5)
    close(yn, y, tol)
    backward(y, yn)
    close(xn.grad, x.grad, tol * 2)
    close(wn.grad, w.grad, tol * 10)
    close(bn.grad, b.grad, tol * 10)


def test_group_norm_bad_groups(neuron):
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        torch.ops.aten.native_group_norm(torch.randn(2, 6, 4, device=neuron), None, None,
                                         2, 6, 4, 4, 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_train_eval_running_stats(neuron, dtype):
    tol = TOL[dtype]
    torch.manual_seed(0)
    m = torch.nn.BatchNorm2d(6).to(dtype)
    mn = torch.nn.BatchNorm2d(6).to(dtype).to(neuron)
    mn.load_state_dict(m.state_dict())
    x, xn = pair(torch.randn(4, 6, 5, 5, dtype=dtype))
    for _ in range(2):
        y, yn = m(x), mn(xn)
        close(yn, y, tol)
    close(mn.running_mean, m.running_mean, tol)
    close(mn.running_var, m.running_var, tol)
    assert mn.num_batches_tracked.item() == 2
    g = backward(y, yn)
    close(xn.grad, x.grad, tol * 5)
    close(mn.weight.grad, m.weight.grad, tol * 10)
    close(mn.bias.grad, m.bias.grad, tol * 10)
    m.eval()
    mn.eval()
    x.grad, xn.grad = None, None
    y, yn = m(x), mn(xn)
    close(yn, y, tol)
    y.backward(g)
    yn.backward(g.to(neuron))
    close(xn.grad, x.grad, tol * 5)


def test_batch_norm_1d_and_functional_no_stats(neuron):
    x = torch.randn(8, 5)
    close(F.batch_norm(x.to(neuron), None, None, training=True),
          F.batch_norm(x, None, None, training=True), 1e-5)
    rm, rv = torch.randn(5), torch.rand(5) + 0.5
    close(F.batch_norm(x.to(neuron), rm.to(neuron), rv.to(neuron)), F.batch_norm(x, rm, rv), 1e-5)


def test_batch_norm_single_value_error(neuron):
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_norm(torch.randn(1, 4, device=neuron), None, None, training=True)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_channels_last(neuron, training, dims, dtype):
    """A channels_last input is normalised in place into a channels_last output (the CPU's
    strides), batch statistics and running statistics as the CPU's; the backward too."""
    g = torch.Generator().manual_seed(dims)
    shape = (4, 16, 7, 9) if dims == 2 else (2, 8, 3, 4, 5)
    fmt = torch.channels_last if dims == 2 else torch.channels_last_3d
    x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype).to(memory_format=fmt)
    bn = (torch.nn.BatchNorm2d if dims == 2 else torch.nn.BatchNorm3d)(shape[1])
    with torch.no_grad():
        for t, lo, hi in ((bn.weight, 0.5, 2), (bn.bias, -1, 1), (bn.running_mean, -1, 1),
                          (bn.running_var, 0.5, 2)):
            t.copy_(torch.rand(t.shape, generator=g) * (hi - lo) + lo)
    bn.train(training)
    bnn = copy.deepcopy(bn).to(neuron)
    xc, xn = x.clone().requires_grad_(), x.to(neuron).requires_grad_()
    want, got = bn(xc), bnn(xn)
    assert got.stride() == want.stride()
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.cpu(), want, **tol)
    torch.testing.assert_close(bnn.running_mean.cpu(), bn.running_mean, **tol)
    torch.testing.assert_close(bnn.running_var.cpu(), bn.running_var, **tol)
    gy = torch.randn(shape, generator=g).to(dtype)
    (gw,), (gg,) = torch.autograd.grad(want, xc, gy), torch.autograd.grad(got, xn, gy.to(neuron))
    assert gg.stride() == gw.stride()
    torch.testing.assert_close(gg.cpu(), gw, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_group_norm_channels_last(neuron, dtype):
    """A channels_last input gives a channels_last output (the CPU's strides), normalised in
    place; values and gradients as the CPU's. (The gradient's layout is autograd's choice:
    its formula makes the input contiguous for every device but the CPU.)"""
    g = torch.Generator().manual_seed(11)
    x = (torch.randn(2, 12, 5, 7, generator=g) * 2 + 1).to(dtype).to(memory_format=torch.channels_last)
    w, b = torch.rand(12, generator=g) + 0.5, torch.randn(12, generator=g)
    xc, xn = x.clone().requires_grad_(), x.to(neuron).requires_grad_()
    want = F.group_norm(xc, 3, w.to(dtype), b.to(dtype))
    got = F.group_norm(xn, 3, w.to(neuron, dtype), b.to(neuron, dtype))
    assert got.stride() == want.stride()
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.cpu(), want, **tol)
    gy = torch.randn(x.shape, generator=g).to(dtype)
    (gw,), (gg,) = torch.autograd.grad(want, xc, gy), torch.autograd.grad(got, xn, gy.to(neuron))
    torch.testing.assert_close(gg.cpu(), gw, **tol)
