"""Data collection while the script runs: counters reset at the start, read at the end.

No per-op Python hook: the runtime and the bridge count fallbacks, host-library calls,
downcasts, device time and allocations in C++ (`openneuron._C`); Dynamo records its own
compilations; a sampler thread reads memory every ~20 ms. The memory history (for the
top allocation sites) is the one optional source: `--history-entries 0` turns it off.
"""

from __future__ import annotations

import time

from .dynamo_events import DynamoWatcher
from .sampler import Sampler

# Allocation events kept by the memory history (a ring: the oldest are dropped).
DEFAULT_HISTORY_ENTRIES = 200_000


class Collector:
    def __init__(self, history_entries: int = DEFAULT_HISTORY_ENTRIES):
        import torch

        from openneuron import _C, memory

        self._C = _C
        self._memory = memory
        self.history_entries = history_entries
        self.devices = torch.neuron.device_count()
        self._dynamo = DynamoWatcher()
        self._sampler = Sampler(self.devices)
        self.started = 0.0

    def start(self) -> None:
        import torch

        import openneuron
        from openneuron.dynamo.metrics import reset_dynamo_metrics

        self.started = time.time()
        openneuron.reset_fallback_stats()
        openneuron.reset_library_stats()
        reset_dynamo_metrics()
        self._C.reset_observed_ops()
        for d in range(self.devices):
            torch.neuron.reset_peak_memory_stats(d)
        self._C._device_trace_start()
        if self.history_entries > 0:
            self._memory._record_memory_history(enabled="all", max_entries=self.history_entries)
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
            "observed_ops": [dict(o) for o in self._C.observed_ops()],
            "device_totals": {name: (int(c), int(ns)) for name, (c, ns)
                              in dict(self._C._device_trace_totals()).items()},
            "memory_events": None,  # None: the memory history was turned off
            "peak_allocated": [torch.neuron.max_memory_allocated(d) for d in range(self.devices)],
            "peak_reserved": [torch.neuron.max_memory_reserved(d) for d in range(self.devices)],
            "samples": {"time": self._sampler.times, "allocated": self._sampler.allocated,
                        "fallback_calls": self._sampler.fallback_calls},
            "dynamo": self._dynamo.stop(),
            "backend_metrics": torch.neuron.get_dynamo_metrics(),
            "runtime_counters": openneuron.runtime_counters(),
        }
        self._C._device_trace_stop()
        if self.history_entries > 0:
            snapshot = self._memory._snapshot()
            self._memory._record_memory_history(enabled=None)
            raw["memory_events"] = snapshot.get("device_traces", [])
        return raw
