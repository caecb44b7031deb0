"""What the op tests (tests/python/test_ops_<family>.py) share: run a function on the CPU
and on neuron from the same inputs and compare. Fixtures (`neuron`, `no_fallback`) are in
conftest.py. A file whose comparisons all use other defaults binds them once with
functools.partial; a single call states its own."""

import torch

FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def to_neuron(x):
    """x on neuron if it is a tensor, else x (a Python scalar, a dim, None)."""
    return x.to("neuron") if isinstance(x, torch.Tensor) else x


def same(fn, *args, rtol=1e-5, atol=1e-6, exact=False, equal_nan=True):
    """fn on neuron (tensor arguments copied there) gives fn's CPU result: every output of
    a tuple or list result is on neuron and close to the CPU's (bit-equal with exact)."""
    cpu = fn(*args)
    dev = fn(*[to_neuron(a) for a in args])
    cpus = cpu if isinstance(cpu, (tuple, list)) else [cpu]
    devs = dev if isinstance(dev, (tuple, list)) else [dev]
    for c, d in zip(cpus, devs):
        assert d.device.type == "neuron"
        torch.testing.assert_close(d.cpu(), c, rtol=0 if exact else rtol, atol=0 if exact else atol,
                                   equal_nan=equal_nan)


def same_error(fn, *args):
    """fn raises on neuron (tensor arguments copied there) what it raises on the CPU: the
    same exception type with the same message. The CPU runs on clones: fn may write to
    its inputs."""
    raised = []
    for a in ([x.clone() if isinstance(x, torch.Tensor) else x for x in args],
              [to_neuron(x) for x in args]):
        try:
            fn(*a)
            raised.append(None)
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            raised.append(e)
    cpu, dev = raised
    assert cpu is not None, "the CPU returns"
    assert type(dev) is type(cpu) and str(dev) == str(cpu), f"CPU raises {cpu!r}, neuron {dev!r}"


def close(got, ref, tol=None, **kw):
    """got (a neuron tensor) has ref's dtype and shape and is close to it: within
    rtol = atol = tol, or assert_close's kw (its defaults without either)."""
    assert got.device.type == "neuron"
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if tol is not None:
        kw = dict(rtol=tol, atol=tol, **kw)
    torch.testing.assert_close(got.cpu(), ref, **kw)


def backward(ref, got):
    """Sends one random gradient back through a CPU result and its neuron counterpart;
    returns the gradient (on the CPU)."""
    g = torch.randn_like(ref)
    ref.backward(g)
    got.backward(g.to(got.device))
    return g


def check(fn, inputs, neuron, dtype=torch.float32, *, tols, tol=None, grad_idx=None,
          equal_nan=False, half_grad_atol=None):
    """fn forward and backward on the CPU and on neuron from the same inputs.

    Floating inputs are cast to dtype; the inputs at grad_idx (default: all) require grad.
    The output (or the values of a (values, indices) output, whose indices must be equal)
    has the CPU's device type, shape and dtype and is close to it within tol, default
    tols[dtype] or tols[None] for a dtype not in the table. With grad_idx not empty, a
    random output gradient is sent back through both and the inputs' gradients compared
    within tol. half_grad_atol: in dtypes other than float32, a gradient's atol is at least
    this fraction of the largest CPU gradient of that input."""
    if grad_idx is None:
        grad_idx = range(len(inputs))
    grad_idx = tuple(grad_idx)
    cpu_in = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
    cpu_in = [t.clone().requires_grad_(i in grad_idx) for i, t in enumerate(cpu_in)]
    dev_in = [t.detach().to(neuron).requires_grad_(i in grad_idx) for i, t in enumerate(cpu_in)]
    ref, got = fn(*cpu_in), fn(*dev_in)
    ref_t = ref[0] if isinstance(ref, tuple) else ref
    got_t = got[0] if isinstance(got, tuple) else got
    assert got_t.device.type == "neuron" and got_t.shape == ref_t.shape and got_t.dtype == ref_t.dtype
    tol = tol or tols.get(dtype, tols[None])
    torch.testing.assert_close(got_t.detach().cpu(), ref_t.detach(), equal_nan=equal_nan, **tol)
    if isinstance(ref, tuple):
        assert torch.equal(got[1].cpu(), ref[1])
    if not grad_idx:
        return
    backward(ref_t, got_t)
    for i in grad_idx:
        gtol = tol
        if half_grad_atol is not None and dtype != torch.float32:
            largest = cpu_in[i].grad.abs().max().item()
            gtol = dict(rtol=tol["rtol"], atol=max(tol["atol"], half_grad_atol * largest))
        torch.testing.assert_close(dev_in[i].grad.cpu(), cpu_in[i].grad, **gtol)
