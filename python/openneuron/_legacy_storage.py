"""`torch.neuron.FloatStorage` and the other legacy typed-storage classes, as torch.cuda
defines its own: `Tensor.storage_type()` of a neuron tensor looks them up in the device
module (torch.storage's _get_legacy_storage_class), `isinstance(t.storage(),
torch.neuron.FloatStorage)` holds for a neuron tensor's storage, and
`torch.neuron.FloatStorage(n)` allocates on the device. PyTorch reads the device of such a
class from its module's last name, so each class says it lives in `torch.neuron`."""

from __future__ import annotations

import torch
from torch._utils import classproperty
from torch.storage import _LegacyStorage, _dtype_to_storage_type_map, _warn_typed_storage_removal


class _NeuronLegacyStorage(_LegacyStorage):
    @classmethod
    def from_buffer(cls, *args, **kwargs):
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: not available for neuron storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: not available for neuron storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: not available for neuron storage")


def _storage_class(name: str, dtype: torch.dtype) -> type:
    def public_dtype(cls):
        _warn_typed_storage_removal()
        return dtype
    return type(name, (_NeuronLegacyStorage,), {
        "__module__": "torch.neuron", "__qualname__": name,
        "dtype": classproperty(public_dtype), "_dtype": classproperty(lambda cls: dtype)})


def storage_classes() -> dict[str, type]:
    """Name -> class, for every dtype PyTorch has a legacy storage class for."""
    return {name: _storage_class(name, dtype) for dtype, name in _dtype_to_storage_type_map().items()}
