"""Fused optimizers, _foreach_* list ops and gradient clipping on neuron, against the CPU."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import openneuron


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def train(model, device, opt_cls, steps=5, clip=None, **kw):
    model = copy.deepcopy(model).to(device)
    opt = opt_cls(model.parameters(), **kw)
    torch.manual_seed(1)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    x, y = x.to(device), y.to(device)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=True)
        opt.step()
    return [p.detach().cpu() for p in model.parameters()]


OPTIMIZERS = [
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    (torch.optim.AdamW, dict(lr=1e-2, amsgrad=True)),
    (torch.optim.Adam, dict(lr=1e-2, weight_decay=0.05)),
    (torch.optim.Adam, dict(lr=1e-2, maximize=True)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-3)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, dampening=0)),
    (torch.optim.SGD, dict(lr=0.1)),
]


@pytest.mark.parametrize("mode", ["fused", "foreach"])
@pytest.mark.parametrize("opt_cls,kw", OPTIMIZERS)
def test_optimizer_matches_cpu(neuron, no_fallback, mode, opt_cls, kw):
    model = make_model()
    ref = train(model, "cpu", opt_cls, foreach=False, **kw)
    openneuron.reset_fallback_stats()
    got = train(model, neuron, opt_cls, **{mode: True}, **kw)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_adamw_tensor_lr_and_grad_scale(neuron, no_fallback):
    torch.manual_seed(2)
    params = [torch.randn(5, 7), torch.randn(3)]
    grads = [torch.randn_like(p) for p in params]

    def run(device):
        ps = [p.clone().to(device) for p in params]
        gs = [g.clone().to(device) for g in grads]
        m = [torch.zeros_like(p) for p in ps]
        v = [torch.zeros_like(p) for p in ps]
        steps = [torch.tensor(3.0, device=device) for _ in ps]
        lr = torch.tensor(0.01, device=device)
        scale = torch.tensor(4.0, device=device)
        torch._fused_adamw_(ps, gs, m, v, [], steps, lr=lr, beta1=0.9, beta2=0.99,
                            weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False,
                            grad_scale=scale, found_inf=torch.tensor(0.0, device=device))
        return [t.cpu() for t in ps + gs + m + v]

    for a, b in zip(run(neuron), run("cpu")):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_found_inf_skips_the_step(neuron, no_fallback):
    p = torch.randn(10, device=neuron)
    before = p.cpu()
    g = torch.randn(10, device=neuron)
    torch._fused_adam_([p], [g], [torch.zeros_like(p)], [torch.zeros_like(p)], [],
                       [torch.tensor(1.0, device=neuron)], lr=0.1, beta1=0.9, beta2=0.999,
                       weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False,
                       found_inf=torch.tensor(1.0, device=neuron))
    torch.testing.assert_close(p.cpu(), before, rtol=0, atol=0)


def test_fused_adam_bf16(neuron, no_fallback):
    torch.manual_seed(3)
    p = torch.randn(1000).bfloat16()
    g = torch.randn(1000).bfloat16()

    def run(device):
        ps, gs = [p.clone().to(device)], [g.clone().to(device)]
        m, v = [torch.zeros_like(ps[0])], [torch.zeros_like(ps[0])]
        torch._fused_adam_(ps, gs, m, v, [], [torch.tensor(1.0, device=device)], lr=1e-2,
                           beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False,
                           maximize=False)
        return ps[0].float().cpu()

    torch.testing.assert_close(run(neuron), run("cpu"), rtol=1.6e-2, atol=1e-2)


def test_fused_adam_non_contiguous_param(neuron, no_fallback):
    base = torch.randn(6, 4)
    g = torch.randn(4, 6)

    def run(device):
        # Non-contiguous on neuron; the CPU reference runs on contiguous copies
        # (its kernel indexes memory linearly).
        p = base.clone().to(device).t() if device != "cpu" else base.t().contiguous()
        m, v = torch.zeros_like(p), torch.zeros_like(p)
        torch._fused_adam_([p], [g.clone().to(device)], [m], [v], [],
                           [torch.tensor(2.0, device=device)], lr=0.1, beta1=0.9, beta2=0.999,
                           weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
        return p.cpu(), m.cpu()

    for a, b in zip(run(neuron), run("cpu")):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


# clip_grad_norm_ = _foreach_norm + stack (cat) + linalg.vector_norm + _foreach_mul_.
# cat and vector_norm belong to the transformer-ops family; until they are native they
# are the only ops allowed to fall back here.
OTHER_FAMILY = {"aten::cat.out", "aten::linalg_vector_norm.out", "aten::linalg_vector_norm"}


def test_clip_grad_norm_native(neuron, monkeypatch):
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent")
    openneuron.reset_fallback_stats()
    torch.manual_seed(4)
    grads = [torch.randn(17, 5) * 3, torch.randn(40), torch.randn(2, 3, 4)]
    for norm_type in (2.0, 1.0, float("inf")):
        ps_cpu = [torch.zeros_like(g, requires_grad=True) for g in grads]
        ps_dev = [torch.zeros_like(g, device=neuron, requires_grad=True) for g in grads]
        for p, g in zip(ps_cpu, grads):
            p.grad = g.clone()
        for p, g in zip(ps_dev, grads):
            p.grad = g.clone().to(neuron)
        n_cpu = torch.nn.utils.clip_grad_norm_(ps_cpu, 1.0, norm_type=norm_type, foreach=True)
        n_dev = torch.nn.utils.clip_grad_norm_(ps_dev, 1.0, norm_type=norm_type, foreach=True)
        torch.testing.assert_close(n_dev.cpu(), n_cpu, rtol=1e-5, atol=1e-6)
        for a, b in zip(ps_dev, ps_cpu):
            torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-5, atol=1e-6)
    assert set(openneuron.fallback_stats()) <= OTHER_FAMILY, openneuron.fallback_stats()


def _lists(device, dtype=torch.float32, n=3):
    torch.manual_seed(5)
    shapes = [(4, 5), (7,), (2, 3, 2)][:n]
    return [[torch.randn(s, dtype=dtype).to(device) for s in shapes] for _ in range(3)]


FOREACH_CASES = [
    ("add_list", lambda a, b, c: torch._foreach_add(a, b, alpha=0.5)),
    ("sub_list", lambda a, b, c: torch._foreach_sub(a, b, alpha=2)),
    ("mul_list", lambda a, b, c: torch._foreach_mul(a, b)),
    ("div_list", lambda a, b, c: torch._foreach_div(a, b)),
    ("max_list", lambda a, b, c: torch._foreach_maximum(a, b)),
    ("min_list", lambda a, b, c: torch._foreach_minimum(a, b)),
    ("add_scalar", lambda a, b, c: torch._foreach_add(a, 1.5)),
    ("mul_scalarlist", lambda a, b, c: torch._foreach_mul(a, [0.5, 2.0, -1.0])),
    ("div_scalar", lambda a, b, c: torch._foreach_div(a, 3.0)),
    ("sqrt", lambda a, b, c: torch._foreach_sqrt([x.abs() for x in a])),
    ("neg", lambda a, b, c: torch._foreach_neg(a)),
    ("exp", lambda a, b, c: torch._foreach_exp(a)),
    ("addcmul", lambda a, b, c: torch._foreach_addcmul(a, b, c, value=0.3)),
    ("addcdiv_sl", lambda a, b, c: torch._foreach_addcdiv(a, b, [x.abs() + 1 for x in c], [0.1, 0.2, 0.3])),
    ("addcmul_t", lambda a, b, c: torch._foreach_addcmul(a, b, c, torch.tensor([1.0, 2.0, 3.0]))),
    ("lerp_s", lambda a, b, c: torch._foreach_lerp(a, b, 0.3)),
    ("lerp_l", lambda a, b, c: torch._foreach_lerp(a, b, [x.sigmoid() for x in c])),
    ("norm2", lambda a, b, c: torch._foreach_norm(a)),
    ("norm1", lambda a, b, c: torch._foreach_norm(a, 1)),
    ("norminf", lambda a, b, c: torch._foreach_norm(a, float("inf"))),
    ("norm3", lambda a, b, c: torch._foreach_norm(a, 3)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name,fn", FOREACH_CASES, ids=[c[0] for c in FOREACH_CASES])
def test_foreach_functional(neuron, no_fallback, name, fn, dtype):
    dev = fn(*_lists(neuron, dtype))
    cpu = fn(*_lists("cpu", dtype))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-2)
    for a, b in zip(dev, cpu):
        assert a.device.type == "neuron" and a.dtype == b.dtype
        torch.testing.assert_close(a.cpu(), b, **tol)


INPLACE_CASES = [
    ("add_", lambda a, b, c: torch._foreach_add_(a, b, alpha=-1)),
    ("add_scalar_", lambda a, b, c: torch._foreach_add_(a, 2)),
    ("mul_tensor_", lambda a, b, c: torch._foreach_mul_(a, torch.tensor(0.25, device=a[0].device))),
    ("mul_cpu_tensor_", lambda a, b, c: torch._foreach_mul_(a, torch.tensor(0.25))),
    ("div_sl_", lambda a, b, c: torch._foreach_div_(a, [2.0, 3.0, 4.0])),
    ("sub_", lambda a, b, c: torch._foreach_sub_(a, b)),
    ("maximum_", lambda a, b, c: torch._foreach_maximum_(a, 0.1)),
    ("lerp_", lambda a, b, c: torch._foreach_lerp_(a, b, 0.1)),
    ("addcmul_", lambda a, b, c: torch._foreach_addcmul_(a, b, c, value=-0.5)),
    ("addcdiv_", lambda a, b, c: torch._foreach_addcdiv_(a, b, [x.abs() + 1 for x in c], value=2)),
    ("zero_", lambda a, b, c: torch._foreach_zero_(a)),
    ("copy_", lambda a, b, c: torch._foreach_copy_(a, b)),
    ("neg_", lambda a, b, c: torch._foreach_neg_(a)),
    ("sqrt_", lambda a, b, c: torch._foreach_sqrt_([x.abs_() for x in a])),
]


@pytest.mark.parametrize("name,fn", INPLACE_CASES, ids=[c[0] for c in INPLACE_CASES])
def test_foreach_inplace(neuron, no_fallback, name, fn):
    a_dev, b_dev, c_dev = _lists(neuron)
    a_cpu, b_cpu, c_cpu = _lists("cpu")
    fn(a_dev, b_dev, c_dev)
    fn(a_cpu, b_cpu, c_cpu)
    for x, y in zip(a_dev, a_cpu):
        torch.testing.assert_close(x.cpu(), y, rtol=1e-5, atol=1e-6)


def test_foreach_one_program_per_call(neuron, no_fallback):
    a, b, _ = _lists(neuron)
    torch._foreach_add_(a, b)  # compile once
    torch.neuron.synchronize()
    before = openneuron.runtime_counters()["launches"]
    torch._foreach_add_(a, b)
    torch.neuron.synchronize()
    assert openneuron.runtime_counters()["launches"] - before == 1


def test_foreach_slow_path_mixed_dtypes_and_ints(neuron, no_fallback):
    a = [torch.arange(6, device=neuron), torch.arange(3, device=neuron)]
    torch._foreach_add_(a, 2)
    assert [x.cpu().tolist() for x in a] == [[2, 3, 4, 5, 6, 7], [2, 3, 4]]
    mixed = [torch.ones(3, device=neuron), torch.ones(2, device=neuron, dtype=torch.bfloat16)]
    out = torch._foreach_mul(mixed, 3.0)
    assert out[1].dtype == torch.bfloat16 and out[1].cpu().tolist() == [3.0, 3.0]


def test_foreach_errors_match_pytorch(neuron):
    a = [torch.ones(3, device=neuron)]
    with pytest.raises(RuntimeError):
        torch._foreach_add_(a, [torch.ones(3, device=neuron), torch.ones(3, device=neuron)])
    with pytest.raises(RuntimeError, match="same device|Expected all tensors"):
        torch._foreach_add(a, [torch.ones(3)])
