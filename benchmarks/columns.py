"""The columns of the model tables: where and how a workload runs.

Adding a capability (say, a new backend) is adding a Column here; the worker, the JSON
and the report pick it up. A column whose capability is not built yet reports why
instead of a number, and starts measuring by itself once the capability exists.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .workloads import Built, to_device


def _neuron_available() -> str | None:
    if not (hasattr(torch, "neuron") and torch.neuron.is_available()):
        import openneuron

        return f"neuron device not loaded: {openneuron.load_error()}"
    return None


def _neuron_compile_available() -> str | None:
    missing = _neuron_available()
    if missing:
        return missing
    import torch._dynamo

    if "neuron" not in torch._dynamo.list_backends(exclude_tags=()):
        return "not built yet (torch.compile backend 'neuron' lands with the compiler issue)"
    return None


def _always() -> str | None:
    return None


def synchronize(device: str) -> None:
    """Waits for queued device work: a timer must stop only after the work is done."""
    if device == "neuron":
        torch.neuron.synchronize()


@dataclass(frozen=True)
class Column:
    name: str  # key in the JSON
    label: str  # heading in the report
    device: str
    compile_backend: str | None  # None: eager
    reference: str | None  # the column this one is a ratio against (None: a reference)
    unavailable: Callable[[], str | None] = _always  # reason it cannot run, or None

    @property
    def is_reference(self) -> bool:
        return self.reference is None

    def prepare(self, built: Built, training: bool) -> Callable[[], Any]:
        """This column's step for a built workload."""
        # CPU inference shares the built module (read-only); anything that trains or
        # moves gets its own copy so columns never share weights or optimizer state.
        shared = self.device == "cpu" and not training
        model = built.model if shared else copy.deepcopy(built.model).to(self.device)
        if self.compile_backend:
            model = torch.compile(model, backend=self.compile_backend)
        return built.make_step(model, to_device(built.inputs, self.device))


CPU_EAGER = Column("cpu_eager", "CPU eager", "cpu", None, reference=None)
NEURON_EAGER = Column("neuron_eager", "neuron eager", "neuron", None, reference="cpu_eager",
                      unavailable=_neuron_available)
INDUCTOR_CPU = Column("inductor_cpu", "Inductor (CPU)", "cpu", "inductor", reference=None)
NEURON_COMPILED = Column("neuron_compiled", "neuron compiled", "neuron", "neuron",
                         reference="inductor_cpu", unavailable=_neuron_compile_available)

COLUMNS = [CPU_EAGER, NEURON_EAGER, INDUCTOR_CPU, NEURON_COMPILED]
BY_NAME = {c.name: c for c in COLUMNS}
