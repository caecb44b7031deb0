"""CPU inputs of a graph compiled with backend="neuron" are copied to the device, as
TorchNeuron does: a model left on the CPU runs on neuron, its outputs are on neuron and
equal the device's eager results; a CPU input the graph writes is written back; the
TorchNeuron switch turns it off."""

import copy
import warnings

import pytest
import torch
import torch.nn as nn

import openneuron


@pytest.fixture(autouse=True)
def fresh_dynamo(monkeypatch):
    monkeypatch.setenv("OPENNEURON_FALLBACK", "error")
    monkeypatch.delenv("OPENNEURON_CPU_AUTOCOPY", raising=False)
    monkeypatch.delenv("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", raising=False)
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    yield
    torch._dynamo.reset()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))


def test_a_cpu_model_runs_on_the_device_as_one_program(neuron):
    model = mlp()
    on_device = copy.deepcopy(model).to(neuron)
    compiled = torch.compile(model, backend="neuron")
    x = torch.randn(5, 8)
    with torch.no_grad():
        for _ in range(3):
            out = compiled(x)
        expected = on_device(x.to(neuron))
        torch.neuron.synchronize()
        before = openneuron.runtime_counters()["launches"]
        out = compiled(x)
        torch.neuron.synchronize()
        launches = openneuron.runtime_counters()["launches"] - before
    assert out.device.type == "neuron"
    assert torch.equal(out.cpu(), expected.cpu())
    assert launches == 1  # the copies are DMA transfers, the graph one program
    m = torch.neuron.get_dynamo_metrics()
    assert m["cpu_autocopy_graphs"] == 1
    assert m["cpu_autocopy_inputs"] == 5  # x, two weights, two biases
    assert m["whole_graph_calls"] >= 1 and m["capture_failures"] == {}
    assert x.device.type == "cpu" and next(model.parameters()).device.type == "cpu"


def test_training_a_cpu_model_compiled_matches_the_device(neuron):
    # Gradients flow back to the CPU parameters through the copies.
    model = mlp()
    reference = copy.deepcopy(model).to(neuron)
    compiled = torch.compile(model, backend="neuron")
    x, y = torch.randn(6, 8), torch.randn(6, 4)
    loss = nn.functional.mse_loss(compiled(x), y.to(neuron))
    loss.backward()
    expected = nn.functional.mse_loss(reference(x.to(neuron)), y.to(neuron))
    expected.backward()
    torch.testing.assert_close(loss.cpu(), expected.cpu())
    for p, q in zip(model.parameters(), reference.parameters()):
        assert p.grad.device.type == "cpu"
        torch.testing.assert_close(p.grad, q.grad.cpu())


def test_a_cpu_input_written_in_place_is_written_back(neuron):
    def f(a, b):
        a.add_(1)
        return a * b

    compiled = torch.compile(f, backend="neuron")
    a, b = torch.zeros(4), torch.full((4,), 2.0)
    for _ in range(3):
        out = compiled(a, b)
    assert torch.equal(a, torch.full((4,), 3.0))
    assert out.device.type == "neuron" and torch.equal(out.cpu(), torch.full((4,), 6.0))


def test_dynamic_sizes_and_zero_dim_cpu_tensors(neuron):
    compiled = torch.compile(lambda t, w, s: (t @ w).relu() * s, backend="neuron", dynamic=True)
    w, s = torch.randn(8, 3), torch.tensor(0.5)
    for n in (2, 3, 5, 7):
        t = torch.randn(n, 8)
        out = compiled(t, w, s)
        assert out.device.type == "neuron"
        torch.testing.assert_close(out.cpu(), (t @ w).relu() * s)
    # t and w are copied; the 0-dim s stays a host scalar, as device ops take it in eager mode.
    m = torch.neuron.get_dynamo_metrics()
    assert m["cpu_autocopy_inputs"] == 2 * m["cpu_autocopy_graphs"]


def test_the_torchneuron_switch_turns_it_off(neuron, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", "1")
    model = mlp()
    x = torch.randn(5, 8)
    with torch.no_grad():
        out = torch.compile(model, backend="neuron")(x)
        assert out.device.type == "cpu"
        torch.testing.assert_close(out, model(x))
    assert torch.neuron.get_dynamo_metrics()["cpu_autocopy_graphs"] == 0


def test_a_graph_that_makes_cpu_tensors_runs_where_its_inputs_are(neuron):
    compiled = torch.compile(lambda t: t + torch.ones(3), backend="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(torch.zeros(3))
    assert out.device.type == "cpu" and torch.equal(out, torch.ones(3))
    assert any("not copied to the device" in str(w.message) for w in caught)
