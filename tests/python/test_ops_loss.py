"""Losses on neuron against the CPU: forward, backward (autograd), bf16, reductions, errors;
nll_loss errors raised at synchronisation; chunked linear cross-entropy. Softmax and the
cross-entropy built on it are in test_ops_softmax.py."""

import functools

import pytest
import torch
import torch.nn.functional as F

import helpers
import openneuron

check = functools.partial(helpers.check, grad_idx=(0,), tols={
    torch.float32: dict(rtol=1e-5, atol=1e-6), None: dict(rtol=2e-2, atol=2e-2)})


REDUCTIONS = ["mean", "sum", "none"]
LOSSES = [
    ("mse", lambda x, t, r: F.mse_loss(x, t, reduction=r)),
    ("l1", lambda x, t, r: F.l1_loss(x, t, reduction=r)),
    ("smooth_l1", lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.5)),
    ("smooth_l1_b0", lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.0)),
    ("huber", lambda x, t, r: F.huber_loss(x, t, reduction=r, delta=0.7)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,fn", LOSSES, ids=[l[0] for l in LOSSES])
def test_regression_losses(neuron, monkeypatch, name, fn, reduction, dtype):
    # l1_loss (and smooth_l1 with beta=0, which calls it) is composite (abs/sub/mean
    # forward, sgn in backward); sgn belongs to the
    # transformer-ops family and is the only op allowed to fall back here.
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent" if name in ("l1", "smooth_l1_b0") else "error")
    openneuron.reset_fallback_stats()
    torch.manual_seed(0)
    x, t = torch.randn(13, 7), torch.randn(13, 7)
    check(lambda a, b: fn(a, b, reduction), [x, t], neuron, dtype, grad_idx=(0, 1))
    assert set(openneuron.fallback_stats()) <= {"aten::sgn.out", "aten::sgn"}


def test_mse_large_and_broadcast(neuron, no_fallback):
    torch.manual_seed(1)
    x, t = torch.randn(300, 400), torch.randn(300, 400)
    check(lambda a, b: F.mse_loss(a, b), [x, t], neuron)
    # aten broadcasts (F.mse_loss warns): target [400] against input [300, 400].
    with pytest.warns(UserWarning):
        check(lambda a, b: F.mse_loss(a, b), [x, t[0]], neuron)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(neuron, no_fallback, reduction, weighted):
    torch.manual_seed(2)
    x = torch.rand(10, 6).clamp(0.01, 0.99)
    t = torch.rand(10, 6)
    w = torch.rand(6) if weighted else None
    wd = w.to(neuron) if weighted else None
    cpu = lambda a, b: F.binary_cross_entropy(a, b, weight=w if a.is_cpu else wd, reduction=reduction)
    check(cpu, [x, t], neuron)


def test_binary_cross_entropy_errors(neuron):
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(torch.tensor([1.5], device=neuron), torch.tensor([1.0], device=neuron)).cpu()
    with pytest.raises(ValueError, match="different to the input size"):
        F.binary_cross_entropy(torch.rand(3, device=neuron), torch.rand(4, device=neuron))


def test_loss_device_mismatch_error(neuron):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        F.mse_loss(torch.randn(3, device=neuron), torch.randn(3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss2d_and_cross_entropy_2d(neuron, no_fallback, reduction, weighted):
    torch.manual_seed(3)
    x = torch.randn(2, 5, 4, 3)
    t = torch.randint(0, 5, (2, 4, 3))
    t[0, 0, 0] = -100
    w = torch.rand(5) if weighted else None
    wd = w.to(neuron) if weighted else None
    fn = lambda a, b: F.cross_entropy(a, b, weight=w if a.is_cpu else wd, reduction=reduction)
    check(fn, [x, t], neuron)


def test_cross_entropy_label_smoothing_runs_natively(neuron, monkeypatch):
    # Label smoothing decomposes into log_softmax, nll_loss, sum/mean, mul: all native.
    monkeypatch.setenv("OPENNEURON_FALLBACK", "error")
    torch.manual_seed(4)
    x, t = torch.randn(16, 10), torch.randint(0, 10, (16,))
    check(lambda a, b: F.cross_entropy(a, b, label_smoothing=0.1), [x, t], neuron)


def test_bce_with_logits(neuron, monkeypatch):
    # Composite over log_sigmoid (transformer-ops family): only that may fall back.
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent")
    openneuron.reset_fallback_stats()
    torch.manual_seed(5)
    x, t = torch.randn(8, 3), torch.rand(8, 3)
    pw = torch.rand(3)
    check(lambda a, b: F.binary_cross_entropy_with_logits(a, b, pos_weight=pw.to(a.device)), [x, t], neuron)
    assert all("log_sigmoid" in k for k in openneuron.fallback_stats()), openneuron.fallback_stats()


def test_device_errors_surface_at_sync_with_op_name(neuron, no_fallback):
    logits = torch.randn(4, 3, device=neuron)
    bad_target = torch.tensor([0, 1, 7, 2], device=neuron)
    with pytest.raises(RuntimeError, match="out of bounds"):
        F.nll_loss(logits, bad_target).item()
    assert torch.ones(2, device=neuron).sum().item() == 2.0  # the stream recovers


def test_chunked_linear_cross_entropy_uses_the_cpu_defaults(neuron, no_fallback):
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
