"""Fresh results of elementwise ops take the CPU's memory layout (TensorIterator's rule:
the output follows its inputs' dim order), so code that relies on it (`.view()` after an
elementwise op on a transposed tensor, compiled graphs built from meta strides) behaves
as on the CPU."""

import pytest
import torch
import torch.nn.functional as F

x = torch.randn(4, 6, 8)

CASES = {
    "unary of a transpose": lambda x: x.transpose(0, 1).exp(),
    "binary, both transposed": lambda x: x.transpose(0, 1) + x.transpose(0, 1),
    "binary, transposed and broadcast": lambda x: x.transpose(1, 2) + x[0, :, 0:1].t(),
    "binary, broadcast first": lambda x: x[0, 0] + x.transpose(0, 1),
    "binary, permuted and contiguous": lambda x: x.permute(2, 0, 1) + x.permute(2, 0, 1).contiguous(),
    "binary, contiguous and permuted": lambda x: x.permute(2, 0, 1).contiguous() * x.permute(2, 0, 1),
    "scalar op on a slice": lambda x: x[..., :4] * 2,
    "neg of a slice": lambda x: -x[..., 4:],
    "comparison": lambda x: x.permute(2, 0, 1) > 0,
    "where": lambda x: torch.where(x.transpose(0, 2) > 0, x.transpose(0, 2), 0.0),
    "gelu": lambda x: F.gelu(x.permute(2, 0, 1)),
    "silu": lambda x: F.silu(x.permute(2, 0, 1)),
    "sin": lambda x: x.permute(2, 0, 1).sin(),
    "isnan": lambda x: x.permute(2, 0, 1).isnan(),
    "clamp": lambda x: x.permute(2, 0, 1).clamp(min=0),
    "addcmul": lambda x: torch.addcmul(x.transpose(1, 2), x.transpose(1, 2), x.transpose(1, 2)),
    "flip": lambda x: x.transpose(0, 2).flip(1),
    "dropout p=0": lambda x: F.dropout(x.permute(2, 0, 1), 0.0, training=True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_elementwise_result_has_the_cpus_strides(neuron, name):
    f = CASES[name]
    want = f(x)
    got = f(x.to(neuron))
    assert got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want)


def test_view_after_elementwise_on_a_transposed_tensor_works_as_on_the_cpu(neuron):
    # [B, L, H, E] seen as [B, H, L, E] (attention heads), scaled, then viewed back.
    q = torch.randn(2, 5, 3, 4)

    def f(t):
        return (t.transpose(1, 2) * 0.5).transpose(1, 2).view(2, 5, 12)

    torch.testing.assert_close(f(q.to(neuron)).cpu(), f(q))


@pytest.mark.parametrize("name", ["threshold_backward", "leaky_relu_backward", "gelu_backward"])
def test_activation_backward_result_has_the_cpus_strides(neuron, name):
    grad, self_ = torch.randn(5, 4).t(), torch.randn(4, 5)  # only grad transposed
    fn = {"threshold_backward": lambda g, s: torch.ops.aten.threshold_backward(g, s, 0.0),
          "leaky_relu_backward": lambda g, s: torch.ops.aten.leaky_relu_backward(g, s, 0.1, False),
          "gelu_backward": lambda g, s: torch.ops.aten.gelu_backward(g, s)}[name]
    want = fn(grad, self_)
    got = fn(grad.to(neuron), self_.to(neuron))
    assert got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("case", ["zero-size dim", "channels_last", "channels_last size-1 dim",
                                  "foreach", "mse none"])
def test_layout_edge_cases_match_the_cpu(neuron, case):
    if case == "zero-size dim":
        f, args = (lambda a, b: a + b), [torch.randn(2, 0, 3), torch.randn(3)]
    elif case == "channels_last":
        f, args = (lambda a, b: a * b), [torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
                                         torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)]
    elif case == "channels_last size-1 dim":
        f, args = (lambda a: a.exp()), [torch.randn(2, 3, 1, 4).to(memory_format=torch.channels_last)]
    elif case == "foreach":
        f, args = (lambda a: torch._foreach_exp([a])[0]), [torch.randn(4, 6).t()]
    else:
        f, args = (lambda a, b: F.mse_loss(a, b, reduction="none")), [torch.randn(4, 6).t(),
                                                                    torch.randn(4, 6).t()]
    want = f(*args)
    got = f(*[a.to(neuron) for a in args])
    assert got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("op", [torch.add, torch.eq, torch.mul])
def test_an_out_that_is_resized_takes_the_inputs_layout(neuron, op):
    # TensorIterator's rule: out= that must be resized gets the strides a fresh result
    # would have (a permuted input gives a permuted out); an out of the right size keeps
    # its own.
    for perm in ((2, 0, 1), (1, 2, 0)):
        x = torch.randn(2, 3, 4).permute(perm)
        cpu = op(x, x, out=torch.empty(0, dtype=op(x, x).dtype))
        dev = op(x.to(neuron), x.to(neuron), out=torch.empty(0, dtype=cpu.dtype, device=neuron))
        assert dev.stride() == cpu.stride()
        torch.testing.assert_close(dev.cpu(), cpu)
    x = torch.randn(2, 3, 4).permute(2, 0, 1)
    kept = torch.empty(4, 2, 3, device=neuron)
    assert torch.exp(x.to(neuron), out=kept).stride() == kept.stride() == (6, 3, 1)
    assert torch.exp(x.to(neuron), out=torch.empty(0, device=neuron)).stride() == \
        torch.exp(x, out=torch.empty(0)).stride()
