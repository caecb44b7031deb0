"""The device generator: seeding, reproducibility, state save/restore."""

import torch


def test_manual_seed_reproduces(neuron):
    torch.manual_seed(123)
    a = torch.rand(1000, device=neuron)
    torch.manual_seed(123)
    b = torch.rand(1000, device=neuron)
    assert torch.equal(a.cpu(), b.cpu())
    c = torch.rand(1000, device=neuron)
    assert not torch.equal(a.cpu(), c.cpu())


def test_distributions_have_expected_moments(neuron):
    torch.neuron.manual_seed(0)
    u = torch.rand(200_000, device=neuron).cpu()
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean().item() - 0.5) < 0.01
    n = torch.randn(200_000, device=neuron).cpu()
    assert abs(n.mean().item()) < 0.01 and abs(n.std().item() - 1.0) < 0.01
    r = torch.randint(3, 7, (10_000,), device=neuron).cpu()
    assert r.dtype == torch.int64 and r.min() == 3 and r.max() == 6
    b = torch.empty(100_000, device=neuron).bernoulli_(0.25).cpu()
    assert abs(b.mean().item() - 0.25) < 0.01


def test_rng_state_roundtrip(neuron):
    state = torch.neuron.get_rng_state()
    a = torch.randn(100, device=neuron)
    torch.neuron.set_rng_state(state)
    b = torch.randn(100, device=neuron)
    assert torch.equal(a.cpu(), b.cpu())
    assert len(torch.neuron.get_rng_state_all()) == torch.neuron.device_count()


def test_explicit_generator(neuron):
    g = torch.Generator(device=neuron)
    g.manual_seed(7)
    a = torch.rand(10, device=neuron, generator=g)
    g.manual_seed(7)
    b = torch.rand(10, device=neuron, generator=g)
    assert torch.equal(a.cpu(), b.cpu())
    torch.neuron.manual_seed(1234)
    assert torch.neuron.initial_seed() == 1234


def test_dropout_keeps_half_and_rescales(neuron):
    torch.manual_seed(1)
    x = torch.ones(10_000, device=neuron)
    y = torch.nn.functional.dropout(x, p=0.5, training=True).cpu()
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.5) < 0.03
    assert torch.all((y == 0) | (y == 2.0))


def test_a_cpu_generator_gives_the_cpus_numbers(neuron):
    """CUDA raises for a CPU generator; neuron runs the call through the CPU fallback so a
    seeded CPU generator draws exactly what it draws on the CPU (README, "CPU fallback")."""
    import openneuron

    openneuron.reset_fallback_stats()
    want = torch.empty(7).normal_(generator=torch.Generator().manual_seed(3))
    got = torch.empty(7, device=neuron).normal_(generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(got.cpu(), want, atol=0, rtol=0)
    want = torch.randint(0, 10, (5,), generator=torch.Generator().manual_seed(4))
    got = torch.randint(0, 10, (5,), generator=torch.Generator().manual_seed(4), device=neuron)
    assert torch.equal(got.cpu(), want)
    assert openneuron.fallback_stats()["aten::normal_"] == 1
