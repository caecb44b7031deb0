"""Host library kernels: ops without a lowering of our own run PyTorch's CPU kernel in place
on device memory (csrc/torch/host_library.cpp). Each test checks the values against the CPU
and that the op went through the library path rather than the copying CPU fallback."""

import warnings

import pytest
import torch

import openneuron

# Ops picked because they have no lowering of our own and are unlikely to get one soon.
LIBRARY_UNARY = "aten::lgamma"


@pytest.fixture(autouse=True)
def _clean_stats():
    openneuron.reset_library_stats()
    openneuron.reset_fallback_stats()
    yield


def stats():
    return openneuron.library_stats(), openneuron.fallback_stats()


def calls(counts, op):
    """Calls of `op` in any overload (PyTorch may route lgamma to lgamma.out, for example)."""
    return sum(n for name, n in counts.items() if name.split(".")[0] == op)


def test_functional_op_runs_in_place_on_device_memory():
    x = torch.rand(1000) * 5 + 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a library op must not warn like a fallback
        y = torch.lgamma(x.to("neuron"))
    assert y.device.type == "neuron"
    torch.testing.assert_close(y.cpu(), torch.lgamma(x))
    lib, fb = stats()
    assert calls(lib, LIBRARY_UNARY) == 1
    assert fb == {}


def test_reads_results_of_queued_device_work():
    # The producer is queued on the stream; the library kernel must wait for it.
    x = torch.rand(1 << 20, device="neuron") + 0.5
    for _ in range(5):
        x = x * 1.0001 + 0.0001
    y = torch.lgamma(x)
    torch.testing.assert_close(y.cpu(), torch.lgamma(x.cpu()))


def test_in_place_writes_device_memory_without_reallocating():
    x = torch.rand(64) + 0.5
    d = x.to("neuron")
    ptr = d.data_ptr()
    out = d.lgamma_()
    assert out is d and d.data_ptr() == ptr
    torch.testing.assert_close(d.cpu(), torch.lgamma(x))
    assert calls(stats()[0], LIBRARY_UNARY) == 1  # lgamma_ runs as lgamma.out(out=self)


def test_out_argument_is_resized_like_on_the_cpu():
    x = torch.rand(3, 5) + 0.5
    out = torch.empty(0, device="neuron")
    r = torch.lgamma(x.to("neuron"), out=out)
    assert r is out and out.shape == (3, 5)
    torch.testing.assert_close(out.cpu(), torch.lgamma(x))
    # Right-sized out: written in place.
    out2 = torch.empty(3, 5, device="neuron")
    ptr = out2.data_ptr()
    torch.lgamma(x.to("neuron"), out=out2)
    assert out2.data_ptr() == ptr
    torch.testing.assert_close(out2.cpu(), torch.lgamma(x))


def test_multiple_outputs_and_non_contiguous_inputs():
    x = torch.randn(6, 9)
    d = x.to("neuron").t()  # non-contiguous view
    values, indices = torch.kthvalue(d, 2, dim=1)
    ev, ei = torch.kthvalue(x.t(), 2, dim=1)
    torch.testing.assert_close(values.cpu(), ev)
    assert torch.equal(indices.cpu(), ei)
    assert values.device.type == "neuron" and indices.device.type == "neuron"


def test_linear_algebra_through_the_library():
    a = torch.randn(4, 4) + 4 * torch.eye(4)
    inv = torch.linalg.inv(a.to("neuron"))
    torch.testing.assert_close(inv.cpu(), torch.linalg.inv(a), rtol=1e-4, atol=1e-5)
    assert stats()[1] == {}


def test_gradients_flow_through_library_ops():
    x = torch.rand(10) + 0.5
    xd = x.to("neuron").requires_grad_()
    xc = x.clone().requires_grad_()
    torch.lgamma(xd).sum().backward()
    torch.lgamma(xc).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)  # digamma, also through the library


def test_disabled_library_takes_the_counted_cpu_fallback(monkeypatch):
    monkeypatch.setenv("OPENNEURON_HOST_LIBRARY", "0")
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent")
    x = torch.rand(8) + 0.5
    y = torch.lgamma(x.to("neuron"))
    torch.testing.assert_close(y.cpu(), torch.lgamma(x))
    lib, fb = stats()
    assert lib == {} and calls(fb, LIBRARY_UNARY) == 1


def test_error_of_the_cpu_kernel_reaches_the_user_and_the_process_carries_on():
    a = torch.randn(2, 3, device="neuron")
    with pytest.raises(RuntimeError):
        torch.linalg.inv(a)  # not square: the CPU kernel's own error
    b = torch.eye(2, device="neuron")
    torch.testing.assert_close(torch.linalg.inv(b).cpu(), torch.eye(2))


def test_tensors_on_two_devices_raise_the_usual_error():
    a = torch.rand(4, device="neuron") + 1.5  # zeta(x, q) is finite for x > 1
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.special.zeta(a, torch.rand(4) + 2)
    if torch.neuron.device_count() > 1:
        with pytest.raises(RuntimeError, match="neuron:0 and neuron:1"):
            torch.special.zeta(a, torch.rand(4, device="neuron:1") + 2)
    # A CPU scalar is fine, as everywhere in PyTorch.
    torch.testing.assert_close(torch.special.zeta(a, torch.tensor(2.0)).cpu(),
                               torch.special.zeta(a.cpu(), torch.tensor(2.0)))


def test_random_ops_draw_from_the_device_generator():
    # cauchy_ has no lowering of our own: it runs on the CPU kernel with a generator seeded
    # from the device's, so torch.manual_seed reproduces it and each call differs.
    def draw():
        return torch.empty(1000, device="neuron").cauchy_().cpu()

    torch.manual_seed(7)
    a, b = draw(), draw()
    torch.manual_seed(7)
    a2 = draw()
    assert torch.equal(a, a2) and not torch.equal(a, b)
    assert abs(a.median().item()) < 0.2  # standard Cauchy: median 0
    g = torch.Generator(device="neuron").manual_seed(3)
    c = torch.empty(100, device="neuron").cauchy_(generator=g).cpu()
    g.manual_seed(3)
    assert torch.equal(c, torch.empty(100, device="neuron").cauchy_(generator=g).cpu())
    lib, fb = stats()
    assert calls(lib, "aten::cauchy_") >= 5 and fb == {}


def test_factories_and_backend_hooks_without_an_own_lowering():
    # A factory's device argument: built by the CPU kernel, copied once to the device.
    t = torch.tril_indices(4, 3, device="neuron")
    assert t.device.type == "neuron" and torch.equal(t.cpu(), torch.tril_indices(4, 3))
    # conv_transpose with output_padding: our convolution declines, the CPU's own
    # convolution runs on the device memory, forward and backward.
    x = torch.randn(1, 2, 5, 5)
    w = torch.randn(2, 3, 3, 3)
    xd, wd = x.to("neuron").requires_grad_(), w.to("neuron").requires_grad_()
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    f = torch.nn.functional.conv_transpose2d
    yd = f(xd, wd, stride=2, output_padding=1)
    yc = f(xc, wc, stride=2, output_padding=1)
    torch.testing.assert_close(yd.detach().cpu(), yc.detach(), rtol=1e-4, atol=1e-4)
    yd.sum().backward()
    yc.sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-4)
    assert stats()[1] == {}
