"""Peak memory of one call, as each device's allocator sees it, above what was live before.

The neuron device has its own allocator statistics (exact after a synchronize). The CPU has
none, so its peak is replayed from the profiler's allocation events: both figures count
tensor bytes, not process RSS (which the caching allocators would make meaningless).
"""

from __future__ import annotations

from typing import Callable

import torch


def _neuron_peak(step: Callable[[], object]) -> int:
    torch.neuron.synchronize()
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    step()
    torch.neuron.synchronize()
    return int(torch.neuron.max_memory_allocated() - base)


def cpu_allocation_trace(step: Callable[[], object]) -> list[int]:
    """Signed byte counts of the CPU allocations and frees during one call, in order."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = [e for e in prof.profiler.kineto_results.events()
              if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
    events.sort(key=lambda e: e.start_ns())
    return [int(e.nbytes()) for e in events]


def peak_of(trace: list[int]) -> int:
    live = peak = 0
    for delta in trace:
        live += delta
        peak = max(peak, live)
    return peak


def peak_bytes(device: str, step: Callable[[], object]) -> int:
    if device == "neuron":
        return _neuron_peak(step)
    return peak_of(cpu_allocation_trace(step))
