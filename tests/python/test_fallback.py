"""CPU fallback for ops without a native kernel: correct, warned once, counted, switchable.

Ops without a lowering of our own normally run as host library kernels
(test_host_library.py); OPENNEURON_HOST_LIBRARY=0 sends them to the copying CPU fallback,
which is what these tests exercise (it is still the path for calls the library path
cannot run in place)."""

import warnings

import pytest
import torch

import openneuron


@pytest.fixture(autouse=True)
def _fallback_path(monkeypatch):
    monkeypatch.setenv("OPENNEURON_HOST_LIBRARY", "0")


def test_fallback_is_correct_warned_once_and_counted(neuron, monkeypatch):
    monkeypatch.delenv("OPENNEURON_FALLBACK", raising=False)
    openneuron.reset_fallback_stats()
    x = torch.randn(50)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a = torch.logcumsumexp(x.to(neuron), 0)
        b = torch.logcumsumexp(x.to(neuron), 0)
    assert a.device.type == "neuron"
    torch.testing.assert_close(a.cpu(), torch.logcumsumexp(x, 0))
    torch.testing.assert_close(b.cpu(), torch.logcumsumexp(x, 0))
    msgs = [str(m.message) for m in w if "aten::_logcumsumexp" in str(m.message)]
    assert len(msgs) == 1
    assert "has no native neuron kernel; running it on the CPU" in msgs[0]
    counted = {k: v for k, v in openneuron.fallback_stats().items() if k.startswith("aten::_logcumsumexp")}
    assert sum(counted.values()) == 2, counted


def test_fallback_keeps_in_place_and_out_semantics(neuron, monkeypatch):
    # lgamma and logcumsumexp have no native kernel: both go through the fallback.
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent")
    openneuron.reset_fallback_stats()
    x = torch.randn(10)
    d = x.to(neuron)
    view = d[2:8]
    view.lgamma_()  # in-place fallback through a view must write the base
    ref = x.clone()
    ref[2:8].lgamma_()
    torch.testing.assert_close(d.cpu(), ref)
    out = torch.empty(0, device=neuron)
    torch.logcumsumexp(d, 0, out=out)
    torch.testing.assert_close(out.cpu(), torch.logcumsumexp(ref, 0))
    stats = openneuron.fallback_stats()
    assert any(k.startswith("aten::lgamma") for k in stats), stats
    assert any(k.startswith("aten::_logcumsumexp") for k in stats), stats


def test_error_mode_names_the_op(neuron, monkeypatch):
    monkeypatch.setenv("OPENNEURON_FALLBACK", "error")
    with pytest.raises(NotImplementedError, match="aten::_logcumsumexp"):
        torch.logcumsumexp(torch.ones(3, device=neuron), 0)
    assert torch.ones(3, device=neuron).sum().item() == 3.0


def test_python_callable_methods_run_on_the_host(neuron):
    """Tensor.apply_/map_/map2_ (CPU-only in PyTorch) work on neuron tensors as on the CPU."""
    def both(fn):
        a = torch.arange(6.0).reshape(2, 3)
        b, c = torch.tensor([1.0, -2.0, 3.0]), torch.tensor([[2.0], [0.5]])
        want = fn(a.clone(), b, c)
        got = fn(a.to(neuron), b.to(neuron), c.to(neuron))
        assert got.device.type == "neuron" and torch.equal(got.cpu(), want)

    both(lambda a, b, c: a.apply_(lambda x: x * x - 1))
    both(lambda a, b, c: a.map_(b, lambda x, y: x * y + 1))  # b broadcasts, as on the CPU
    both(lambda a, b, c: a.map2_(b, c, lambda x, y, z: x + y * z))
    a = torch.ones(3, device=neuron)
    with pytest.raises(TypeError, match="expected torch.neuron.FloatTensor for 'other'"):
        a.map_(torch.ones(3), lambda x, y: x)
    with pytest.raises(TypeError, match="for argument 'y'"):
        a.map2_(a, a.int(), lambda x, y, z: x)
    with pytest.raises(RuntimeError, match=r"Can't call apply_\(\) on Variable that requires grad"):
        torch.ones(3, device=neuron, requires_grad=True).apply_(lambda x: x)
    assert torch.equal(a.cpu(), torch.ones(3))  # nothing lost
