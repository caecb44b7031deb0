"""Whole-graph programs for compiled graphs.

A graph's first call runs its ATen ops one by one through the eager lowerings, as before,
while the native side records every program launched (csrc/torch/graph_capture.cpp): the
recording compiles into one program over the graph's inputs, outputs and one scratch
arena. Later calls whose inputs have the recorded layout (dtype, sizes, strides, storage
offset, shared storages) launch that program once. Host inputs (ints such as sizes under
dynamic shapes, small CPU tensors) are part of a recording: each distinct set of their
values is recorded once, up to _MAX_RECORDINGS per graph. A graph whose run cannot be
replayed (a host read of device data, a CPU kernel, large host inputs) keeps running op by
op; `torch.neuron.get_dynamo_metrics()["capture_failures"]` says why.
OPENNEURON_WHOLE_GRAPH=0 turns recording off; OPENNEURON_DEBUG_DIR (or
TORCH_NEURONX_DEBUG_DIR) receives a listing of each recording.
"""

from __future__ import annotations

import itertools
import os
import struct
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from . import metrics


_dumps = itertools.count()


def debug_dir() -> Path | None:
    """OPENNEURON_DEBUG_DIR (or TorchNeuron's TORCH_NEURONX_DEBUG_DIR): where each recorded
    graph's FX code, compiler IR and program listing are written."""
    d = os.environ.get("OPENNEURON_DEBUG_DIR") or os.environ.get("TORCH_NEURONX_DEBUG_DIR")
    return Path(d) if d else None


def _dump(kind: str, code: str, program) -> None:
    d = debug_dir()
    if d is None:
        return
    path = d / f"{os.getpid()}-{next(_dumps):04d}-{kind}.txt"
    try:
        d.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {kind} graph (FX)\n{code}\n# recorded as\n{program.dump()}")
    except OSError as e:
        warnings.warn(f"OpenNeuron: cannot write the debug dump {path}: {e}", stacklevel=3)


def enabled() -> bool:
    return os.environ.get("OPENNEURON_WHOLE_GRAPH", "1").strip().lower() not in ("0", "false", "no", "off")


# CPU tensors up to this many elements may go in or out of a recorded graph (sdpa's philox
# seed and offset, scalar constants): their values are compared, not recorded as memory.
_SMALL = 64


# Recordings kept per graph, one per distinct set of host input values (sizes given as
# ints under dynamic shapes, small CPU tensors): further values run op by op.
_MAX_RECORDINGS = 8


def _split_inputs(args: tuple) -> tuple[list[int], list[int], str | None]:
    """Positions of the device inputs and of the host inputs (values a recording holds:
    ints, floats, CPU tensors of up to _SMALL elements), or the reason there is no
    recording."""
    device: list[int] = []
    host: list[int] = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            if a.device.type == "neuron":
                device.append(i)
            elif a.device.type == "cpu" and a.numel() <= _SMALL:
                host.append(i)
            else:
                return [], [], f"an input on {a.device.type} with {a.numel()} elements"
        elif isinstance(a, (bool, int, float)):
            host.append(i)
        else:
            return [], [], f"an input of type {type(a).__name__}"
    if len({args[i].device for i in device}) > 1:
        return [], [], "inputs on several devices"
    return device, host, None


def _host_key(args: tuple, host: list[int]) -> tuple | None:
    """The host inputs' values, or None if one no longer is a small host value."""
    key = []
    for i in host:
        a = args[i]
        if isinstance(a, torch.Tensor):
            if a.device.type != "cpu" or a.numel() > _SMALL:
                return None
            # Bytes, not values: -0.0 differs from 0.0, and NaN equals itself.
            key.append((str(a.dtype), tuple(a.shape), a.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()))
        elif isinstance(a, float):
            key.append(("float", struct.pack("<d", a)))
        elif isinstance(a, (bool, int)):
            key.append((type(a).__name__, a))
        else:
            return None
    return tuple(key)


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


class _Recording:
    """One recorded program and how to rebuild the graph's outputs from its results."""

    def __init__(self, program, template: list, out_type: type):
        self.program = program
        self.template = template
        self.out_type = out_type
        # Host outputs are constants of the recording only if a second run gives them again.
        self.validate = any(isinstance(e, tuple) and isinstance(e[0], torch.Tensor) for e in template)


class WholeGraph:
    """Runs `run` (the graph's FX code) op by op on a call with new host input values while
    recording it; later calls with those values launch the recorded program."""

    def __init__(self, run: Callable, kind: str, code: str = ""):
        self._run = run
        self._kind = kind
        self._code = code  # the FX graph's Python, for debug dumps
        self._device: list[int] | None = None  # positions of the device inputs
        self._host: list[int] = []
        self._recordings: dict[tuple, _Recording] = {}
        self.failure: str | None = None if enabled() else "OPENNEURON_WHOLE_GRAPH=0"

    def __call__(self, *args):
        if self.failure is None:
            out = self._whole(args)
            if out is not None:
                return out
        metrics.record_graph_call(whole=False)
        return self._run(*args)

    def _whole(self, args: tuple):
        """The outputs of a replay or of a recorded run; None: run op by op."""
        if self._device is None:
            device, host, problem = _split_inputs(args)
            if problem is not None:
                self._give_up(problem)
                return None
            self._device, self._host = device, host
        key = _host_key(args, self._host)
        if key is None or any(not isinstance(args[i], torch.Tensor) for i in self._device):
            return None
        rec = self._recordings.get(key)
        if rec is None:
            return self._record(args, key) if len(self._recordings) < _MAX_RECORDINGS else None
        if rec.validate:
            return self._check_constants(rec, args)
        out = rec.program.run([args[i] for i in self._device])
        if out is None:  # an input layout the program was not recorded for
            return None
        metrics.record_graph_call(whole=True)
        return rec.out_type(out[e] if isinstance(e, int) else _constant(e[0]) for e in rec.template)

    def _record(self, args: tuple, key: tuple):
        from .. import _C

        versions = [args[i]._version for i in self._host if isinstance(args[i], torch.Tensor)]
        _C._capture_begin([args[i] for i in self._device])
        try:
            out = self._run(*args)
        except BaseException:
            _C._capture_abort()
            raise
        metrics.record_graph_call(whole=False)
        if versions != [args[i]._version for i in self._host if isinstance(args[i], torch.Tensor)]:
            _C._capture_abort()  # a program cannot replay host-side updates
            self._give_up("a host input updated in place")
            return out
        tensors, template, problem = _flatten(out)
        if problem is not None:
            _C._capture_abort()
            self._give_up(problem)
            return out
        try:
            result = _C._capture_end(tensors)
        except Exception as e:  # noqa: BLE001 - e.g. an output type the engines cannot describe
            result = f"the outputs could not be described: {e}"
        if isinstance(result, str):
            self._give_up(result)
            return out
        self._recordings[key] = _Recording(result, template, type(out))
        _dump(self._kind, self._code, result)
        metrics.record_whole_graph(self._kind, result.captured_launches, result.instructions)
        return out

    def _check_constants(self, rec: _Recording, args: tuple):
        rec.validate = False
        out = self._run(*args)
        metrics.record_graph_call(whole=False)
        for e, o in zip(rec.template, out):
            if isinstance(e, tuple) and not _same(o, e[0]):
                self._recordings.clear()
                self._give_up("host outputs that differ between calls")
                break
        return out

    def _give_up(self, reason: str) -> None:
        """What stops recording for this graph, whatever its inputs: it runs op by op."""
        self.failure = reason
        metrics.record_capture_failure(self._kind, reason)

    @property
    def programs(self) -> int:
        """Recordings held (one per distinct set of host input values)."""
        return len(self._recordings)
