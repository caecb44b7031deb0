"""torch.compile(backend="neuron"): Dynamo + AOTAutograd graphs run through the neuron
lowerings; results against the CPU, the lowering check, options and metrics."""

import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import openneuron
from openneuron.dynamo import NeuronCompileError


@pytest.fixture(autouse=True)
def fresh_dynamo(monkeypatch):
    monkeypatch.setenv("OPENNEURON_FALLBACK", "error")  # a compiled graph never falls back here
    monkeypatch.delenv("OPENNEURON_COMPILE_FALLBACK", raising=False)
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", raising=False)
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    yield
    torch._dynamo.reset()


class Block(nn.Module):
    """A pre-norm transformer block: layer_norm, attention (sdpa, causal), GELU MLP."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab=50, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(Block(d), Block(d))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.blocks(self.emb(ids)))


def _train(model, device, ids, steps, compile_it):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    step_model = torch.compile(model, backend="neuron") if compile_it else model
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = step_model(ids.to(device)[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.to(device)[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_training_a_transformer_compiled_matches_cpu_eager(neuron):
    torch.manual_seed(0)
    model, ids = TinyLM(), torch.randint(0, 50, (4, 17))
    cpu = _train(model, "cpu", ids, 4, compile_it=False)
    compiled = _train(model, neuron, ids, 4, compile_it=True)
    assert max(abs(a - b) for a, b in zip(cpu, compiled)) < 1e-4
    assert compiled[-1] < compiled[0]
    m = torch.neuron.get_dynamo_metrics()
    assert m["dynamo_graphs"] == 1 and m["forward_graphs"] == 1 and m["backward_graphs"] == 1
    assert m["graph_ops"] > 20 and m["fallback_graphs"] == 0
    assert openneuron.fallback_stats() == {} or all(v == 0 for v in openneuron.fallback_stats().values())


def test_compiled_equals_eager_on_neuron_and_cpu_forward(neuron):
    torch.manual_seed(1)
    model = TinyLM().eval()
    ids = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        ref = model(ids)
        dev_model = copy.deepcopy(model).to(neuron)
        eager = dev_model(ids.to(neuron)).cpu()
        compiled = torch.compile(dev_model, backend="neuron", fullgraph=True)(ids.to(neuron)).cpu()
    torch.testing.assert_close(compiled, ref, atol=1e-5, rtol=1e-5)
    # One lowering per op: the compiled graph runs the very kernels eager mode runs.
    assert torch.equal(compiled, eager)
    assert torch.neuron.get_dynamo_metrics()["inference_graphs"] == 1


def test_new_shape_recompiles_same_shape_does_not(neuron):
    f = torch.compile(lambda x: torch.softmax(x * 2, dim=-1).sum(0), backend="neuron", dynamic=False)
    for n in (8, 8, 16, 16, 8):
        x = torch.randn(n, 5)
        torch.testing.assert_close(f(x.to(neuron)).cpu(), torch.softmax(x * 2, dim=-1).sum(0))
    assert torch.neuron.get_dynamo_metrics()["dynamo_graphs"] == 2


def test_dynamic_true_one_graph_for_many_sizes(neuron):
    f = torch.compile(lambda x, w: F.silu(x @ w), backend="neuron", dynamic=True)
    w = torch.randn(6, 3)
    for n in (4, 7, 11):
        x = torch.randn(n, 6)
        torch.testing.assert_close(f(x.to(neuron), w.to(neuron)).cpu(), F.silu(x @ w))
    assert torch.neuron.get_dynamo_metrics()["dynamo_graphs"] == 1


# An op with only a CPU kernel. On neuron it has no lowering: by default the host library
# runs that CPU kernel in place on device memory; with OPENNEURON_HOST_LIBRARY=0 it can only
# run through the CPU fallback, which a compiled graph refuses unless fallback execution
# is on.
@torch.library.custom_op("openneuron_test::cpu_only_cube", mutates_args=(), device_types="cpu")
def cpu_only_cube(x: torch.Tensor) -> torch.Tensor:
    return x * x * x


@cpu_only_cube.register_fake
def _(x):
    return torch.empty_like(x)


def _uses_cpu_only_op(x):
    return cpu_only_cube(x + 1) * 2


def test_cpu_only_op_runs_through_the_host_library_compiled(neuron):
    openneuron.reset_library_stats()
    f = torch.compile(_uses_cpu_only_op, backend="neuron")
    x = torch.randn(4)
    torch.testing.assert_close(f(x.to(neuron)).cpu(), _uses_cpu_only_op(x))
    assert openneuron.library_stats().get("openneuron_test::cpu_only_cube") == 1
    m = torch.neuron.get_dynamo_metrics()
    assert m["graph_library_ops"] == 1 and m["fallback_graphs"] == 0


def test_op_without_lowering_raises_naming_op_and_source_line(neuron, monkeypatch):
    monkeypatch.setenv("OPENNEURON_HOST_LIBRARY", "0")
    f = torch.compile(_uses_cpu_only_op, backend="neuron")
    with pytest.raises(Exception) as info:
        f(torch.randn(4, device=neuron))
    msg = str(info.value)
    assert "openneuron_test::cpu_only_cube" in msg
    assert "test_compile.py" in msg and "cpu_only_cube(x + 1)" in msg
    assert "fallback_execution" in msg
    assert isinstance(info.value, NeuronCompileError) or "NeuronCompileError" in msg


@pytest.mark.parametrize("how", ["option", "env", "torchneuron_env"])
def test_fallback_execution_runs_the_graph_and_is_counted(neuron, monkeypatch, how):
    monkeypatch.setenv("OPENNEURON_HOST_LIBRARY", "0")
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent")
    options = None
    if how == "option":
        options = {"fallback_execution": True}
    elif how == "env":
        monkeypatch.setenv("OPENNEURON_COMPILE_FALLBACK", "1")
    else:
        monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    f = torch.compile(_uses_cpu_only_op, backend="neuron", options=options)
    x = torch.randn(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = f(x.to(neuron)).cpu()
    torch.testing.assert_close(got, _uses_cpu_only_op(x))
    assert any("CPU fallback" in str(w.message) for w in caught)
    m = torch.neuron.get_dynamo_metrics()
    assert m["fallback_graphs"] == 1
    assert m["ops_without_lowering"] == {"openneuron_test::cpu_only_cube": 1}


def test_unknown_option_is_a_clear_error(neuron):
    f = torch.compile(lambda x: x + 1, backend="neuron", options={"no_such_option": 1})
    with pytest.raises(Exception, match="unknown option.*no_such_option"):
        f(torch.ones(2, device=neuron))


def test_other_modes_warn_and_compile_with_the_default(neuron):
    f = torch.compile(lambda x: x.exp() + 1, backend="neuron", mode="max-autotune")
    x = torch.randn(5)
    with pytest.warns(UserWarning, match="mode='max-autotune' is not supported"):
        got = f(x.to(neuron)).cpu()
    torch.testing.assert_close(got, x.exp() + 1)


def test_structured_op_is_judged_by_its_out_variant(neuron, monkeypatch):
    # linalg_inv_ex's only device-generic kernel is the generated wrapper calling its out=
    # variant, which neuron runs through the host library: with that off, it cannot run.
    monkeypatch.setenv("OPENNEURON_HOST_LIBRARY", "0")
    f = torch.compile(lambda a: torch.linalg.inv(a) + 1, backend="neuron")
    with pytest.raises(Exception, match="aten::linalg_inv_ex"):
        f((torch.eye(3) * 2).to(neuron))


def test_ops_inside_higher_order_op_subgraphs_are_checked(neuron, monkeypatch):
    monkeypatch.setenv("OPENNEURON_HOST_LIBRARY", "0")

    def f(x):
        return torch.cond(x.sum() > 0, lambda t: cpu_only_cube(t), lambda t: t * 2, (x,))

    with pytest.raises(Exception, match="openneuron_test::cpu_only_cube"):
        torch.compile(f, backend="neuron", fullgraph=True)(torch.ones(3, device=neuron))


def test_inputs_a_native_kernel_declines_are_reported_at_run_time(neuron, monkeypatch):
    # exp has a native lowering, but not for complex64: eager mode hands such calls to the
    # host library, or with it off to the CPU fallback; the compiled graph reports that.
    monkeypatch.setenv("OPENNEURON_HOST_LIBRARY", "0")
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent")
    f = torch.compile(lambda z: torch.exp(z) * 2, backend="neuron")
    z = torch.randn(4, dtype=torch.complex64)
    with pytest.warns(UserWarning, match="fallback at run time.*aten::exp"):
        got = f(z.to(neuron)).cpu()
    torch.testing.assert_close(got, torch.exp(z) * 2)
    assert "aten::exp" in torch.neuron.get_dynamo_metrics()["ops_without_lowering"]
