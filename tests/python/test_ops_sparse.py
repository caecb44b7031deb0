"""Sparse COO tensors on neuron (ops_sparse.cpp): construction and structure natively,
every other sparse op through the CPU fallback (counted), results equal to the CPU's."""

import copy

import pytest
import torch

import openneuron

I = torch.tensor([[0, 1, 1, 0], [2, 0, 2, 2]])
V = torch.tensor([3.0, 4.0, 5.0, 1.0])


def _both(fn):
    """fn(device) on the CPU and on neuron; the neuron result is moved back for comparing."""
    want = fn("cpu")
    got = fn("neuron")
    return got, want


def _dense(t):
    return (t.to_dense() if t.layout == torch.sparse_coo else t).cpu()


def test_a_sparse_tensor_lives_on_neuron(neuron):
    s = torch.sparse_coo_tensor(I, V, (2, 3), device=neuron)
    assert s.device.type == "neuron" and s.layout == torch.sparse_coo
    assert s._indices().device.type == "neuron" and s._values().device.type == "neuron"
    assert s._nnz() == 4 and s.sparse_dim() == 2 and not s.is_coalesced()
    assert torch.equal(s.to_dense().cpu(), torch.sparse_coo_tensor(I, V, (2, 3)).to_dense())
    assert torch.equal(s.cpu().to_dense(), s.to_dense().cpu())
    back = torch.sparse_coo_tensor(I, V, (2, 3)).to(neuron)
    assert back.device.type == "neuron" and torch.equal(back.to_dense().cpu(), s.to_dense().cpu())


@pytest.mark.parametrize("op", [
    lambda s, d: s.coalesce(),
    lambda s, d: s + s,
    lambda s, d: s * 2,
    lambda s, d: s / 2,
    lambda s, d: d.clone().add_(s),
    lambda s, d: d + s,
    lambda s, d: torch.sparse.mm(s, d.t()),
    lambda s, d: torch.sparse.sum(s, dim=1),
    lambda s, d: s.t(),
])
def test_sparse_ops_match_the_cpu(neuron, op):
    openneuron.reset_fallback_stats()
    got, want = _both(lambda dev: op(torch.sparse_coo_tensor(I, V, (2, 3), device=dev),
                                     torch.arange(6.0, device=dev).view(2, 3)))
    assert got.device.type == "neuron" and got.layout == want.layout
    torch.testing.assert_close(_dense(got), _dense(want))


def test_in_place_sparse_ops_write_the_neuron_tensor(neuron):
    s = torch.sparse_coo_tensor(I, V, (2, 3), device=neuron)
    s.mul_(3)
    assert s.device.type == "neuron"
    assert torch.equal(s.to_dense().cpu(), torch.sparse_coo_tensor(I, V * 3, (2, 3)).to_dense())
    s.zero_()
    assert s._nnz() == 0


def test_embedding_with_sparse_gradients_trains_like_the_cpu(neuron):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(12, 4, sparse=True)
    ids = torch.tensor([[1, 2, 1], [7, 2, 0]])
    weights = {}
    for device in ("cpu", neuron):
        e = copy.deepcopy(emb).to(device)
        opt = torch.optim.SGD(e.parameters(), lr=0.5)
        for _ in range(3):
            opt.zero_grad()
            e(ids.to(device)).pow(2).sum().backward()
            assert e.weight.grad.layout == torch.sparse_coo
            opt.step()
        weights[str(device)] = e.weight.detach().cpu()
    torch.testing.assert_close(weights["neuron"], weights["cpu"])


def test_embedding_bag_and_gather_sparse_gradients(neuron):
    torch.manual_seed(1)
    bag = torch.nn.EmbeddingBag(9, 3, mode="sum", sparse=True)
    x = torch.randn(4, 5)
    idx = torch.tensor([[0, 1], [4, 4], [2, 0], [1, 3]])
    grads = {}
    for device in ("cpu", neuron):
        b = copy.deepcopy(bag).to(device)
        b(torch.tensor([1, 2, 8, 2], device=device), torch.tensor([0, 2], device=device)).sum().backward()
        xd = x.to(device).detach().requires_grad_()
        torch.gather(xd, 1, idx.to(device), sparse_grad=True).sum().backward()
        grads[str(device)] = (b.weight.grad.to_dense().cpu(), xd.grad.to_dense().cpu())
    for got, want in zip(grads["neuron"], grads["cpu"]):
        torch.testing.assert_close(got, want)


def test_sparse_ops_are_counted_as_cpu_fallbacks(neuron):
    openneuron.reset_fallback_stats()
    s = torch.sparse_coo_tensor(I, V, (2, 3), device=neuron)
    s.coalesce()
    assert openneuron.fallback_stats().get("aten::_coalesce") == 1
