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
Recordings are also written to an on-disk cache (disk_cache.py) that a fresh process
loads instead of recording. OPENNEURON_WHOLE_GRAPH=0 turns recording off;
OPENNEURON_DEBUG_DIR (or TORCH_NEURONX_DEBUG_DIR) receives a listing of each recording.
"""

from __future__ import annotations

import itertools
import os
import struct
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from . import disk_cache, metrics


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

# Programs instantiated from a graph's symbolic recording (one per value of its varying
# host int), kept per graph; the oldest goes first.
_MAX_INSTANCES = 64


def _small_host_tensor(a: torch.Tensor) -> bool:
    return a.device.type == "cpu" and a.numel() <= _SMALL


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
            elif _small_host_tensor(a):
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
            if not _small_host_tensor(a):
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
        elif isinstance(o, torch.Tensor) and _small_host_tensor(o):
            template.append((o.clone(),))
        else:
            return [], [], f"an output that is not a device tensor ({type(o).__name__})"
    return tensors, template, None


def _constant(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value


def _varying_ints(a: tuple, b: tuple) -> tuple[int, ...] | None:
    """The positions where host keys a and b differ, if there they hold ints that move
    together, all by the same amount (sizes of one growing dimension: a KV cache's length
    and the attention mask's, one longer). n is the first of them."""
    if len(a) != len(b):
        return None
    diff = tuple(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    if not diff or any(a[i][0] != "int" or b[i][0] != "int" for i in diff):
        return None
    if len({b[i][1] - a[i][1] for i in diff}) != 1:
        return None
    return diff


def _fit_template(ta: list, na: int, tb: list, nb: int) -> list | None:
    """Output templates of two recordings as one: host ints that differ become
    ("affine", slope, intercept) in n; None if they differ otherwise."""
    if len(ta) != len(tb):
        return None
    out: list = []
    for ea, eb in zip(ta, tb):
        if isinstance(ea, int) or isinstance(eb, int):
            if ea != eb:
                return None
            out.append(ea)
        elif _same(ea[0], eb[0]):
            out.append(ea)
        elif type(ea[0]) is int and type(eb[0]) is int and (eb[0] - ea[0]) % (nb - na) == 0:
            slope = (eb[0] - ea[0]) // (nb - na)
            out.append(("affine", slope, ea[0] - slope * na))
        else:
            return None
    return out


def _template_at(fit: list, n: int) -> list:
    return [(e[1] * n + e[2],) if isinstance(e, tuple) and len(e) == 3 else e for e in fit]


def _same_template(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        x == y if isinstance(x, int) or isinstance(y, int) else _same(x[0], y[0]) for x, y in zip(a, b))


class _Symbolic:
    """Two recordings at values of one host int n (at key positions `positions`),
    generalized: their integers as slope * n + intercept. Used only once it has predicted
    a third recording."""

    def __init__(self, positions: tuple[int, ...], key: tuple, graph, template: list,
                 out_type: type):
        self.positions = positions
        self.key = key
        self.graph = graph
        self.template = template
        self.out_type = out_type
        self.trusted = False

    def n_of(self, key: tuple) -> int | None:
        """n for a key that differs from this one's base key in n only."""
        return key[self.positions[0]][1] if _varying_ints(self.key, key) == self.positions else None


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

    def __init__(self, run: Callable, kind: str, code: str = "",
                 sizes_not_polynomial: str | None = None):
        self._run = run
        self._kind = kind
        self._code = code  # the FX graph's Python, for debug dumps
        self._device: list[int] | None = None  # positions of the device inputs
        self._host: list[int] = []
        self._recordings: dict[tuple, _Recording] = {}
        self._symbolic: _Symbolic | None = None
        # Why sizes are not fitted: Dynamo derives one by floor division or the like, or a
        # fit mispredicted. Reported once a second size is recorded.
        self._no_fit: str | None = None
        if sizes_not_polynomial is not None:
            self._no_fit = (f"sizes derived by floor division, modulo, min or max (node "
                            f"{sizes_not_polynomial}): each size is recorded")
        self._no_fit_reported = False
        self._instances: dict[tuple, _Recording] = {}
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
        rec = self._recordings.get(key) or self._instances.get(key) or self._instantiate(key)
        if rec is None:
            if len(self._recordings) >= _MAX_RECORDINGS:
                return None
            disk_key = self._disk_key(args, key)
            rec = self._load(key, disk_key)
            if rec is None:
                return self._record(args, key, disk_key)
        if rec.validate:
            return self._check_constants(rec, args)
        out = rec.program.run([args[i] for i in self._device])
        if out is None:  # an input layout the program was not recorded for
            if self._instances.pop(key, None) is not None:  # the fit predicted it wrong
                self._fit_failed()
            return None
        metrics.record_graph_call(whole=True)
        return rec.out_type(out[e] if isinstance(e, int) else _constant(e[0]) for e in rec.template)

    def _disk_key(self, args: tuple, key: tuple) -> str | None:
        if not disk_cache.enabled():
            return None
        return disk_cache.entry_key(self._kind, self._code, [args[i] for i in self._device], key)

    def _load(self, key: tuple, disk_key: str | None) -> _Recording | None:
        """A recording another process (or an earlier run) wrote, or None."""
        from .. import _C

        entry = disk_cache.load(disk_key) if disk_key is not None else None
        if entry is None:
            if disk_key is not None:
                metrics.record_disk_cache("disk_cache_misses")
            return None
        header, blob = entry
        began = time.perf_counter()
        try:
            program = _C._load_recording(blob)
            template = [e["t"] if "t" in e else (e["c"],) for e in header["template"]]
            out_type = {"tuple": tuple, "list": list}[header["out_type"]]
        except (ValueError, KeyError, TypeError) as e:
            disk_cache.discard(disk_key, str(e))
            return None
        finally:
            metrics.record_compiler_seconds(time.perf_counter() - began)
        rec = self._recordings[key] = _Recording(program, template, out_type)
        metrics.record_disk_cache("disk_cache_hits")
        self._learn_sizes(key, rec)
        return rec

    def _store(self, disk_key: str | None, rec: _Recording) -> None:
        """Writes a new recording to the disk cache, if it can be replayed elsewhere."""
        if disk_key is None or rec.validate or rec.out_type not in (tuple, list):
            return
        template = []
        for e in rec.template:
            if isinstance(e, int):
                template.append({"t": e})
            elif e[0] is None or isinstance(e[0], (bool, int, float)):
                template.append({"c": e[0]})
            else:
                return  # a host tensor output: compared at run time, not stored
        blob = rec.program.serialize()
        if blob is None:
            return
        header = {"kind": self._kind, "nodes": rec.program.nodes,
                  "instructions": rec.program.instructions, "created": time.time(),
                  "template": template, "out_type": rec.out_type.__name__}
        if disk_cache.store(disk_key, header, blob):
            metrics.record_disk_cache("disk_cache_writes")

    def _record(self, args: tuple, key: tuple, disk_key: str | None = None):
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
        began = time.perf_counter()
        try:
            result = _C._capture_end(tensors)
        except Exception as e:  # noqa: BLE001 - e.g. an output type the engines cannot describe
            result = f"the outputs could not be described: {e}"
        metrics.record_compiler_seconds(time.perf_counter() - began)
        if isinstance(result, str):
            self._give_up(result)
            return out
        rec = self._recordings[key] = _Recording(result, template, type(out))
        _dump(self._kind, self._code, result)
        self._store(disk_key, rec)
        self._learn_sizes(key, rec)
        metrics.record_whole_graph(self._kind, result.captured_launches, result.instructions,
                                   result.fused_groups, result.scratch_bytes)
        return out

    def _learn_sizes(self, key: tuple, rec: _Recording) -> None:
        """Symbolic sizes: a second recording that differs from an earlier one in one host
        int gives a fit; a third at another value of that int must match the fit's
        prediction before the fit makes programs for values never run."""
        from .. import _C

        sym = self._symbolic
        if self._no_fit is not None:
            if not self._no_fit_reported and len(self._recordings) > 1:
                self._no_fit_reported = True
                metrics.record_capture_failure(self._kind, self._no_fit)
            return
        if rec.validate or (sym is not None and sym.trusted):
            return
        if sym is None:
            for k, r in self._recordings.items():
                p = None if r is rec or r.validate else _varying_ints(k, key)
                if p is None or r.out_type is not rec.out_type:
                    continue
                na, nb = k[p[0]][1], key[p[0]][1]
                graph = _C._generalize(r.program, na, rec.program, nb)
                template = _fit_template(r.template, na, rec.template, nb)
                if graph is not None and template is not None:
                    self._symbolic = _Symbolic(p, k, graph, template, rec.out_type)
                    return
            return
        n = sym.n_of(key)
        if n is None:
            return
        if sym.graph.predicts(rec.program, n) and _same_template(_template_at(sym.template, n), rec.template):
            sym.trusted = True
        else:
            self._fit_failed()

    def _fit_failed(self) -> None:
        """Sizes that are not affine in the host int: every value is recorded."""
        self._symbolic = None
        self._instances.clear()
        self._no_fit = "sizes that are not affine in a host int: each size is recorded"
        self._no_fit_reported = True
        metrics.record_capture_failure(self._kind, self._no_fit)

    def _instantiate(self, key: tuple) -> _Recording | None:
        """A program for new host values made from the trusted symbolic recording."""
        sym = self._symbolic
        n = sym.n_of(key) if sym is not None and sym.trusted else None
        if n is None:
            return None
        began = time.perf_counter()
        program = sym.graph.at(n)
        metrics.record_compiler_seconds(time.perf_counter() - began)
        if program is None:
            return None
        if len(self._instances) >= _MAX_INSTANCES:
            self._instances.pop(next(iter(self._instances)))
        rec = self._instances[key] = _Recording(program, _template_at(sym.template, n), sym.out_type)
        metrics.record_instance()
        return rec

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
