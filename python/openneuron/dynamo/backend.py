"""The `neuron` TorchDynamo backend: Dynamo graph -> AOTAutograd (forward and backward
graphs of ATen ops) -> lowering check -> the first call through the neuron lowerings, op by
op and recorded; later calls as one program (whole_graph.py)."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from . import cpu_autocopy, graph_check, layout, metrics
from .switches import switch
from .whole_graph import WholeGraph

# Options of torch.compile(backend="neuron", options={...}).
_OPTIONS = ("fallback_execution",)
# Set while neuron_backend runs: graphs compiled inside it are timed as part of it (a
# backward graph compiled lazily, at the first backward, is timed on its own).
_in_backend = threading.local()


class NeuronCompileError(RuntimeError):
    """A graph holds ops with no native lowering on neuron (and fallback execution is off)."""


def fallback_execution_default() -> bool:
    """Whether graphs with ops lacking a native lowering run anyway, those ops through the
    CPU fallback as in eager mode. Off by default, as in TorchNeuron:
    OPENNEURON_COMPILE_FALLBACK=1, or TorchNeuron's TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0,
    turns it on."""
    return switch("OPENNEURON_COMPILE_FALLBACK", "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION",
                  default=False)


def _missing_message(missing: list[graph_check.MissingLowering]) -> str:
    ops = "\n".join(f"  {m}" for m in missing)
    return (f"torch.compile(backend='neuron'): {len(missing)} op(s) of this graph have no native "
            f"lowering on neuron:\n{ops}\nRun the graph anyway, those ops on the CPU, with "
            "options={'fallback_execution': True} or OPENNEURON_COMPILE_FALLBACK=1 "
            "(TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0).")


def _watch_first_call(run: Callable, kind: str, counted: bool) -> Callable:
    """Runs the graph; on its first call, reports ops that a native kernel declined at
    run time (an input it does not cover) and that took the CPU fallback, as eager mode
    would: the fallback warns per op, and the graph is counted in the metrics."""
    from .. import _C

    first = [True]

    def call(*args):
        if not first[0]:
            return run(*args)
        first[0] = False
        before = dict(_C.fallback_stats())
        out = run(*args)
        after = dict(_C.fallback_stats())
        ran = sorted(op for op, n in after.items() if n > before.get(op, 0))
        if ran and not counted:
            warnings.warn(f"torch.compile(backend='neuron'): a {kind} graph ran ops on the CPU "
                          f"fallback at run time (inputs their neuron kernels do not cover): "
                          + ", ".join(ran), stacklevel=2)
            metrics.record_fallback_graph(ran)
        return out

    return call


def _graph_compiler(kind: str, fallback: bool) -> Callable:
    from torch._dynamo.utils import dynamo_timed
    from torch._functorch._aot_autograd.utils import make_boxed_func

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        # Timed in Dynamo's table of compile phases too, as Inductor's compile_fx_inner is.
        with dynamo_timed(f"neuron_compile.{kind}"):
            return _compile(gm)

    def _compile(gm: torch.fx.GraphModule) -> Callable:
        start = time.perf_counter()
        missing = graph_check.missing_lowerings(gm)
        if missing:
            if not fallback:
                raise NeuronCompileError(_missing_message(missing))
            warnings.warn(f"torch.compile(backend='neuron'): running a {kind} graph with ops on "
                          "the CPU fallback: " + ", ".join(m.op for m in missing), stacklevel=2)
            metrics.record_fallback_graph([m.op for m in missing])
        nested = getattr(_in_backend, "active", False)
        metrics.record_compile(kind, graph_check.count_ops(gm),
                               0.0 if nested else time.perf_counter() - start,
                               library_ops=len(graph_check.library_ops(gm)))
        if kind == "inference" and layout.enabled():
            if convolutions := layout.channels_last_convolutions(gm):
                metrics.record_channels_last(convolutions)
        whole = WholeGraph(gm.forward, kind, gm.code,
                           sizes_not_polynomial=graph_check.non_polynomial_size(gm))
        return make_boxed_func(_watch_first_call(whole, kind, bool(missing)))

    return compile_graph


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], *,
                   mode: str | None = None, options: dict | None = None) -> Callable:
    """torch.compile(model, backend="neuron"[, mode=..., options={...}])."""
    start = time.perf_counter()
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"torch.compile(backend='neuron'): unknown option(s) {unknown}; "
                         f"the backend takes {list(_OPTIONS)}")
    if mode not in (None, "default"):
        warnings.warn(f"torch.compile(backend='neuron'): mode={mode!r} is not supported; "
                      "compiling with the default mode", stacklevel=2)
    fallback = bool(opts.get("fallback_execution", fallback_execution_default()))

    from torch._dynamo.backends.common import aot_autograd

    compiler = aot_autograd(
        fw_compiler=_graph_compiler("forward", fallback),
        bw_compiler=_graph_compiler("backward", fallback),
        inference_compiler=_graph_compiler("inference", fallback),
        keep_inference_input_mutations=True,
    )
    outer = getattr(_in_backend, "active", False)
    _in_backend.active = True
    try:
        compiled = _compile_with_cpu_autocopy(compiler, gm, example_inputs)
    finally:
        _in_backend.active = outer
    metrics.record_compile("dynamo", graph_check.count_ops(gm), time.perf_counter() - start)
    return compiled


def _compile_with_cpu_autocopy(compiler: Callable, gm: torch.fx.GraphModule,
                               example_inputs: list[Any]) -> Callable:
    """The graph compiled with its CPU tensor inputs on the device (cpu_autocopy.py), or
    as given when autocopy is off, or when the graph cannot run so: it makes CPU tensors
    of its own and combines them with its inputs (then it runs where its inputs are)."""
    copied = cpu_autocopy.cpu_inputs(example_inputs) if cpu_autocopy.enabled() else []
    if not copied:
        return compiler(gm, example_inputs)
    on_device, device = cpu_autocopy.on_device(example_inputs, copied)
    try:
        compiled = compiler(gm, on_device)
    except NeuronCompileError:
        raise
    except Exception as e:  # noqa: BLE001 - any tracing failure on the device keeps the CPU
        warnings.warn("torch.compile(backend='neuron'): the graph's CPU inputs are not copied "
                      f"to the device, the graph fails there ({type(e).__name__}: "
                      f"{str(e).splitlines()[0] if str(e) else ''}); it runs where its inputs "
                      "are", stacklevel=2)
        return compiler(gm, example_inputs)
    metrics.record_cpu_autocopy(len(copied))
    return cpu_autocopy.wrap(compiled, copied, device)
