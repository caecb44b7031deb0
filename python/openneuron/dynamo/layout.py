"""Channels-last activations for inference graphs with convolutions, as Inductor's layout
optimisation does on the CPU.

oneDNN's direct convolution kernels read and write channels-last activations; a contiguous
(NCHW) activation costs a reorder in and out of every convolution. Batch norm, max pooling,
elementwise ops and the pooling family keep a channels_last input's layout on neuron, so
turning each convolution's input channels_last (a copy only where it is not already: the
model's input, or after an op that returns contiguous results) keeps the whole chain in that
layout. `view`s of activations become `reshape`s (a channels_last tensor is not always
viewable where the contiguous one the graph was traced with was), and each output the graph
was traced to return contiguous is made contiguous again, so callers see eager mode's
layouts. Values do not change: only where they lie in memory.

Inference graphs only (a training graph's saved activations and its backward were traced
with their layouts). OPENNEURON_CHANNELS_LAST=0 turns it off.
"""

from __future__ import annotations

import torch

from .switches import switch

aten = torch.ops.aten

_FORMAT = {4: torch.channels_last, 5: torch.channels_last_3d}


def enabled() -> bool:
    return switch("OPENNEURON_CHANNELS_LAST", "", True)


def _as_format(t: torch.Tensor, memory_format: torch.memory_format) -> torch.Tensor:
    return t.contiguous(memory_format=memory_format)  # no copy when already in that layout


def _tensor_meta(node) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def channels_last_convolutions(gm: torch.fx.GraphModule) -> int:
    """Rewrites `gm` in place; returns how many convolutions now take channels_last inputs."""
    graph = gm.graph
    convs = []
    for node in graph.nodes:
        if node.op != "call_function" or node.target is not aten.convolution.default:
            continue
        x = _tensor_meta(node.args[0])
        if x is not None and x.dim() in _FORMAT and x.device.type == "neuron":
            convs.append(node)
    if not convs:
        return 0
    for conv in convs:
        x = conv.args[0]
        with graph.inserting_before(conv):
            cl = graph.call_function(_as_format, (x, _FORMAT[_tensor_meta(x).dim()]))
        cl.meta = dict(x.meta)
        conv.replace_input_with(x, cl)
    for node in graph.nodes:
        if node.op == "call_function" and node.target in (aten.view.default, aten._unsafe_view.default):
            node.target = aten.reshape.default
    output = next(n for n in graph.nodes if n.op == "output")

    def restore(arg):
        val = _tensor_meta(arg)
        if val is None or val.dim() not in _FORMAT or not val.is_contiguous():
            return arg
        with graph.inserting_before(output):
            node = graph.call_function(_as_format, (arg, torch.contiguous_format))
        node.meta = dict(arg.meta)
        return node

    output.args = (torch.fx.node.map_arg(output.args[0], restore),)
    graph.lint()
    gm.recompile()
    return len(convs)
