"""OpenNeuron: a `neuron` PyTorch device backed by virtual NeuronCores.

`import torch` loads this package through the `torch.backends` entry point, so user
code never imports it: `torch.ones(3, device="neuron")` just works. With
TORCH_DEVICE_BACKEND_AUTOLOAD=0, `import openneuron` loads it explicitly.
"""

from __future__ import annotations

import warnings

__version__ = "0.1.0"

__all__ = [
    "compile_cache_stats",
    "fallback_stats",
    "is_loaded",
    "load_error",
    "reset_fallback_stats",
    "library_stats",
    "reset_library_stats",
    "runtime_counters",
]

_loaded = False
_load_error: str | None = None


def _load() -> None:
    """Registers the device with PyTorch. Idempotent."""
    global _loaded
    if _loaded:
        return
    # Importing torch runs its backend autoload, which may load us re-entrantly
    # (when this package was imported first, e.g. `python -m openneuron...`).
    import torch

    if _loaded:
        return

    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", "neuron"):
        raise RuntimeError(
            f"another PrivateUse1 backend ('{current}') is already registered in this process; "
            "PyTorch allows one, so the 'neuron' device is not available"
        )
    if current != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")

    from . import _C  # noqa: F401  (loading it registers the device's C++ kernels and hooks)
    from . import _device_module, _printing

    torch._register_device_module("neuron", _device_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    # Trainium's native low-precision type: autocast(device_type="neuron") uses bf16.
    torch.set_autocast_dtype("neuron", torch.bfloat16)
    _printing.install()
    from . import _autograd_exit, _compat, _host_methods, _loss_defaults

    _compat.install()  # module.to("neuron") keeps Parameter objects, as on CUDA
    _host_methods.install()  # Tensor.apply_/map_/map2_ run on the host, as for CPU tensors
    _loss_defaults.install()  # chunked linear_cross_entropy: the CPU's accumulation
    _autograd_exit.install()  # no abort at exit right after a backward pass
    from . import distributed

    distributed.register()  # the c10d backend "neuron"
    # A rank started by torchrun works on core LOCAL_RANK without calling set_device
    # (Accelerate reads torch.neuron.current_device() and never sets it).
    index = distributed.default_device_index(_C.device_count())
    if index is not None:
        _C.set_device(index)
    _loaded = True


def _autoload() -> None:
    """Entry point called by `import torch`. Never breaks `import torch`.

    Importing this package already tried to load; a failure was reported then.
    """
    if not _loaded and _load_error is None:
        _try_load()


def _try_load() -> None:
    global _load_error
    try:
        _load()
    except Exception as exc:  # a broken backend must not break `import torch`
        _load_error = f"{type(exc).__name__}: {exc}"
        warnings.warn(f"OpenNeuron: the neuron device is not available: {_load_error}", stacklevel=2)


def is_loaded() -> bool:
    return _loaded


def load_error() -> str | None:
    """Why loading failed, or None."""
    return _load_error


def fallback_stats() -> dict[str, int]:
    """Calls per ATen op that ran on the CPU because neuron has no native kernel for it."""
    from . import _C

    return dict(_C.fallback_stats())


def reset_fallback_stats() -> None:
    from . import _C

    _C.reset_fallback_stats()


def library_stats() -> dict[str, int]:
    """Calls per ATen op that ran through a host library kernel: no lowering of our own, so
    PyTorch's CPU kernel ran in place on the device memory (no copies of the inputs)."""
    from . import _C

    return dict(_C.library_stats())


def reset_library_stats() -> None:
    from . import _C

    _C.reset_library_stats()


def compile_cache_stats() -> dict[str, float]:
    """Program cache: hits, misses (= compilations), entries, capacity (the most it
    keeps, OPENNEURON_PROGRAM_CACHE_ENTRIES), evictions, total compile seconds."""
    from . import _C

    return dict(_C.compile_cache_stats())


def runtime_counters() -> dict[str, int]:
    """Launches, instructions executed, copies and synchronizations since start."""
    from . import _C

    return dict(_C.runtime_counters())


_try_load()
# After loading, so _C's log sink exists.
from . import _logging  # noqa: E402

_logging.configure_from_env()
