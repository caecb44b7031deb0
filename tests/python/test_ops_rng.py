"""Random ops on the neuron generator: dropout, bernoulli, normal variants, exponential,
geometric, log-normal, randperm, multinomial. Distributions are checked statistically;
reproducibility through torch.neuron.manual_seed."""

import math

import pytest
import torch
import torch.nn.functional as F

import openneuron


pytestmark = pytest.mark.usefixtures("no_fallback")


def seeded(fn, seed=123):
    torch.neuron.manual_seed(seed)
    return fn()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_forward_backward(neuron, dtype):
    x = torch.randn(200, 300, dtype=dtype).to(neuron).requires_grad_()
    p = 0.3
    y = seeded(lambda: F.dropout(x, p, training=True))
    kept = (y != 0).float().mean().item()
    assert abs(kept - (1 - p)) < 0.01
    xc = x.detach().cpu()
    yc = y.detach().cpu()
    mask = yc != 0
    torch.testing.assert_close(yc[mask], (xc / (1 - p)).to(dtype)[mask], rtol=1e-2 if dtype != torch.float32 else 1e-6, atol=0)
    y.backward(torch.ones_like(y))
    g = x.grad.cpu()
    torch.testing.assert_close(g[mask].float(), torch.full_like(g[mask].float(), 1 / (1 - p)), rtol=1e-2, atol=0)
    assert (g[~mask] == 0).all()
    # Same seed, same mask.
    y2 = seeded(lambda: F.dropout(x.detach(), p, training=True))
    assert torch.equal(y2.cpu(), y.detach().cpu())


def test_dropout_eval_and_edge_probabilities(neuron):
    x = torch.randn(100, device=neuron)
    assert torch.equal(F.dropout(x, 0.5, training=False).cpu(), x.cpu())
    assert (F.dropout(x, 1.0).cpu() == 0).all()
    assert torch.equal(F.dropout(x, 0.0).cpu(), x.cpu())
    out, mask = torch.ops.aten.native_dropout(x, 0.5, True)
    assert mask.dtype == torch.bool and mask.device.type == "neuron"
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout(x, 1.5)


def test_bernoulli_tensor_p(neuron):
    p = torch.linspace(0, 1, 11).repeat(2000, 1)
    out = seeded(lambda: torch.bernoulli(p.to(neuron)))
    assert out.device.type == "neuron"
    means = out.cpu().mean(0)
    torch.testing.assert_close(means, torch.linspace(0, 1, 11), rtol=0, atol=0.04)
    x = torch.empty(5000, 3, device=neuron, dtype=torch.int64)
    x.bernoulli_(torch.tensor([0.0, 0.5, 1.0], device=neuron))
    m = x.cpu().float().mean(0)
    assert m[0] == 0 and m[2] == 1 and abs(m[1] - 0.5) < 0.03
    x.bernoulli_(torch.tensor(0.25))  # CPU scalar p
    assert abs(x.cpu().float().mean().item() - 0.25) < 0.03


def test_normal_tensor_variants(neuron):
    mean = torch.arange(4.0).repeat(5000, 1).to(neuron)
    std = torch.tensor([0.5, 1.0, 2.0, 3.0], device=neuron)
    for out in (torch.normal(mean, 2.0), torch.normal(1.0, std.expand(5000, 4)),
                torch.normal(mean, std)):
        assert out.device.type == "neuron" and out.shape == (5000, 4)
    o = seeded(lambda: torch.normal(mean, std)).cpu()
    torch.testing.assert_close(o.mean(0), torch.arange(4.0), rtol=0, atol=0.15)
    torch.testing.assert_close(o.std(0), torch.tensor([0.5, 1.0, 2.0, 3.0]), rtol=0.05, atol=0)
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        torch.normal(mean[:1], -std)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_exponential_geometric_lognormal(neuron, dtype):
    n = 100000
    e = torch.empty(n, device=neuron, dtype=dtype).exponential_(2.0).float().cpu()
    assert (e >= 0).all() and abs(e.mean().item() - 0.5) < 0.02
    g = torch.empty(n, device=neuron, dtype=dtype).geometric_(0.25).float().cpu()
    assert (g >= 1).all() and abs(g.mean().item() - 4.0) < 0.1
    ln = torch.empty(n, device=neuron, dtype=dtype).log_normal_(0.0, 0.5).float().cpu()
    assert abs(ln.log().mean().item()) < 0.02 and abs(ln.log().std().item() - 0.5) < 0.02
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0"):
        torch.empty(3, device=neuron).exponential_(-1.0)
    gi = torch.empty(1000, device=neuron, dtype=torch.int64).geometric_(0.5)
    assert gi.dtype == torch.int64 and (gi.cpu() >= 1).all()


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_randperm(neuron, n):
    r = seeded(lambda: torch.randperm(n, device=neuron))
    assert r.device.type == "neuron" and r.dtype == torch.int64
    assert sorted(r.cpu().tolist()) == list(range(n))
    assert torch.equal(seeded(lambda: torch.randperm(n, device=neuron)).cpu(), r.cpu())
    g = torch.Generator(device=neuron)
    g.manual_seed(5)
    rf = torch.randperm(n, device=neuron, dtype=torch.float32, generator=g)
    assert sorted(rf.cpu().tolist()) == [float(i) for i in range(n)]


def test_randperm_is_shuffled(neuron):
    r = torch.randperm(1000, device=neuron).cpu()
    assert not torch.equal(r, torch.arange(1000))


def test_multinomial(neuron):
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 1.0, 1.0]], device=neuron)
    s = seeded(lambda: torch.multinomial(probs, 20000, replacement=True)).cpu()
    assert s.shape == (2, 20000) and s.dtype == torch.int64
    freq = torch.stack([torch.bincount(row, minlength=4).float() / 20000 for row in s])
    torch.testing.assert_close(freq, torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.25] * 4]), rtol=0, atol=0.02)
    w = torch.multinomial(probs, 3, replacement=False).cpu()
    for row in w:
        assert len(set(row.tolist())) == 3
    assert 1 not in w[0].tolist()
    one = torch.multinomial(torch.tensor([0.0, 0.0, 5.0], device=neuron), 1)
    assert one.cpu().tolist() == [2]


def test_multinomial_errors(neuron):
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        torch.multinomial(torch.ones(3, device=neuron), 4)
    with pytest.raises(RuntimeError, match="prob_dist must be 1 or 2 dim"):
        torch.multinomial(torch.ones(2, 2, 2, device=neuron), 1)
    with pytest.raises(RuntimeError, match="inf.*nan.*element < 0"):
        torch.multinomial(torch.tensor([1.0, -1.0], device=neuron), 1).cpu()


def test_generator_state_reproduces(neuron):
    torch.neuron.manual_seed(7)
    a = torch.empty(50, device=neuron).exponential_()
    state = torch.neuron.get_rng_state()
    b = torch.empty(50, device=neuron).exponential_()
    torch.neuron.set_rng_state(state)
    c = torch.empty(50, device=neuron).exponential_()
    assert torch.equal(b.cpu(), c.cpu()) and not torch.equal(a.cpu(), b.cpu())
