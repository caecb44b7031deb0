"""Keeps `module.to("neuron")` in place, as `module.to("cuda")` is.

`nn.Module._apply` (behind `.to`, `.neuron()`, `.cpu()`) swaps a parameter's data in place,
keeping the same `Parameter` object, only when `torch._has_compatible_shallow_copy_type(old,
new)` is true. PyTorch's default answer knows CPU, CUDA, XPU, ... but not PrivateUse1, so
moving a model between the CPU and neuron replaced every parameter with a new object: an
optimizer built before the move (Accelerate's `prepare(model, optimizer)`, and a great deal
of user code) kept stepping the old CPU tensors and the model silently stopped learning.

Neuron tensors are plain strided `TensorImpl`s with device storage, exactly like CPU ones,
so a shallow copy between the two is what CUDA does. This registers that answer for the
neuron dispatch keys (the op is called once per parameter per move, never per kernel).
"""

from __future__ import annotations

import torch

_lib: torch.library.Library | None = None
_PLAIN_DEVICES = ("cpu", "neuron")


def _plain_dense(t: torch.Tensor) -> bool:
    return (t.layout == torch.strided and t.device.type in _PLAIN_DEVICES and not t.is_quantized
            and not t.is_nested)


def _has_compatible_shallow_copy_type(self: torch.Tensor, other: torch.Tensor) -> bool:
    if torch._C._dispatch_keys(self) == torch._C._dispatch_keys(other):
        return True
    return _plain_dense(self) and _plain_dense(other)


def install() -> None:
    global _lib
    if _lib is not None:
        return
    lib = torch.library.Library("aten", "IMPL")  # noqa: TOR901 (kept alive in _lib)
    for key in ("PrivateUse1", "AutogradPrivateUse1"):
        lib.impl("_has_compatible_shallow_copy_type", _has_compatible_shallow_copy_type, key)
    _lib = lib
