"""`torch.neuron.memory`: the neuron allocator's statistics and its memory history, shaped
like `torch.cuda.memory`.

`_record_memory_history()` starts recording every allocation and free with the Python
stack that made it; `_snapshot()` returns the allocator's segments and that history in
the structure of `torch.cuda.memory._snapshot()`, so PyTorch's tools read it unchanged:
`torch.cuda._memory_viz.trace_plot(snapshot)`, `python -m torch.cuda._memory_viz
trace_plot dump_snapshot.pickle -o memory.html`, or the viewer at pytorch.org/memory_viz.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

__all__ = [
    "empty_cache", "max_memory_allocated", "memory_allocated", "memory_reserved",
    "memory_stats", "memory_summary", "reset_peak_memory_stats",
]

def _record_memory_history(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "python",
    max_entries: int = sys.maxsize,
    device: Any = None,
) -> None:
    """Starts (enabled="all" or "state") or stops (enabled=None) recording the allocator's
    events, each with the Python stack that caused it, for `_snapshot()`.

    Keeps the last `max_entries` events. Stopping discards the history. The recorder is
    process-wide: `device` is accepted for torch.cuda's signature and covers every core.
    Only Python stacks are recorded (stacks="all" records the same); `context` is
    accepted for the signature: allocations and frees always carry their stack.
    """
    if isinstance(enabled, bool):  # torch.cuda's legacy form: True / False
        enabled = "all" if enabled else None
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context must be None, 'state', 'alloc' or 'all', got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', got {stacks!r}")
    if max_entries < 0:
        raise ValueError(f"max_entries must be >= 0, got {max_entries}")
    # "state" keeps no history of events, only what the live blocks need.
    entries = 0 if enabled == "state" else max_entries
    from . import _C

    _C._memory_record_history(enabled is not None, entries)


def _snapshot(device: Any = None) -> dict[str, Any]:
    """The allocator's segments of every core, the recorded events per core and the
    allocator settings, as torch.cuda.memory._snapshot() returns them. `device` is accepted
    for torch.cuda's signature: as there, the snapshot covers all devices."""
    from . import _C

    return _C._memory_snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickles `_snapshot()` to `filename`, for `python -m torch.cuda._memory_viz` and the
    viewer at pytorch.org/memory_viz."""
    snapshot = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)


# The statistics live in torch.neuron (_device_module), which imports this module: import
# them at call time so neither import needs the other finished.


def memory_stats(device: Any = None) -> dict[str, Any]:
    from . import _device_module

    return _device_module.memory_stats(device)


def memory_allocated(device: Any = None) -> int:
    from . import _device_module

    return _device_module.memory_allocated(device)


def max_memory_allocated(device: Any = None) -> int:
    from . import _device_module

    return _device_module.max_memory_allocated(device)


def memory_reserved(device: Any = None) -> int:
    from . import _device_module

    return _device_module.memory_reserved(device)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    from . import _device_module

    return _device_module.memory_summary(device, abbreviated)


def empty_cache() -> None:
    from . import _device_module

    _device_module.empty_cache()


def reset_peak_memory_stats(device: Any = None) -> None:
    from . import _device_module

    _device_module.reset_peak_memory_stats(device)
