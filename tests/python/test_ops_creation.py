"""Creation, copies and views on neuron against the CPU: factories (zeros, full, arange),
host <-> device and device copies (transposed, strided, broadcast, conjugate), views, dtype
conversion, item()."""

import pytest
import torch

import openneuron

pytestmark = pytest.mark.usefixtures("no_fallback")

X = torch.randn(17, 33)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.int64, torch.bool])
@pytest.mark.parametrize("make", [
    lambda a: a.t(),  # 2-D transpose
    lambda a: a[:130].t(),  # sliced source, sides not a multiple of the tile
    lambda a: a.view(5, 52, 200).transpose(1, 2),  # batched
    lambda a: a.view(5, 52, 10, 20).permute(0, 2, 1, 3),  # heads permute, inner run kept
    lambda a: a.t()[3:150:2],  # strided rows
    lambda a: a[:, :1].expand(260, 140).t(),  # broadcast source
])
def test_transposed_copies_are_exact(neuron, dtype, make):
    # Sides above every dtype's tile (32-128 elements) exercise the tiled transposed copy.
    a = (torch.randn(260, 200) * 50).to(dtype)
    cpu = make(a).contiguous()
    dev = make(a.to("neuron")).contiguous()
    assert dev.is_contiguous()
    assert torch.equal(dev.cpu(), cpu)


def test_copies_views_and_dtype_conversion(neuron):
    d = X.to(neuron)
    assert torch.equal(d.cpu(), X)
    assert torch.equal(d.t().contiguous().cpu(), X.t().contiguous())
    assert torch.equal(d[2:5, 1:10:3].cpu(), X[2:5, 1:10:3])
    assert torch.equal(d.view(33, 17).cpu(), X.view(33, 17))
    assert torch.equal(d.unsqueeze(0).expand(2, 17, 33).cpu(), X.unsqueeze(0).expand(2, 17, 33))
    assert torch.equal(d.to(torch.bfloat16).cpu(), X.to(torch.bfloat16))
    assert torch.equal(d.to(torch.int32).cpu(), X.to(torch.int32))
    assert torch.equal(d.to("neuron:1").cpu(), X)
    e = torch.zeros(17, 33, device=neuron)
    e[:, 3] = 7.0
    expected = torch.zeros(17, 33)
    expected[:, 3] = 7.0
    assert torch.equal(e.cpu(), expected)
    d.t().copy_(torch.ones(33, 17))
    assert torch.equal(d.cpu(), torch.ones(17, 33))


def test_creation_ops(neuron):
    assert torch.equal(torch.zeros(3, 4, device=neuron).cpu(), torch.zeros(3, 4))
    assert torch.equal(torch.full((2, 2), 3.5, device=neuron).cpu(), torch.full((2, 2), 3.5))
    assert torch.equal(torch.arange(2, 11, 3, device=neuron).cpu(), torch.arange(2, 11, 3))
    assert torch.equal(torch.arange(0, 1, 0.25, device=neuron).cpu(), torch.arange(0, 1, 0.25))
    assert torch.ones(5, dtype=torch.int64, device=neuron).sum().item() == 5


def test_item_and_scalars(neuron):
    assert torch.tensor(3.25, device=neuron).item() == 3.25
    assert torch.tensor(True, device=neuron).item() is True
    assert torch.tensor([7], dtype=torch.int32, device=neuron).item() == 7


def test_conjugate_views_copy_correctly(neuron):
    x = torch.randn(5, dtype=torch.complex64)
    d = x.to(neuron)
    torch.testing.assert_close(d.conj().cpu(), x.conj())
    torch.testing.assert_close(d.conj().resolve_conj().cpu(), x.conj().resolve_conj())
    y = torch.empty(5, dtype=torch.complex64, device=neuron)
    y.copy_(d.conj())
    torch.testing.assert_close(y.cpu(), x.conj())
