"""Gives `neuron` the CPU's defaults for the chunked `F.linear_cross_entropy`.

`LinearCrossEntropyOptions()` resolves its "auto" accumulation policy and dtype per device
type from a table that knows "cuda" and "cpu"; any other device gets the fallback, which
accumulates bfloat16/float16 logits and gradients in the input dtype ("compact") and so
answers a few units in the last place away from what the same call gives on the CPU. A
virtual NeuronCore runs its kernels on the host exactly as the CPU does, with native
float32 accumulation, so it takes the CPU's entries: "accurate" accumulation in float32
and the same chunk sizes. (A Trainium backend would pick its own entries here.)
"""

from __future__ import annotations

import torch


def install() -> None:
    try:
        from torch.nn.modules import linear_cross_entropy_options as lce
    except ImportError:  # a torch without linear_cross_entropy: nothing to configure
        return
    table = getattr(lce, "_AUTO_DEFAULTS", None)
    options = getattr(lce, "LinearCrossEntropyOptions", None)
    if not isinstance(table, dict) or options is None:
        return
    for dtype in (torch.bfloat16, torch.float16):
        if ("cpu", dtype) in table:
            table.setdefault(("neuron", dtype), table[("cpu", dtype)])

    resolve = options.__dict__.get("_resolve_auto_acc_dtype")
    if not isinstance(resolve, staticmethod) or getattr(resolve.__func__, "_openneuron", False):
        return
    cpu_rule = resolve.__func__

    def _resolve_auto_acc_dtype(dtype, device):
        if device is not None and device.type == "neuron":
            device = torch.device("cpu")
        return cpu_rule(dtype, device)

    _resolve_auto_acc_dtype._openneuron = True
    options._resolve_auto_acc_dtype = staticmethod(_resolve_auto_acc_dtype)
