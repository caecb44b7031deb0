"""Whole-graph programs for compiled graphs.

A graph's first call runs its ATen ops one by one through the eager lowerings, as before,
while the native side records every program launched (csrc/torch/graph_capture.cpp): the
recording compiles into one program over the graph's inputs, outputs and one scratch
arena. Later calls whose inputs have the recorded layout (dtype, sizes, strides, storage
offset, shared storages) launch that program once. A graph whose run cannot be replayed
(a host read of device data, a CPU kernel, large host inputs) keeps
running op by op; `torch.neuron.get_dynamo_metrics()["capture_failures"]` says why.
OPENNEURON_WHOLE_GRAPH=0 turns recording off.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from . import metrics


def enabled() -> bool:
    return os.environ.get("OPENNEURON_WHOLE_GRAPH", "1").strip().lower() not in ("0", "false", "no", "off")


# CPU tensors up to this many elements may go in or out of a recorded graph (sdpa's philox
# seed and offset, scalar constants): their values are compared, not recorded as memory.
_SMALL = 64


def _split_inputs(args: tuple) -> tuple[list[int], list, str | None]:
    """Positions of the device inputs, and (position, value) of the host inputs whose values
    the recording holds (a replay requires them equal), or the reason there is no recording."""
    device: list[int] = []
    fixed: list = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            if a.device.type == "neuron":
                device.append(i)
            elif a.device.type == "cpu" and a.numel() <= _SMALL:
                fixed.append((i, a.clone()))
            else:
                return [], [], f"an input on {a.device.type} with {a.numel()} elements"
        elif isinstance(a, (bool, int, float)):
            fixed.append((i, a))
        else:
            return [], [], f"an input of type {type(a).__name__}"
    if len({args[i].device for i in device}) > 1:
        return [], [], "inputs on several devices"
    return device, fixed, None


def _same(a: Any, b: Any) -> bool:
    if isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and a.device == b.device and a.dtype == b.dtype
                and a.shape == b.shape and torch.equal(a, b))
    return type(a) is type(b) and a == b


def _flatten(out: Any) -> tuple[list[torch.Tensor], list, str | None]:
    """The device output tensors and a template to rebuild `out`: an int entry is the
    number of a device tensor, a tuple (value,) a constant (None, a small CPU tensor)."""
    if not isinstance(out, (list, tuple)):
        return [], [], f"a graph output of type {type(out).__name__}"
    tensors: list[torch.Tensor] = []
    template: list = []
    for o in out:
        if isinstance(o, torch.Tensor) and o.device.type == "neuron":
            template.append(len(tensors))
            tensors.append(o)
        elif o is None or isinstance(o, (bool, int, float)):
            template.append((o,))
        elif isinstance(o, torch.Tensor) and o.device.type == "cpu" and o.numel() <= _SMALL:
            template.append((o.clone(),))
        else:
            return [], [], f"an output that is not a device tensor ({type(o).__name__})"
    return tensors, template, None


def _constant(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value


class WholeGraph:
    """Runs `run` (the graph's FX code) op by op on the first call while recording it; later
    calls launch the recorded program."""

    def __init__(self, run: Callable, kind: str):
        self._run = run
        self._kind = kind
        self._program = None
        self._device: list[int] = []
        self._fixed: list = []
        self._template: list = []
        self._out_type: type = tuple
        # Host outputs are constants of the recording only if a second run gives them again.
        self._validate = False
        self._tried = not enabled()
        self.failure: str | None = None if enabled() else "OPENNEURON_WHOLE_GRAPH=0"

    def __call__(self, *args):
        if self._program is not None and not self._validate:
            out = self._replay(args)
            if out is not None:
                metrics.record_graph_call(whole=True)
                return out
        elif self._program is not None:
            return self._check_constants(args)
        elif not self._tried:
            self._tried = True
            return self._record(args)
        metrics.record_graph_call(whole=False)
        return self._run(*args)

    def _replay(self, args: tuple):
        if any(not _same(args[i], v) for i, v in self._fixed):
            return None
        out = self._program.run([args[i] for i in self._device])
        if out is None:  # an input layout the program was not recorded for
            return None
        return self._out_type(out[e] if isinstance(e, int) else _constant(e[0]) for e in self._template)

    def _record(self, args: tuple):
        from .. import _C

        device, fixed, problem = _split_inputs(args)
        if problem is not None:
            self._give_up(problem)
            return self._run(*args)
        _C._capture_begin([args[i] for i in device])
        try:
            out = self._run(*args)
        except BaseException:
            _C._capture_abort()
            raise
        metrics.record_graph_call(whole=False)
        tensors, template, problem = _flatten(out)
        if problem is not None:
            _C._capture_abort()
            self._give_up(problem)
            return out
        result = _C._capture_end(tensors)
        if isinstance(result, str):
            self._give_up(result)
            return out
        self._program, self._device, self._fixed = result, device, fixed
        self._template, self._out_type = template, type(out)
        self._validate = any(isinstance(e, tuple) and isinstance(e[0], torch.Tensor) for e in template)
        metrics.record_whole_graph(self._kind, result.captured_launches, result.instructions)
        return out

    def _check_constants(self, args: tuple):
        self._validate = False
        out = self._run(*args)
        metrics.record_graph_call(whole=False)
        for e, o in zip(self._template, out):
            if isinstance(e, tuple) and not _same(o, e[0]):
                self._program = None
                self._give_up("host outputs that differ between calls")
                break
        return out

    def _give_up(self, reason: str) -> None:
        self.failure = reason
        metrics.record_capture_failure(self._kind, reason)

    @property
    def program(self):
        """The recorded program (None until recorded, or when it could not be)."""
        return self._program
