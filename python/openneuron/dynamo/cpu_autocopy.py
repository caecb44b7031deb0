"""CPU inputs of a compiled graph copied to the device, as TorchNeuron does.

A graph compiled with backend="neuron" runs on the device: a CPU tensor among its
inputs (input ids built on the host, a model left on the CPU) is copied to neuron at each
call, so the graph traces, records and runs as a device graph, and its outputs are on
neuron. A 0-dim CPU tensor stays where it is: device ops take it as a scalar, as in eager
mode. An input the graph writes in place is copied back after the call, so the caller's
CPU tensor sees the write. `TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY=1` (or
`OPENNEURON_CPU_AUTOCOPY=0`) turns this off: the graph then sees its inputs where they
are, as eager mode would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .switches import switch


def enabled() -> bool:
    return switch("OPENNEURON_CPU_AUTOCOPY", "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY",
                  default=True)


def _target_device(example_inputs: Sequence[Any]) -> torch.device:
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "neuron":
            return x.device
    return torch.device("neuron", torch.neuron.current_device())


def cpu_inputs(example_inputs: Sequence[Any]) -> list[int]:
    """Indices of the inputs to copy: CPU tensors of at least one dimension."""
    return [i for i, x in enumerate(example_inputs)
            if isinstance(x, torch.Tensor) and x.device.type == "cpu" and x.dim() > 0
            and x.layout == torch.strided]


def on_device(example_inputs: Sequence[Any], indices: list[int]) -> tuple[list[Any], torch.device]:
    """The example inputs the graph is traced with: those at `indices` as device tensors
    of the same sizes, strides and dtype (made in the inputs' fake mode when they are
    fake, so symbolic sizes stay symbolic)."""
    device = _target_device(example_inputs)
    out = list(example_inputs)
    for i in indices:
        x = example_inputs[i]
        fake_mode = getattr(x, "fake_mode", None)
        if fake_mode is not None:
            with fake_mode:
                t = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=device)
        else:
            t = x.to(device)
        if x.requires_grad:
            t.requires_grad_(True)
        out[i] = t
    return out, device


def wrap(compiled: Callable, indices: list[int], device: torch.device) -> Callable:
    """The graph's callable with the inputs at `indices` copied to `device` at each call
    (and copied back when the graph wrote them)."""

    def run(*args):
        args = list(args)
        copies = []
        for i in indices:
            x = args[i]
            if isinstance(x, torch.Tensor) and x.device.type == "cpu":
                d = x.to(device, non_blocking=False)
                copies.append((x, d, d._version))
                args[i] = d
        out = compiled(*args)
        for host, dev, version in copies:
            if dev._version != version:
                with torch.no_grad():
                    host.copy_(dev)
        return out

    return run
