"""How much work one call does, for the roofline projection of the cost report:
floating-point operations (PyTorch's FLOP counter: matmuls, convolutions, attention) and
an estimate of the bytes it moves (weights read per pass, plus every activation written
once and read once)."""

from __future__ import annotations

from typing import Callable

import torch

from .memory import cpu_allocation_trace, peak_of


def parameter_bytes(model: torch.nn.Module) -> int:
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def count(step: Callable[[], object], model: torch.nn.Module, weight_passes: float) -> dict:
    """Runs `step` once (on the CPU) under the FLOP counter and the allocation trace.
    Also returns the call's peak memory, so the CPU reference needs no separate call."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        trace = cpu_allocation_trace(step)
    allocated = sum(d for d in trace if d > 0)
    weights = parameter_bytes(model)
    return {
        "flops_per_call": int(counter.get_total_flops()),
        "parameter_bytes": weights,
        "weight_passes": weight_passes,
        "activation_bytes_per_call": allocated,
        "bytes_per_call": int(weights * weight_passes + 2 * allocated),
        "peak_bytes": peak_of(trace),
    }
