"""The RNN family on neuron (ops_rnn.cpp): nn.LSTM, nn.GRU, nn.RNN and the cells, forward
and backward, against the CPU; natively (no CPU fallback)."""

import copy

import pytest
import torch
import torch.nn as nn

pytestmark = pytest.mark.usefixtures("no_fallback")


def _compare(module, inputs, neuron, atol=1e-5, rtol=1e-4):
    """Runs module(*inputs) and its backward on the CPU and on neuron; compares outputs,
    input gradients and parameter gradients."""
    cpu_mod, dev_mod = module, copy.deepcopy(module).to(neuron)
    cpu_in = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    dev_in = [x.detach().to(neuron).requires_grad_(x.is_floating_point()) for x in inputs]
    cpu_out, dev_out = cpu_mod(*cpu_in), dev_mod(*dev_in)
    flat = lambda o: [t for t in (o if isinstance(o, tuple) else (o,))  # noqa: E731
                      for t in (t if isinstance(t, tuple) else (t,))]
    cpu_flat, dev_flat = flat(cpu_out), flat(dev_out)
    for c, d in zip(cpu_flat, dev_flat):
        torch.testing.assert_close(d.cpu(), c, atol=atol, rtol=rtol)
    torch.manual_seed(0)
    weights = [torch.randn_like(c) for c in cpu_flat]
    sum(((c * w).sum() for c, w in zip(cpu_flat, weights))).backward()
    sum(((d * w.to(neuron)).sum() for d, w in zip(dev_flat, weights))).backward()
    for c, d in zip(cpu_in, dev_in):
        if c.grad is not None:
            torch.testing.assert_close(d.grad.cpu(), c.grad, atol=atol, rtol=rtol)
    for (name, c), d in zip(cpu_mod.named_parameters(), dev_mod.parameters()):
        torch.testing.assert_close(d.grad.cpu(), c.grad, atol=atol, rtol=rtol, msg=name)


class _StateAsTwoArgs(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def forward(self, x, h, c):
        return self.cell(x, (h, c))


@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell(neuron, bias):
    torch.manual_seed(1)
    cell = _StateAsTwoArgs(nn.LSTMCell(6, 5, bias=bias))
    _compare(cell, [torch.randn(3, 6), torch.randn(3, 5), torch.randn(3, 5)], neuron)


@pytest.mark.parametrize("bias", [True, False])
def test_gru_cell(neuron, bias):
    torch.manual_seed(2)
    cell = nn.GRUCell(6, 5, bias=bias)
    _compare(cell, [torch.randn(3, 6), torch.randn(3, 5)], neuron)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bidirectional,batch_first", [(False, False), (True, True)])
def test_multilayer_sequence_modules(neuron, kind, bidirectional, batch_first):
    torch.manual_seed(3)
    module = getattr(nn, kind)(4, 7, num_layers=2, bidirectional=bidirectional,
                               batch_first=batch_first)
    x = torch.randn(2, 5, 4) if batch_first else torch.randn(5, 2, 4)
    _compare(module, [x], neuron)


def test_lstm_with_projection_and_initial_state(neuron):
    torch.manual_seed(4)
    lstm = _StateAsTwoArgs(nn.LSTM(4, 8, proj_size=3, num_layers=2))
    _compare(lstm, [torch.randn(6, 2, 4), torch.randn(2, 2, 3), torch.randn(2, 2, 8)], neuron)


def test_packed_sequences(neuron):
    torch.manual_seed(5)
    lstm = nn.LSTM(3, 4)
    x = torch.randn(6, 3, 3)
    lengths = torch.tensor([6, 4, 2])
    outs = []
    for device in ("cpu", neuron):
        packed = nn.utils.rnn.pack_padded_sequence(x.to(device), lengths)
        out, (h, c) = copy.deepcopy(lstm).to(device)(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out)
        outs.append((padded.cpu(), h.cpu(), c.cpu()))
    for a, b in zip(*outs):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_types_compute_in_float(neuron, dtype):
    """One rounding per output (the gates are summed and activated in float): close to the
    float32 CPU result within the dtype's resolution."""
    torch.manual_seed(6)
    lstm, gru = nn.LSTM(8, 16), nn.GRU(8, 16)
    x = torch.randn(4, 2, 8)
    for m in (lstm, gru):
        want = m(x)[0]
        got = copy.deepcopy(m).to(neuron, dtype)(x.to(neuron, dtype))[0]
        torch.testing.assert_close(got.float().cpu(), want, atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_training_follows_the_cpu_for_20_steps(neuron, kind):
    torch.manual_seed(7)
    lstm, head = getattr(nn, kind)(5, 12, batch_first=True), nn.Linear(12, 1)
    x, y = torch.randn(8, 10, 5), torch.randn(8, 1)
    losses = {}
    for device in ("cpu", neuron):
        l, h = copy.deepcopy(lstm).to(device), copy.deepcopy(head).to(device)
        opt = torch.optim.SGD([*l.parameters(), *h.parameters()], lr=0.1)
        run = []
        for _ in range(20):
            opt.zero_grad()
            out, _ = l(x.to(device))
            loss = nn.functional.mse_loss(h(out[:, -1]), y.to(device))
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses[str(device)] = run
    assert losses["neuron"][-1] < losses["neuron"][0]
    torch.testing.assert_close(torch.tensor(losses["neuron"]), torch.tensor(losses["cpu"]),
                               atol=1e-5, rtol=1e-4)


# nn.LSTM and nn.GRU over a whole sequence: one GEMM for the input projections and
# one instruction for the recurrence per layer and direction (ops_rnn.cpp).


class _GruStateAsArg(nn.Module):
    def __init__(self, gru):
        super().__init__()
        self.gru = gru

    def forward(self, x, h, c):  # c unused: the same inputs as the LSTM's
        return self.gru(x, h)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("steps", [1, 9])
def test_whole_sequence_with_state_bidirectional_and_batch_first(neuron, kind, steps):
    """67 hidden units: split over the kernel's threads in unequal blocks."""
    torch.manual_seed(8)
    rnn = getattr(nn, kind)(10, 67, num_layers=2, bidirectional=True, batch_first=True)
    module = _StateAsTwoArgs(rnn) if kind == "LSTM" else _GruStateAsArg(rnn)
    _compare(module, [torch.randn(3, steps, 10), torch.randn(4, 3, 67), torch.randn(4, 3, 67)],
             neuron, atol=2e-5, rtol=2e-4)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_gradient_through_the_final_state_only(neuron, kind):
    torch.manual_seed(9)
    rnn = getattr(nn, kind)(6, 40, num_layers=2)
    x = torch.randn(7, 2, 6)
    grads = []
    for device in ("cpu", neuron):
        m = copy.deepcopy(rnn).to(device)
        xd = x.to(device).detach().requires_grad_()
        _, state = m(xd)
        loss = state[0].sum() + 2 * state[1].sum() if kind == "LSTM" else state.sum()
        loss.backward()
        grads.append([xd.grad.cpu()] + [p.grad.cpu() for p in m.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, atol=2e-5, rtol=2e-4)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("bias", [True, False])
def test_inference_matches_the_cpu(neuron, kind, bias):
    torch.manual_seed(10)
    rnn = getattr(nn, kind)(12, 48, num_layers=2, bias=bias).eval()
    x = torch.randn(11, 4, 12)
    with torch.no_grad():
        want = rnn(x)
        got = copy.deepcopy(rnn).to(neuron)(x.to(neuron))
    torch.testing.assert_close(got[0].cpu(), want[0], atol=1e-5, rtol=1e-4)
    for a, b in zip(want[1] if kind == "LSTM" else [want[1]], got[1] if kind == "LSTM" else [got[1]]):
        torch.testing.assert_close(b.cpu(), a, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_dropout_between_layers_only_in_training(neuron, kind):
    torch.manual_seed(11)
    rnn = getattr(nn, kind)(5, 16, num_layers=3, dropout=0.5)
    x = torch.randn(6, 2, 5)
    dev = copy.deepcopy(rnn).to(neuron)
    trained = dev(x.to(neuron))[0]
    trained.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in dev.parameters())
    dev.eval()
    rnn.eval()
    evaluated = dev(x.to(neuron))[0]
    assert not torch.allclose(trained.detach(), evaluated.detach())
    torch.testing.assert_close(evaluated.detach().cpu(), rnn(x)[0].detach(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_launches_per_layer_not_per_time_step(neuron, kind):
    """PyTorch's composite launches a few ops per time step and layer, forward and backward;
    here a layer and direction is a handful of launches whatever the sequence length."""
    import openneuron

    rnn = getattr(nn, kind)(4, 32, num_layers=2, bidirectional=True).to(neuron)
    x = torch.randn(60, 3, 4, device=neuron)
    torch.neuron.synchronize()
    before = openneuron.runtime_counters()["launches"]
    out = rnn(x)[0]
    torch.neuron.synchronize()
    forward = openneuron.runtime_counters()["launches"] - before
    out.sum().backward()
    torch.neuron.synchronize()
    backward = openneuron.runtime_counters()["launches"] - before - forward
    assert forward <= 40 and backward <= 60, (forward, backward)  # per step: 4 x 60 and more


def test_bad_gate_sizes_are_clear_errors(neuron):
    g = torch.randn(2, 8, device=neuron)
    with pytest.raises(RuntimeError, match="the state must be"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g, torch.randn(2, 3, device=neuron))
    with pytest.raises(RuntimeError, match="must both be given"):
        torch.ops.aten._thnn_fused_gru_cell(torch.randn(2, 6, device=neuron), torch.randn(2, 6, device=neuron),
                                   torch.randn(2, 2, device=neuron), torch.randn(6, device=neuron))
    torch.neuron.synchronize()  # the device carries on


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_double_backward_is_a_clear_error_with_a_way_out(neuron, kind):
    """The whole-sequence kernels have no double backward (nor has cuDNN's RNN): asking for one
    raises, naming OPENNEURON_RNN_SEQUENCE=0, under which PyTorch's composite gives the CPU's."""
    script = f"""
import torch, torch.nn as nn
torch.manual_seed(0)
rnn = nn.{kind}(3, 5)
x = torch.randn(4, 2, 3)
def penalty(m, x):
    m.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_()
    (g,) = torch.autograd.grad(m(x)[0].pow(2).sum(), x, create_graph=True)
    g.pow(2).sum().backward()
    return [p.grad.clone() for p in m.parameters()]
dev = [p.cpu() for p in penalty(rnn.to("neuron"), x.to("neuron"))]
ref = penalty(rnn.cpu(), x)
for a, b in zip(ref, dev):
    torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)
print("ok")
"""
    from conftest import run_python

    r = run_python(script)
    assert r.returncode != 0 and "OPENNEURON_RNN_SEQUENCE=0" in r.stderr, r.stderr[-2000:]
    r = run_python(script, OPENNEURON_RNN_SEQUENCE="0")
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
