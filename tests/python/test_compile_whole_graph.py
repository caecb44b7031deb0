"""Whole-graph programs: a compiled graph's first call is recorded, later calls launch one
program; results equal the op-by-op run bit for bit, and what cannot be recorded keeps
running op by op with the reason in the metrics."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import openneuron
from test_compile import TinyLM, _uses_cpu_only_op


@pytest.fixture(autouse=True)
def fresh_dynamo(monkeypatch):
    monkeypatch.setenv("OPENNEURON_FALLBACK", "error")
    monkeypatch.delenv("OPENNEURON_WHOLE_GRAPH", raising=False)
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    yield
    torch._dynamo.reset()


def launches_of(fn):
    torch.neuron.synchronize()
    before = openneuron.runtime_counters()["launches"]
    out = fn()
    torch.neuron.synchronize()
    return out, openneuron.runtime_counters()["launches"] - before


def test_forward_is_one_launch_and_equals_eager(neuron):
    torch.manual_seed(1)
    model = TinyLM().eval().to(neuron)
    ids = torch.randint(0, 50, (2, 9), device=neuron)
    compiled = torch.compile(model, backend="neuron")
    with torch.no_grad():
        eager, eager_launches = launches_of(lambda: model(ids))
        first = compiled(ids)  # recorded while it runs op by op
        replayed, launches = launches_of(lambda: compiled(ids))
    assert launches == 1 and eager_launches > 20
    assert torch.equal(first.cpu(), eager.cpu()) and torch.equal(replayed.cpu(), eager.cpu())
    m = torch.neuron.get_dynamo_metrics()
    assert m["whole_graph_programs"] == 1 and m["whole_graph_calls"] == 1 and m["op_by_op_calls"] == 1
    assert m["recorded_launches"] >= eager_launches - 5 and m["capture_failures"] == {}


def _train(model, ids, steps, monkeypatch, whole):
    monkeypatch.setenv("OPENNEURON_WHOLE_GRAPH", "1" if whole else "0")
    torch._dynamo.reset()
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = torch.compile(model, backend="neuron")
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = step(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses).cpu(), [p.detach().cpu() for p in model.parameters()]


def test_training_replays_forward_and_backward_bit_for_bit(neuron, monkeypatch):
    torch.manual_seed(0)
    model, ids = TinyLM().to(neuron), torch.randint(0, 50, (4, 17), device=neuron)
    op_by_op, params_ref = _train(model, ids, 4, monkeypatch, whole=False)
    torch.neuron.reset_dynamo_metrics()
    whole, params = _train(model, ids, 4, monkeypatch, whole=True)
    assert torch.equal(whole, op_by_op) and whole[-1] < whole[0]
    assert all(torch.equal(a, b) for a, b in zip(params, params_ref))
    m = torch.neuron.get_dynamo_metrics()
    assert m["whole_graph_programs"] == 2, m  # the forward and the backward graph
    # The forward's second call also runs op by op: it checks that the forward's host
    # outputs (sdpa's philox seed and offset, saved for the backward) are constants.
    assert m["whole_graph_calls"] == 5 and m["op_by_op_calls"] == 3


def _gated_mlp(x, w, gate_bias):
    h = x @ w
    return torch.tanh(F.silu(h + gate_bias) * h - 0.5) * 2.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_elementwise_chains_are_fused_and_bit_equal(neuron, dtype):
    torch.manual_seed(2)
    x, w, b = (torch.randn(*s, dtype=dtype, device=neuron) for s in ((33, 16), (16, 24), (24,)))
    compiled = torch.compile(_gated_mlp, backend="neuron")
    eager = _gated_mlp(x, w, b)  # every op its own launch: unfused
    compiled(x, w, b)
    got = compiled(x, w, b)
    assert torch.equal(got.cpu(), eager.cpu())
    m = torch.neuron.get_dynamo_metrics()
    # mm, then add, silu, mul, sub, tanh and mul as one fused pass
    assert m["whole_graph_calls"] == 1 and m["fused_groups"] == 1, m
    assert m["recorded_launches"] == 7, m
    # The mm's own instructions depend on the host: without native half-type GEMMs
    # (AVX-512 BF16) its operands are converted to float32 and back around it.
    torch.neuron.reset_dynamo_metrics()
    mm = torch.compile(lambda x, w: x @ w, backend="neuron")
    mm(x, w)
    mm(x, w)
    mm_instructions = torch.neuron.get_dynamo_metrics()["program_instructions"]
    assert m["program_instructions"] == mm_instructions + 1, (m, mm_instructions)


def test_in_place_updates_of_inputs_reach_the_caller_and_replay(neuron):
    def update(buf, x):
        buf.add_(x)
        buf.mul_(0.5)
        return buf.sum()

    f = torch.compile(update, backend="neuron")
    b_cpu = torch.randn(6)
    b_dev = b_cpu.to(neuron)
    versions = []
    for i in range(3):
        x = torch.full((6,), float(i))
        got = f(b_dev, x.to(neuron))
        versions.append(b_dev._version)
        want = update(b_cpu, x)
        torch.testing.assert_close(got.cpu(), want)
        torch.testing.assert_close(b_dev.cpu(), b_cpu)
    assert torch.neuron.get_dynamo_metrics()["whole_graph_calls"] == 2
    # A replay counts as an in-place update, as the op-by-op run's copy_ does.
    assert versions[0] > 0 and versions[2] > versions[1] > versions[0]


def test_outputs_that_alias_inputs_and_each_other(neuron):
    def f(x):
        y = x * 2
        return x.view(-1), y, y[1:], x + 1

    cf = torch.compile(f, backend="neuron")
    for i in range(3):
        x = torch.arange(6.0, device=neuron).reshape(2, 3) + i
        outs = cf(x)
        for got, want in zip(outs, f(x)):
            assert torch.equal(got.cpu(), want.cpu())
        assert outs[0].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        assert outs[2].untyped_storage().data_ptr() == outs[1].untyped_storage().data_ptr()
        assert outs[2].storage_offset() == 3
    assert torch.neuron.get_dynamo_metrics()["whole_graph_calls"] == 2


def test_an_input_layout_not_recorded_runs_op_by_op(neuron):
    cf = torch.compile(lambda x: (x * 3).sin(), backend="neuron")
    base = torch.randn(9, device=neuron)
    cf(base[:8])
    shifted = base[1:]  # same sizes and strides, another storage offset
    torch.testing.assert_close(cf(shifted).cpu(), (shifted * 3).sin().cpu())
    m = torch.neuron.get_dynamo_metrics()
    assert m["whole_graph_programs"] + m["op_by_op_graphs"] >= 1
    assert m["op_by_op_calls"] >= 2 or m["whole_graph_programs"] == 2


def _dropout_calls(neuron, monkeypatch, whole):
    monkeypatch.setenv("OPENNEURON_WHOLE_GRAPH", "1" if whole else "0")
    torch._dynamo.reset()
    torch.manual_seed(3)
    drop = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5)).to(neuron).train()
    cf = torch.compile(drop, backend="neuron")
    x = torch.ones(4, 8, device=neuron)
    torch.neuron.manual_seed(7)
    return [cf(x).detach().cpu() for _ in range(3)]


def test_random_ops_draw_new_numbers_at_every_replay(neuron, monkeypatch):
    op_by_op = _dropout_calls(neuron, monkeypatch, whole=False)
    torch.neuron.reset_dynamo_metrics()
    whole = _dropout_calls(neuron, monkeypatch, whole=True)
    assert not torch.equal(whole[1], whole[2])  # fresh numbers on every call
    # The replay reserves from the generator as the op-by-op run does: the same numbers.
    assert all(torch.equal(a, b) for a, b in zip(whole, op_by_op))
    m = torch.neuron.get_dynamo_metrics()
    assert m["whole_graph_programs"] == 1 and m["whole_graph_calls"] == 2, m


def test_what_cannot_be_recorded_runs_op_by_op_and_says_why(neuron):
    f = torch.compile(_uses_cpu_only_op, backend="neuron")  # a host library kernel inside
    for i in range(3):
        x = torch.randn(4) + i
        torch.testing.assert_close(f(x.to(neuron)).cpu(), _uses_cpu_only_op(x))
    m = torch.neuron.get_dynamo_metrics()
    assert m["whole_graph_programs"] == 0 and m["op_by_op_calls"] == 3
    assert any("host library" in r for r in m["capture_failures"]), m["capture_failures"]


def test_off_switch(neuron, monkeypatch):
    monkeypatch.setenv("OPENNEURON_WHOLE_GRAPH", "0")
    cf = torch.compile(lambda x: x.exp() + x, backend="neuron")
    x = torch.randn(5, device=neuron)
    cf(x)
    out, launches = launches_of(lambda: cf(x))
    assert launches == 2 and torch.equal(out.cpu(), (x.exp() + x).cpu())
    assert torch.neuron.get_dynamo_metrics()["whole_graph_programs"] == 0


def test_dynamic_sizes_are_recorded_once_each(neuron):
    cf = torch.compile(lambda x: (x * 2).cumsum(0) + x.shape[0], backend="neuron", dynamic=True)
    for n in (4, 5, 4, 5, 6, 4):
        x = torch.arange(float(n), device=neuron)
        assert torch.equal(cf(x).cpu(), ((x * 2).cumsum(0) + n).cpu())
    m = torch.neuron.get_dynamo_metrics()
    assert m["inference_graphs"] == 1  # one graph for every size
    assert m["whole_graph_programs"] == 3 and m["whole_graph_calls"] == 3, m


def test_sizes_never_run_get_programs_from_the_symbolic_recording(neuron):
    def f(x, y):
        return torch.cat([x * 2, y], 0).cumsum(0) + x.shape[0]

    cf = torch.compile(f, backend="neuron", dynamic=True)
    y = torch.ones(3, device=neuron)
    for n in (4, 5, 6, 9, 17, 4, 64):  # recorded at 4, 5 and 6 (the fit's check)
        x = torch.arange(float(n), device=neuron)
        assert torch.equal(cf(x, y).cpu(), f(x, y).cpu()), n
    m = torch.neuron.get_dynamo_metrics()
    assert m["inference_graphs"] == 1 and m["whole_graph_programs"] == 3, m
    assert m["symbolic_instances"] == 3 and m["whole_graph_calls"] == 4, m


def test_sizes_derived_by_floor_division_are_recorded_per_value(neuron):
    def f(x):
        return x[: x.shape[0] // 4] * 2

    cf = torch.compile(f, backend="neuron", dynamic=True)
    # 5, 6 and 7 give one element each (a fit through them would be flat); 8 gives two
    for n in (5, 6, 7, 8, 6):
        x = torch.arange(float(n), device=neuron)
        assert torch.equal(cf(x).cpu(), f(x).cpu()), n
    m = torch.neuron.get_dynamo_metrics()
    assert m["whole_graph_programs"] == 4 and m["symbolic_instances"] == 0, m
    (reason,) = m["capture_failures"]
    assert "floor division" in reason and "each size is recorded" in reason, reason


def test_half_nan_payloads_survive_a_fused_copy(neuron):
    def f(a):
        y = a.t().contiguous()
        return y, y * 2

    a = torch.full((3, 4), 1.5, dtype=torch.bfloat16)
    a.view(torch.int16)[1, 2] = -64  # 0xFFC0: a NaN with the sign bit set
    a = a.to(neuron)
    cf = torch.compile(f, backend="neuron")
    cf(a)
    got, want = cf(a), f(a)
    for g, w in zip(got, want):
        assert torch.equal(g.cpu().view(torch.int16), w.cpu().view(torch.int16))


def test_debug_dir_gets_a_listing_of_each_recording(neuron, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path / "dumps"))
    cf = torch.compile(lambda x: (x + 1).relu(), backend="neuron")
    cf(torch.randn(3, device=neuron))
    (dump,) = (tmp_path / "dumps").iterdir()
    text = dump.read_text()
    assert "inference" in dump.name and "# inference graph (FX)" in text
    assert "Relu(" in text and "view of %" in text and "instructions" in text
    # The IR as recorded, then after the passes: add and relu fused into one node.
    recorded, rest = text.split("# after the compiler's passes (fusion on)")
    optimized, program = rest.split("# program")
    assert "Add(" in recorded and "FusedElementwise(" not in recorded
    assert "FusedElementwise(" in optimized and "Relu(" not in optimized
    assert "instructions" in program


def test_a_host_input_updated_in_place_keeps_the_graph_op_by_op(neuron):
    def f(x, n):
        n.add_(1)
        return x * 2

    cf = torch.compile(f, backend="neuron")
    n = torch.zeros(())  # 0-dim: not copied to the device (test_compile_cpu_autocopy.py)
    x = torch.ones(3, device=neuron)
    for _ in range(3):
        assert torch.equal(cf(x, n).cpu(), torch.full((3,), 2.0))
    assert n.item() == 3.0
    m = torch.neuron.get_dynamo_metrics()
    assert m["whole_graph_calls"] == 0
    assert m["capture_failures"] == {"inference: a host input updated in place": 1}, m
