"""Printing neuron tensors formats a host copy.

PyTorch's formatter runs a dozen small ops (masked_select, isfinite, ...) on the
tensor to choose a format; on a device those are launches or CPU fallbacks. Like
PyTorch does for XLA, we format a CPU copy instead: one synchronising copy.
"""

import torch
import torch._tensor_str as _tensor_str

_original = _tensor_str._tensor_str


def _tensor_str_via_host(self, indent):
    if self.device.type == "neuron":
        self = self.cpu()
    return _original(self, indent)


def install() -> None:
    if _tensor_str._tensor_str is not _tensor_str_via_host:
        _tensor_str._tensor_str = _tensor_str_via_host
