"""Data collection while the script runs: counters reset at the start, read at the end.

No per-op Python hook: the runtime and the bridge count fallbacks, host-library calls,
downcasts, device time and allocations in C++ (`openneuron._C`); Dynamo records its own
compilations; a sampler thread reads memory every ~20 ms. A source the running build
does not have yet is listed in `missing`, and its report section says so.
"""

from __future__ import annotations

import importlib
import time

from .dynamo_events import DynamoWatcher
from .sampler import Sampler

# Allocation events kept by the memory history (a ring: the oldest are dropped).
DEFAULT_HISTORY_ENTRIES = 200_000


def _memory_module():
    """torch.neuron.memory (the torch.cuda.memory-shaped module), or None."""
    import torch

    module = getattr(torch.neuron, "memory", None)
    if module is None:
        try:
            module = importlib.import_module("openneuron.memory")
        except ImportError:
            return None
    return module if hasattr(module, "_record_memory_history") else None


class Collector:
    def __init__(self, history_entries: int = DEFAULT_HISTORY_ENTRIES):
        import torch

        from openneuron import _C

        self._C = _C
        self.history_entries = history_entries
        self.devices = torch.neuron.device_count()
        self.missing: dict[str, str] = {}
        self._memory = _memory_module() if history_entries > 0 else None
        self._trace_on = False
        self._dynamo = DynamoWatcher()
        self._sampler = Sampler(self.devices)
        self.started = 0.0

    def _has(self, source: str, attr: str) -> bool:
        if hasattr(self._C, attr):
            return True
        self.missing[source] = f"openneuron._C.{attr} is missing"
        return False

    def start(self) -> None:
        import torch

        import openneuron
        from openneuron.dynamo.metrics import reset_dynamo_metrics

        self.started = time.time()
        openneuron.reset_fallback_stats()
        openneuron.reset_library_stats()
        reset_dynamo_metrics()
        if self._has("observed_ops", "reset_observed_ops"):
            self._C.reset_observed_ops()
        for d in range(self.devices):
            torch.neuron.reset_peak_memory_stats(d)
        if self._has("device_trace", "_device_trace_start"):
            self._C._device_trace_start()
            self._trace_on = True
        if self._memory is not None:
            self._memory._record_memory_history(enabled="all", max_entries=self.history_entries)
        elif self.history_entries > 0:
            self.missing["memory_history"] = "torch.neuron.memory._record_memory_history is missing"
        else:
            self.missing["memory_history"] = "turned off (--history-entries 0)"
        self._dynamo.start()
        self._sampler.start()

    def stop(self) -> dict:
        """Everything collected, as plain data (see build.py for what becomes of it)."""
        import torch

        import openneuron

        ended = time.time()
        sync_error = None
        if torch.neuron.is_initialized():
            try:  # queued work counts: its device time, its frees
                for d in range(self.devices):
                    torch.neuron.synchronize(d)
            except Exception as exc:  # a failed device op; the script already saw it or not
                sync_error = f"{type(exc).__name__}: {exc}"
        self._sampler.stop()
        raw = {
            "started": self.started,
            "ended": ended,
            "devices": self.devices,
            "sync_error": sync_error,
            "fallback_stats": openneuron.fallback_stats(),
            "library_stats": openneuron.library_stats(),
            "observed_ops": None,
            "device_totals": None,
            "memory_events": None,
            "peak_allocated": [torch.neuron.max_memory_allocated(d) for d in range(self.devices)],
            "peak_reserved": [torch.neuron.max_memory_reserved(d) for d in range(self.devices)],
            "samples": {"time": self._sampler.times, "allocated": self._sampler.allocated,
                        "fallback_calls": self._sampler.fallback_calls},
            "dynamo": self._dynamo.stop(),
            "backend_metrics": torch.neuron.get_dynamo_metrics(),
            "runtime_counters": openneuron.runtime_counters(),
            "missing": self.missing,
        }
        if "observed_ops" not in self.missing and hasattr(self._C, "observed_ops"):
            raw["observed_ops"] = [dict(o) for o in self._C.observed_ops()]
        if self._trace_on:
            raw["device_totals"] = {name: (int(c), int(ns)) for name, (c, ns)
                                    in dict(self._C._device_trace_totals()).items()}
            self._C._device_trace_stop()
        if self._memory is not None:
            snapshot = self._memory._snapshot()
            self._memory._record_memory_history(enabled=None)
            raw["memory_events"] = snapshot.get("device_traces", [])
        return raw
