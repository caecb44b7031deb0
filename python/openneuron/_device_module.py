"""`torch.neuron`: the torch.cuda-shaped module of the neuron device."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from typing import Any

import torch

from . import _C
from . import memory  # noqa: F401  torch.neuron.memory, as torch.cuda.memory

sys.modules["torch.neuron.memory"] = memory

__all__ = [
    "Event", "Stream", "current_device", "current_stream", "default_stream", "device",
    "device_count", "device_of", "empty_cache", "get_amp_supported_dtype", "get_device_name",
    "get_device_properties", "get_dynamo_metrics", "get_rng_state", "get_rng_state_all", "init",
    "initial_seed", "is_available", "is_bf16_supported", "is_initialized", "manual_seed",
    "manual_seed_all", "max_memory_allocated", "max_memory_reserved", "mem_get_info",
    "memory_allocated", "memory_reserved", "memory_stats", "memory_summary",
    "reset_accumulated_memory_stats", "reset_dynamo_metrics", "reset_peak_memory_stats", "seed",
    "seed_all", "set_device", "set_rng_state", "set_rng_state_all", "set_stream", "stream",
    "synchronize",
]

# ------------------------------------------------------------------ devices


def is_available() -> bool:
    return _C.device_count() > 0


def device_count() -> int:
    return _C.device_count()


def is_initialized() -> bool:
    return _C.is_initialized()


def init() -> None:
    """Initialises the runtime (otherwise done lazily on first use)."""
    _C.init()


_lazy_init = init


def _is_in_bad_fork() -> bool:
    return _C.in_bad_fork()


def _is_compiled() -> bool:
    return True


def _get_device_index(device: Any = None, optional: bool = True) -> int:
    if device is None:
        return _C.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        return _C.current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise TypeError(f"Expected a neuron device, device index or None, got {device!r}")


def current_device() -> int:
    return _C.current_device()


def set_device(device: Any) -> None:
    _C.set_device(_get_device_index(device))


class device:
    """Context manager that changes the current neuron device."""

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _get_device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = _C.current_device()
            _C.set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0:
            _C.set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of `tensor` current (no-op for CPU tensors)."""

    def __init__(self, tensor: torch.Tensor):
        super().__init__(tensor.get_device() if tensor.device.type == "neuron" else None)


@dataclasses.dataclass(frozen=True)
class NeuronDeviceProperties:
    name: str
    platform: str
    total_memory: int
    physical_index: int
    supports_fp8: bool
    supports_bf16: bool
    supports_fp16: bool
    # Whether host code may address the device's memory directly (a virtual core's
    # memory is host memory); False under OPENNEURON_PROTECT_MEMORY=1.
    host_mapped: bool


def get_device_properties(device: Any = None) -> NeuronDeviceProperties:
    return NeuronDeviceProperties(**_C.get_device_properties(_get_device_index(device)))


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def synchronize(device: Any = None) -> None:
    """Waits for all queued work of the device; raises the first pending device error."""
    try:
        _C.synchronize(_get_device_index(device))
    finally:
        _C._flush_log()  # what the device's workers logged, e.g. the error raised here


# ------------------------------------------------------------------ streams


class Stream(torch.Stream):
    """An in-order queue of work on a neuron core (a `torch.Stream`)."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if kwargs:  # reconstruction from (stream_id, device_index, device_type)
            return super().__new__(cls, priority=priority, **kwargs)
        idx = _get_device_index(device)
        return super().__new__(cls, device=torch.device("neuron", idx), priority=priority)


class _NeuronEventType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, torch.Event) and obj.device.type == "neuron"


class Event(metaclass=_NeuronEventType):
    """A marker in a neuron stream. Constructing one returns a plain `torch.Event` on the
    neuron device: PyTorch's C++ checks of event arguments (`elapsed_time`,
    `Stream.wait_event`) accept only that exact type, never a subclass."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,
                interprocess: bool = False) -> torch.Event:
        return torch.Event(device="neuron", enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)


def current_stream(device: Any = None) -> torch.Stream:
    return torch.accelerator.current_stream(_get_device_index(device))


def default_stream(device: Any = None) -> torch.Stream:
    idx = _get_device_index(device)
    neuron_type = torch._C._autograd.DeviceType.PrivateUse1.value if hasattr(
        torch._C._autograd, "DeviceType") else 20
    return torch.Stream(stream_id=0, device_index=idx, device_type=neuron_type)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


@contextlib.contextmanager
def stream(stream: torch.Stream | None):
    """Makes `stream` current on its device for the duration of the block."""
    if stream is None:
        yield
        return
    prev = torch.accelerator.current_stream(stream.device_index)
    torch.accelerator.set_stream(stream)
    try:
        yield stream
    finally:
        torch.accelerator.set_stream(prev)


# ---------------------------------------------------------------------- RNG


def manual_seed(seed: int) -> None:
    _C.manual_seed(current_device(), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C.manual_seed(i, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> int:
    return _C.seed(current_device())


def seed_all() -> None:
    s = _C.seed(0) if device_count() else 0
    for i in range(1, device_count()):
        _C.manual_seed(i, s)


def initial_seed() -> int:
    return _C.initial_seed(current_device())


def get_rng_state(device: Any = "neuron") -> torch.Tensor:
    data = _C.get_rng_state(_get_device_index(device))
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: Any = "neuron") -> None:
    state = new_state.detach().to("cpu", torch.uint8).contiguous()
    _C.set_rng_state(_get_device_index(device), bytes(state.numpy().tobytes()))


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


# ------------------------------------------------------------------- memory
# The allocator is registered with PyTorch, so torch.accelerator's memory API
# reaches it; these are the torch.cuda-shaped names.


def memory_stats(device: Any = None) -> dict[str, Any]:
    return dict(torch.accelerator.memory_stats(_get_device_index(device)))


def memory_allocated(device: Any = None) -> int:
    return torch.accelerator.memory_allocated(_get_device_index(device))


def max_memory_allocated(device: Any = None) -> int:
    return torch.accelerator.max_memory_allocated(_get_device_index(device))


def memory_reserved(device: Any = None) -> int:
    return torch.accelerator.memory_reserved(_get_device_index(device))


def max_memory_reserved(device: Any = None) -> int:
    return torch.accelerator.max_memory_reserved(_get_device_index(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_get_device_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_get_device_index(device))


def empty_cache() -> None:
    """Returns cached, unused device memory of every core to the host."""
    if is_initialized():
        torch.accelerator.empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the core's capacity."""
    return torch.accelerator.get_memory_info(_get_device_index(device))


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A table of the allocator's statistics, like torch.cuda.memory_summary."""
    idx = _get_device_index(device)
    s = memory_stats(idx)
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Non-releasable memory", "inactive_split_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Reserved segments", "segment", False),
    ]
    pools = [("all", "")] if abbreviated else [("all", ""), ("small_pool", "  from small pool"),
                                                ("large_pool", "  from large pool")]
    props = get_device_properties(idx)
    width = 78
    lines = ["=" * width,
             f" neuron:{idx} memory summary ({props.platform}, capacity {_fmt(props.total_memory)})",
             "-" * width,
             f" {'Metric':<30}{'Cur Usage':>12}{'Peak Usage':>12}{'Tot Alloc':>12}{'Tot Freed':>12}",
             "-" * width]
    for title, key, is_bytes in rows:
        for pool, suffix in pools:
            vals = [s.get(f"{key}.{pool}.{f}", 0) for f in ("current", "peak", "allocated", "freed")]
            cells = [_fmt(v) if is_bytes else str(v) for v in vals]
            label = title if not suffix else suffix
            lines.append(f" {label:<30}" + "".join(f"{c:>12}" for c in cells))
        lines.append("-" * width)
    lines.append(f" Allocation retries: {s.get('num_alloc_retries', 0)}   "
                 f"OOMs: {s.get('num_ooms', 0)}")
    lines.append("=" * width)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- amp


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16, torch.float32]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


# ---------------------------------------------------------------- compile


def get_dynamo_metrics() -> dict[str, Any]:
    """torch.compile(backend="neuron") counters: graphs by kind, ops, backend seconds,
    graphs run with CPU-fallback ops (see openneuron.dynamo)."""
    from .dynamo import metrics

    return metrics.get_dynamo_metrics()


def reset_dynamo_metrics() -> None:
    from .dynamo import metrics

    metrics.reset_dynamo_metrics()


# ---------------------------------------------------------------- legacy storage classes

# torch.neuron.FloatStorage etc., as torch.cuda.FloatStorage (see _legacy_storage.py).
from ._legacy_storage import storage_classes as _storage_classes  # noqa: E402

_LEGACY_STORAGE = _storage_classes()
globals().update(_LEGACY_STORAGE)
torch._storage_classes.update(_LEGACY_STORAGE.values())  # torch.is_storage, serialization
