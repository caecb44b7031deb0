"""Softmax and log-softmax on neuron against the CPU, with the cross-entropy built on them;
half types rounded as the CPU rounds them. The other losses are in test_ops_loss.py."""

import functools

import pytest
import torch
import torch.nn.functional as F

import helpers
import openneuron

pytestmark = pytest.mark.usefixtures("no_fallback")

# A NaN in either output fails the comparison.
same = functools.partial(helpers.same, equal_nan=False)

X = torch.randn(17, 33)


def test_softmax_and_cross_entropy(neuron):
    same(lambda a: torch.softmax(a, dim=1), X)
    same(lambda a: torch.log_softmax(a, dim=0), X)
    target = torch.randint(0, 33, (17,))
    target[3] = -100
    same(lambda a, t: F.cross_entropy(a, t), X, target)
    same(lambda a, t: F.cross_entropy(a, t, reduction="sum"), X, target)
    same(lambda a, t: F.nll_loss(a, t, reduction="none", ignore_index=5), X, target.clamp(min=0))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_log_softmax_in_half_types_rounds_like_the_cpu(neuron, dtype):
    # Over the last dim the CPU rounds the row's sum and its log to the input type before
    # subtracting; over other dims it does not. Both are matched bit for bit.
    x = (torch.randn(64, 48, generator=torch.Generator().manual_seed(0)) * 4).to(dtype)
    for dim in (-1, 0):
        torch.testing.assert_close(torch.log_softmax(x.to(neuron), dim).cpu(),
                                   torch.log_softmax(x, dim), rtol=0, atol=0)
