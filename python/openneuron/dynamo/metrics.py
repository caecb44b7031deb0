"""Counters of the neuron Dynamo backend (`torch.neuron.get_dynamo_metrics()`)."""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
_counts: Counter[str] = Counter()
_seconds = 0.0
_compiler_seconds = 0.0
_ops_without_lowering: Counter[str] = Counter()
_capture_failures: Counter[str] = Counter()


def record_compile(kind: str, num_ops: int, seconds: float, library_ops: int = 0) -> None:
    """One graph handed to the backend: kind is "dynamo" (a captured graph), or the
    AOTAutograd "forward", "backward" or "inference" graph compiled from it."""
    global _seconds
    with _lock:
        _counts[f"{kind}_graphs"] += 1
        if kind != "dynamo":
            _counts["graph_ops"] += num_ops
            _counts["graph_library_ops"] += library_ops
        _seconds += seconds


def record_fallback_graph(ops: list[str]) -> None:
    """A graph with ops that have no native lowering, run anyway (fallback_execution)."""
    with _lock:
        _counts["fallback_graphs"] += 1
        _ops_without_lowering.update(ops)


def record_whole_graph(kind: str, launches: int, instructions: int, fused_groups: int,
                       scratch_bytes: int) -> None:
    """A graph recorded as one program: `launches` eager launches became one program of
    `instructions` instructions, `fused_groups` of them fused elementwise chains, with a
    scratch arena of `scratch_bytes` for its intermediates."""
    with _lock:
        _counts["whole_graph_programs"] += 1
        _counts["recorded_launches"] += launches
        _counts["program_instructions"] += instructions
        _counts["fused_groups"] += fused_groups
        _counts["max_program_scratch_bytes"] = max(_counts["max_program_scratch_bytes"], scratch_bytes)


def record_channels_last(convolutions: int) -> None:
    """An inference graph whose `convolutions` now take channels_last inputs (layout.py)."""
    with _lock:
        _counts["channels_last_graphs"] += 1
        _counts["channels_last_convolutions"] += convolutions


def record_compiler_seconds(seconds: float) -> None:
    """Time in OpenNeuron's own compiler: a recording turned into a program, a program
    made from a symbolic recording. Also entered in Dynamo's own table of compile phases
    (`torch._dynamo.utils.compilation_time_metrics`, key "neuron_program_compile"), where
    benchmarks/compile_time.py splits a first call into Dynamo, AOTAutograd and backend."""
    global _compiler_seconds
    with _lock:
        _compiler_seconds += seconds
    from torch._dynamo.utils import compilation_time_metrics

    compilation_time_metrics.setdefault("neuron_program_compile", []).append(seconds)


def record_disk_cache(counter: str) -> None:
    """disk_cache_hits / _misses / _writes: recordings loaded, looked for in vain, written."""
    with _lock:
        _counts[counter] += 1


def record_instance() -> None:
    """A program made from a symbolic recording for a host int value never run."""
    with _lock:
        _counts["symbolic_instances"] += 1


def record_capture_failure(kind: str, reason: str) -> None:
    """A graph that keeps running op by op, and why."""
    with _lock:
        _counts["op_by_op_graphs"] += 1
        _capture_failures[f"{kind}: {reason}"] += 1


def record_cpu_autocopy(inputs: int) -> None:
    """A Dynamo graph with `inputs` CPU tensors copied to the device at each call."""
    with _lock:
        _counts["cpu_autocopy_graphs"] += 1
        _counts["cpu_autocopy_inputs"] += inputs


def record_graph_call(whole: bool) -> None:
    with _lock:
        _counts["whole_graph_calls" if whole else "op_by_op_calls"] += 1


def get_dynamo_metrics() -> dict:
    """Graphs compiled since start (or the last reset), by kind; ATen ops in them (and how
    many of those run through the host library); seconds spent in the backend; graphs run
    with ops lacking a native lowering, and those ops. Whole-graph programs: graphs recorded
    as one program (and the eager launches and instructions in them, the fused elementwise
    chains among those instructions, the largest scratch arena of one program), programs
    made from symbolic recordings for sizes never run (`symbolic_instances`), recordings
    loaded from, missed in and written to the disk cache (`disk_cache_*`), graphs left
    op by op with the reasons (`capture_failures`), calls of each kind, Dynamo graphs
    whose CPU tensor inputs are copied to the device at each call (`cpu_autocopy_*`), and
    inference graphs whose convolutions run on channels_last activations
    (`channels_last_graphs`, `channels_last_convolutions`)."""
    with _lock:
        out = {k: _counts.get(k, 0) for k in (
            "dynamo_graphs", "forward_graphs", "backward_graphs", "inference_graphs",
            "graph_ops", "graph_library_ops", "fallback_graphs", "whole_graph_programs",
            "recorded_launches", "program_instructions", "fused_groups",
            "max_program_scratch_bytes", "symbolic_instances", "disk_cache_hits",
            "disk_cache_misses", "disk_cache_writes", "op_by_op_graphs",
            "whole_graph_calls", "op_by_op_calls", "cpu_autocopy_graphs",
            "cpu_autocopy_inputs", "channels_last_graphs", "channels_last_convolutions")}
        out["compile_seconds"] = _seconds
        out["compiler_seconds"] = _compiler_seconds
        out["ops_without_lowering"] = dict(_ops_without_lowering)
        out["capture_failures"] = dict(_capture_failures)
        return out


def reset_dynamo_metrics() -> None:
    global _seconds, _compiler_seconds
    with _lock:
        _counts.clear()
        _ops_without_lowering.clear()
        _capture_failures.clear()
        _seconds = 0.0
        _compiler_seconds = 0.0
