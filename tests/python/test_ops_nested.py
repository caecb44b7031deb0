"""Nested tensors on neuron (ops_nested.cpp): the buffer on the device, copies, views and
metadata natively, every other nested op through the CPU fallback; values equal to the CPU's."""

import warnings

import pytest
import torch

import openneuron

pytestmark = pytest.mark.filterwarnings("ignore:.*nested tensors is in prototype stage")

PARTS = [torch.randn(3, 16, generator=torch.Generator().manual_seed(1)),
         torch.randn(5, 16, generator=torch.Generator().manual_seed(2))]


def test_a_nested_tensor_lives_on_neuron_and_moves_back(neuron):
    nt = torch.nested.nested_tensor(PARTS, device=neuron)
    assert nt.is_nested and nt.device.type == "neuron"
    assert nt.values().device.type == "neuron"
    for got, want in zip(nt.unbind(), PARTS):
        assert got.device.type == "neuron" and torch.equal(got.cpu(), want)
    back = nt.cpu()
    assert back.device.type == "cpu" and all(torch.equal(a, b) for a, b in zip(back.unbind(), PARTS))
    again = back.to(neuron)
    assert again.device.type == "neuron" and torch.equal(again.values().cpu(), nt.values().cpu())
    c = nt.clone()
    c.zero_()
    assert torch.count_nonzero(c.values()).item() == 0 and torch.equal(nt.unbind()[0].cpu(), PARTS[0])


def _layers(neuron):
    torch.manual_seed(0)
    cpu = torch.nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32,
                                           batch_first=True).eval()
    dev = torch.nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32,
                                           batch_first=True).eval()
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev.to(neuron)


def test_transformer_encoder_fast_path_with_nested_input_equals_the_cpu(neuron):
    cpu, dev = _layers(neuron)
    openneuron.reset_fallback_stats()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = cpu(torch.nested.nested_tensor(PARTS))
        got = dev(torch.nested.nested_tensor(PARTS, device=neuron))
        assert got.is_nested and got.device.type == "neuron"
        for g, w in zip(got.unbind(), want.unbind()):
            torch.testing.assert_close(g.cpu(), w)
        empty = dev(torch.nested.nested_tensor([torch.rand(0, 16)], device=neuron))
        assert empty.is_nested and empty.unbind()[0].shape == (0, 16)
    assert openneuron.fallback_stats().get("aten::_transformer_encoder_layer_fwd", 0) >= 1
