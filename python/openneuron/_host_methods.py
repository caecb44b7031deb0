"""`Tensor.apply_`, `map_` and `map2_` for neuron tensors.

PyTorch implements these three for CPU tensors only (CUDA raises "map_ is only implemented
on CPU tensors"): they call a Python function once per element, so they run on the host
whatever the device. For neuron tensors they run over CPU copies and the results are
written back, as the CPU fallback does for ops without a native kernel. Argument checks are
the CPU's: every tensor of the same type as `self` (dtype and device), else TypeError.
"""

from __future__ import annotations

import torch

_BASE = torch._C.TensorBase


def _on_neuron(t: torch.Tensor) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "neuron"


def _check_same_type(name: str, self: torch.Tensor, others: dict[str, torch.Tensor]) -> None:
    """The CPU's check and message ("map_: expected torch.FloatTensor for 'other' ...")."""
    for arg, other in others.items():
        if not isinstance(other, torch.Tensor) or other.dtype != self.dtype or \
                other.device.type != self.device.type:
            got = other.type() if isinstance(other, torch.Tensor) else type(other).__name__
            raise TypeError(f"{name}: expected {self.type()} for {arg} (got {got})")


def _check_no_grad(name: str, self: torch.Tensor) -> None:
    if self.requires_grad:  # the CPU's check and message
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. "
                           f"Use var.detach().{name}() instead.")


def _write_back(self: torch.Tensor, host: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        self.copy_(host)
    return self


def apply_(self: torch.Tensor, callable):
    if not _on_neuron(self):
        return _BASE.apply_(self, callable)
    _check_no_grad("apply_", self)
    host = self.detach().cpu()
    _BASE.apply_(host, callable)
    return _write_back(self, host)


def map_(self: torch.Tensor, tensor: torch.Tensor, callable):
    if not _on_neuron(self):
        return _BASE.map_(self, tensor, callable)
    _check_no_grad("map_", self)
    _check_same_type("map_", self, {"'other'": tensor})
    host = self.detach().cpu()
    _BASE.map_(host, tensor.detach().cpu(), callable)
    return _write_back(self, host)


def map2_(self: torch.Tensor, x: torch.Tensor, y: torch.Tensor, callable):
    if not _on_neuron(self):
        return _BASE.map2_(self, x, y, callable)
    _check_no_grad("map2_", self)
    _check_same_type("map2_", self, {"argument 'x'": x, "argument 'y'": y})
    host = self.detach().cpu()
    _BASE.map2_(host, x.detach().cpu(), y.detach().cpu(), callable)
    return _write_back(self, host)


def install() -> None:
    for fn in (apply_, map_, map2_):
        fn.__doc__ = getattr(_BASE, fn.__name__).__doc__
        setattr(torch.Tensor, fn.__name__, fn)
