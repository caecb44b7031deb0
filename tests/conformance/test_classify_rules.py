"""The harness's rule for results that differ from the CPU kernel's: accepted only when
they are at least as close to a float64 computation (so it can also say "wrong")."""

import torch

from .classify import _no_less_accurate

TOL = (1e-3, 1e-3)  # atol, rtol


def t(*v):
    return torch.tensor(v, dtype=torch.float32)


def test_a_tensor_equal_to_the_cpus_is_not_judged():
    precise = t(0.0, 0.0)
    assert _no_less_accurate([t(1.0, 1.0)], [t(1.0, 1.0)], [precise], *TOL)


def test_element_wise_closer_to_float64_passes():
    assert _no_less_accurate([t(1.0, 2.0)], [t(1.1, 2.0)], [t(1.0, 2.0)], *TOL)


def test_closer_in_sum_with_no_worse_worst_element_passes():
    # Neuron is further off on element 0 but closer overall, and its worst error (0.04)
    # is within the CPU's worst (0.05): PyTorch's own reference-test criterion.
    actual, expected, precise = t(1.04, 2.0, 3.0), t(1.0, 2.05, 3.05), t(1.0, 2.0, 3.0)
    assert _no_less_accurate([actual], [expected], [precise], *TOL)


def test_less_accurate_overall_is_wrong():
    actual, expected, precise = t(1.04, 2.04, 3.0), t(1.0, 2.05, 3.0), t(1.0, 2.0, 3.0)
    assert not _no_less_accurate([actual], [expected], [precise], *TOL)


def test_one_element_far_beyond_the_cpus_worst_is_wrong():
    actual, expected, precise = t(1.5, 2.0, 3.0), t(1.1, 2.2, 3.3), t(1.0, 2.0, 3.0)
    assert not _no_less_accurate([actual], [expected], [precise], *TOL)


def test_a_nan_the_cpu_does_not_produce_is_wrong():
    actual, expected, precise = t(float("nan"), 2.0), t(1.1, 2.0), t(1.0, 2.0)
    assert not _no_less_accurate([actual], [expected], [precise], *TOL)
