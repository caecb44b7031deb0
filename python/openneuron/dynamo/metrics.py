"""Counters of the neuron Dynamo backend (`torch.neuron.get_dynamo_metrics()`)."""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
_counts: Counter[str] = Counter()
_seconds = 0.0
_ops_without_lowering: Counter[str] = Counter()


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


def get_dynamo_metrics() -> dict:
    """Graphs compiled since start (or the last reset), by kind; ATen ops in them (and how
    many of those run through the host library); seconds spent in the backend; graphs run
    with ops lacking a native lowering, and those ops."""
    with _lock:
        out = {k: _counts.get(k, 0) for k in (
            "dynamo_graphs", "forward_graphs", "backward_graphs", "inference_graphs",
            "graph_ops", "graph_library_ops", "fallback_graphs")}
        out["compile_seconds"] = _seconds
        out["ops_without_lowering"] = dict(_ops_without_lowering)
        return out


def reset_dynamo_metrics() -> None:
    global _seconds
    with _lock:
        _counts.clear()
        _ops_without_lowering.clear()
        _seconds = 0.0
