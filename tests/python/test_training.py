"""Training on neuron: autograd, optimizers, autocast, against the CPU."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import openneuron


def train(model, device, x, y, steps, opt_cls, **opt_kw):
    model = copy.deepcopy(model).to(device)
    opt = opt_cls(model.parameters(), **opt_kw)
    x, y = x.to(device), y.to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


@pytest.fixture
def mlp_and_data():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 5))
    return model, torch.randn(64, 32), torch.randint(0, 5, (64,))


def test_mlp_sgd_matches_cpu_with_no_fallback(neuron, mlp_and_data, monkeypatch):
    monkeypatch.setenv("OPENNEURON_FALLBACK", "error")
    model, x, y = mlp_and_data
    _, cpu = train(model, "cpu", x, y, 20, torch.optim.SGD, lr=0.1, momentum=0.9)
    trained, dev = train(model, neuron, x, y, 20, torch.optim.SGD, lr=0.1, momentum=0.9)
    assert max(abs(a - b) for a, b in zip(cpu, dev)) < 1e-5
    assert dev[-1] < dev[0]
    assert all(p.device.type == "neuron" for p in trained.parameters())


def test_mlp_adamw_matches_cpu(neuron, mlp_and_data, monkeypatch):
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent")
    model, x, y = mlp_and_data
    _, cpu = train(model, "cpu", x, y, 10, torch.optim.AdamW, lr=1e-2)
    _, dev = train(model, neuron, x, y, 10, torch.optim.AdamW, lr=1e-2)
    assert max(abs(a - b) for a, b in zip(cpu, dev)) < 1e-4


def test_gradients_match_cpu(neuron):
    torch.manual_seed(1)
    w = torch.randn(8, 4, requires_grad=True)
    x = torch.randn(16, 8)
    wd = w.detach().to(neuron).requires_grad_()
    (torch.tanh(x @ w).sigmoid().sum()).backward()
    (torch.tanh(x.to(neuron) @ wd).sigmoid().sum()).backward()
    torch.testing.assert_close(wd.grad.cpu(), w.grad, rtol=1e-5, atol=1e-6)


def test_autocast_bf16(neuron):
    a = torch.randn(8, 8, device=neuron)
    with torch.autocast(device_type="neuron"):
        c = a @ a
        s = torch.softmax(c, dim=-1)  # fp32 op list
    assert c.dtype == torch.bfloat16
    assert s.dtype == torch.float32
    with torch.autocast(device_type="neuron", dtype=torch.float16):
        assert (a @ a).dtype == torch.float16
