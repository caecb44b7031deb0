"""Channels-last activations for inference graphs with convolutions, as Inductor's layout
optimisation does on the CPU.

oneDNN's direct convolution kernels read and write channels-last activations; a contiguous
(NCHW) activation costs a reorder in and out of every convolution. Batch norm, max pooling,
elementwise ops and the pooling family keep a channels_last input's layout on neuron, so
turning each convolution's input channels_last (a copy only where it is not already: the
model's input, or after an op that returns contiguous results) keeps the whole chain in that
layout. `view`s of activations become `reshape`s (a channels_last tensor is not always
viewable where the contiguous one the graph was traced with was), and every output gets
back the strides the graph was traced to return, so callers see eager mode's layouts.
Values do not change: only where they lie in memory.

Inference graphs only (a training graph's saved activations and its backward were traced
with their layouts), of ATen ops with static sizes, without as_strided or custom ops (which
may read memory assuming the traced layout) and without outputs that alias one another.
OPENNEURON_CHANNELS_LAST=0 turns it off.
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


def _restore_strides(t: torch.Tensor, stride: tuple[int, ...]) -> torch.Tensor:
    """`t` with the strides the graph was traced to return (a copy only when they differ)."""
    if t.stride() == tuple(stride):
        return t
    out = t.new_empty_strided(t.shape, stride)
    out.copy_(t)
    return out


def _static(val: torch.Tensor) -> bool:
    return all(isinstance(v, int) for v in (*val.shape, *val.stride()))


def _applicable(graph: torch.fx.Graph, output: torch.fx.Node) -> bool:
    """Only graphs whose every op is an ATen op that reads its inputs through their strides
    (no as_strided, no custom op that may assume contiguous memory), with static sizes, and
    whose outputs are not views of one another (restoring one would split the aliases)."""
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if not isinstance(target, torch._ops.OpOverload):
            if getattr(target, "__name__", "") != "getitem":
                return False
            continue
        if target.namespace not in ("aten", "prims") or "as_strided" in target.name():
            return False
        val = _tensor_meta(node)
        if val is not None and not _static(val):
            return False
    outs = [a for a in _flatten(output.args[0]) if isinstance(a, torch.fx.Node)]
    if len(set(outs)) != len(outs):
        return False
    return not any(isinstance(n.target, torch._ops.OpOverload) and n.target.is_view for n in outs)


def _flatten(arg) -> list:
    if isinstance(arg, (list, tuple)):
        return [x for a in arg for x in _flatten(a)]
    return [arg]


def channels_last_convolutions(gm: torch.fx.GraphModule) -> int:
    """Rewrites `gm` in place; returns how many convolutions now take channels_last inputs
    (0: the graph is left as it is)."""
    graph = gm.graph
    output = next(n for n in graph.nodes if n.op == "output")
    convs = []
    for node in graph.nodes:
        if node.op != "call_function" or node.target is not aten.convolution.default:
            continue
        x = _tensor_meta(node.args[0])
        if x is not None and x.dim() in _FORMAT and x.device.type == "neuron":
            convs.append(node)
    if not convs or not _applicable(graph, output):
        return 0
    for conv in convs:
        x = conv.args[0]
        with graph.inserting_before(conv):
            cl = graph.call_function(_as_format, (x, _FORMAT[_tensor_meta(x).dim()]))
        cl.meta = {"val": _tensor_meta(x).contiguous(memory_format=_FORMAT[_tensor_meta(x).dim()])}
        conv.replace_input_with(x, cl)
    for node in graph.nodes:
        if node.op == "call_function" and node.target in (aten.view.default, aten._unsafe_view.default):
            node.target = aten.reshape.default

    def restore(arg):
        val = _tensor_meta(arg)
        if val is None:
            return arg
        with graph.inserting_before(output):
            node = graph.call_function(_restore_strides, (arg, tuple(val.stride())))
        node.meta = dict(arg.meta)
        return node

    output.args = (torch.fx.node.map_arg(output.args[0], restore),)
    graph.lint()
    gm.recompile()
    return len(convs)
