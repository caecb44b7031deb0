"""Compiled inference graphs with convolutions run on channels_last activations (layout.py):
the results and the layouts callers see equal eager mode's."""

import pytest
import torch
import torch.nn as nn

import openneuron


@pytest.fixture(autouse=True)
def fresh_dynamo(monkeypatch):
    monkeypatch.setenv("OPENNEURON_DISK_CACHE", "0")
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    yield
    torch._dynamo.reset()


class ConvNet(nn.Module):
    """Conv, batch norm, ReLU, max pooling, a residual block, then a flatten (a view of a
    contiguous activation, not of a channels_last one) into a classifier; also returns a
    feature map, which eager mode returns contiguous."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = self.stem(x)
        features = torch.relu(self.block(y) + y)
        return self.head(features.flatten(1)), features


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_conv_net_runs_channels_last_and_equals_eager(neuron, dtype):
    torch.manual_seed(0)
    model = ConvNet().to(neuron, dtype).eval()
    x = torch.randn(2, 3, 16, 16, device=neuron, dtype=dtype)
    with torch.no_grad():
        want_logits, want_features = model(x)
        compiled = torch.compile(model, backend="neuron")
        for _ in range(2):  # the op-by-op recording run, then the program
            logits, features = compiled(x)
    metrics = torch.neuron.get_dynamo_metrics()
    assert metrics["channels_last_graphs"] == 1 and metrics["channels_last_convolutions"] == 2
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits.cpu(), want_logits.cpu(), **tol)
    torch.testing.assert_close(features.cpu(), want_features.cpu(), **tol)
    assert features.stride() == want_features.stride()  # contiguous, as eager mode returns it


def test_channels_last_can_be_turned_off(neuron, monkeypatch):
    monkeypatch.setenv("OPENNEURON_CHANNELS_LAST", "0")
    model = ConvNet().to(neuron).eval()
    with torch.no_grad():
        torch.compile(model, backend="neuron")(torch.randn(2, 3, 16, 16, device=neuron))
    assert torch.neuron.get_dynamo_metrics()["channels_last_graphs"] == 0


def test_training_graphs_keep_their_layouts(neuron):
    model = ConvNet().to(neuron)
    logits, _ = torch.compile(model, backend="neuron")(torch.randn(2, 3, 16, 16, device=neuron))
    logits.sum().backward()
    assert torch.neuron.get_dynamo_metrics()["channels_last_graphs"] == 0
    assert model.stem[0].weight.grad is not None


class Features(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return y[0] * 2, y.flatten(2) + 1  # a 3-d output and a flattened one


def test_outputs_of_any_rank_keep_eager_strides(neuron):
    model = Features().to(neuron).eval()
    x = torch.randn(1, 3, 5, 7, device=neuron)
    with torch.no_grad():
        want = model(x)
        compiled = torch.compile(model, backend="neuron")
        for _ in range(2):
            got = compiled(x)
    assert torch.neuron.get_dynamo_metrics()["channels_last_graphs"] == 1
    for g, w in zip(got, want):
        assert g.stride() == w.stride()
        torch.testing.assert_close(g.cpu(), w.cpu())
        g.view(-1)  # viewable as in eager mode


class Aliased(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return y, y[:, :1]


def test_graphs_with_aliased_outputs_keep_their_layout(neuron):
    model = Aliased().to(neuron).eval()
    with torch.no_grad():
        y, part = torch.compile(model, backend="neuron")(torch.randn(2, 3, 6, 6, device=neuron))
    assert torch.neuron.get_dynamo_metrics()["channels_last_graphs"] == 0
    y.zero_()
    assert torch.count_nonzero(part).item() == 0  # still a view of y
