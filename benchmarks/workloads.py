"""What a benchmark row measures: a model, its inputs and one call of completed work.

A workload is device-agnostic: it builds a CPU model and CPU inputs, and says how to turn
a (possibly moved or compiled) model plus inputs into a zero-argument step. Columns
(columns.py) decide where and how the model runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

@dataclass
class Built:
    model: torch.nn.Module  # on the CPU, already in the workload's dtype
    inputs: dict[str, Any]  # CPU tensors; columns move them to their device
    # (model on the column's device, inputs there) -> step(); creates per-column state
    # such as an optimizer, so training columns never share weights or moments.
    make_step: Callable[[torch.nn.Module, dict[str, Any]], Callable[[], Any]]
    # Weight reads per call for the roofline projection (1 per forward pass; training
    # also counts backward and the optimizer's reads and writes).
    weight_passes: float = 1.0


@dataclass(frozen=True)
class Workload:
    model: str  # model family, e.g. "gpt2"
    name: str  # what is measured, e.g. "forward b8 s128"
    kind: str  # "inference" or "training"
    unit: str  # a unit the cost report knows: openneuron.tools.cost.UNIT_SCALES
    units_per_call: float
    build: Callable[[torch.dtype], Built]

    def __post_init__(self):
        from openneuron.tools.cost import UNIT_SCALES

        if self.unit not in UNIT_SCALES:
            raise ValueError(f"{self.model}: unit {self.unit!r} has no cost scale")

    @property
    def key(self) -> str:
        return f"{self.model}/{self.name}"


def to_device(value: Any, device: str) -> Any:
    """Moves tensors inside dicts, lists and tuples to `device`; leaves the rest alone."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def all_workloads() -> list[Workload]:
    from .models import gpt2, llama, minilm, resnet, unet, vit, whisper

    workloads: list[Workload] = []
    for module in (gpt2, llama, minilm, vit, resnet, whisper, unet):
        workloads.extend(module.WORKLOADS)
    return workloads


def workloads_of(model: str) -> list[Workload]:
    found = [w for w in all_workloads() if w.model == model]
    if not found:
        raise KeyError(f"no workloads for model {model!r}")
    return found
