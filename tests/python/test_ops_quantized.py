"""Quantized tensors on neuron (ops_quantized.cpp): allocation, views and copies natively,
every other quantized op through the CPU fallback (counted); values equal to the CPU's."""

import warnings

import pytest
import torch

import openneuron

QDTYPES = [torch.quint8, torch.qint8, torch.qint32]
X = torch.linspace(-3.0, 5.0, 24).reshape(2, 3, 4)

pytestmark = pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*deprecated")


def _same_q(got, want):
    assert got.device.type == "neuron" and got.is_quantized and got.dtype == want.dtype
    assert got.q_scale() == want.q_scale() and got.q_zero_point() == want.q_zero_point()
    assert torch.equal(got.int_repr().cpu(), want.int_repr())


@pytest.mark.parametrize("qdtype", QDTYPES)
def test_quantize_per_tensor_on_neuron_equals_the_cpu(neuron, qdtype):
    q = torch.quantize_per_tensor(X.to(neuron), 0.1, 5, qdtype)
    want = torch.quantize_per_tensor(X, 0.1, 5, qdtype)
    _same_q(q, want)
    assert torch.equal(q.dequantize().cpu(), want.dequantize())
    assert torch.equal(q.cpu().int_repr(), want.int_repr())  # device -> host keeps the quantizer
    _same_q(want.to(neuron), want)  # and host -> device


@pytest.mark.parametrize("qdtype", QDTYPES)
def test_views_of_a_quantized_tensor_share_its_memory(neuron, qdtype):
    q = torch.quantize_per_tensor(X.to(neuron), 0.25, 2, qdtype)
    want = torch.quantize_per_tensor(X, 0.25, 2, qdtype)
    for view in (lambda t: t.view(6, 4), lambda t: t.flatten(), lambda t: t.transpose(0, 2),
                 lambda t: t[1], lambda t: t.unsqueeze(0).squeeze(0), lambda t: t.unfold(2, 2, 2)):
        v = view(q)
        assert v.untyped_storage().data_ptr() == q.untyped_storage().data_ptr()
        _same_q(v, view(want))
        _same_q(v.contiguous(), view(want).contiguous())


def test_quantized_ops_without_a_kernel_run_on_the_cpu_and_are_counted(neuron):
    q = torch.quantize_per_tensor(X.to(neuron), 0.1, 5, torch.quint8)
    want = torch.quantize_per_tensor(X, 0.1, 5, torch.quint8)
    openneuron.reset_fallback_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same_q(q.flip(0, 2), want.flip(0, 2))
        _same_q(torch.relu(q), torch.relu(want))
    assert openneuron.fallback_stats().get("aten::flip") == 1


def test_empty_affine_quantized_and_copies_between_quantized_tensors(neuron):
    e = torch._empty_affine_quantized([5, 5], scale=2, zero_point=3, dtype=torch.quint8, device=neuron)
    assert e.device.type == "neuron" and e.q_scale() == 2 and e.q_zero_point() == 3
    assert e.ravel().data_ptr() == e.data_ptr() and e.ravel().shape == (25,)
    src = torch.quantize_per_tensor(torch.rand(5, 5) * 10, 0.5, 1, torch.quint8)
    e.copy_(src)  # host -> device: the integers and the source's quantizer, as on the CPU
    _same_q(e, src)
    d = torch._empty_affine_quantized([5, 5], scale=1, zero_point=0, dtype=torch.quint8, device=neuron)
    d.copy_(e)
    _same_q(d, src)
    f = torch._empty_affine_quantized([5, 5], scale=0.5, zero_point=1, dtype=torch.quint8, device=neuron)
    f.copy_(torch.full((5, 5), 2.0, device=neuron))  # a float source is quantized with f's quantizer
    assert torch.equal(f.int_repr().cpu(), torch.full((5, 5), 5, dtype=torch.uint8))


def test_bad_quantized_copies_raise_as_on_the_cpu(neuron):
    q = torch.quantize_per_tensor(X.to(neuron), 0.1, 5, torch.qint8)
    with pytest.raises(RuntimeError, match="Copying from quantized Tensor to non-quantized"):
        torch.empty(2, 3, 4, device=neuron).copy_(q)
    with pytest.raises(RuntimeError, match="not allowed"):
        torch._empty_affine_quantized([2, 3, 4], scale=1, zero_point=0, dtype=torch.quint8,
                                      device=neuron).copy_(q)
    _same_q(q, torch.quantize_per_tensor(X, 0.1, 5, torch.qint8))  # nothing lost
