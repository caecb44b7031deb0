"""Which ops of an ATen FX graph have no native lowering on neuron, and where the user's
code called them."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch
import torch.fx


@dataclass(frozen=True)
class MissingLowering:
    op: str  # "aten::name.overload"
    source: str  # the user's source line that produced it ("" when unknown)

    def __str__(self) -> str:
        return f"{self.op}" + (f" (from {self.source})" if self.source else "")


# Ops whose meaning is about storages or devices: the host library never runs them
# (csrc/torch/host_library.cpp, changes_storage).
_STORAGE_OPS = ("aten::set_", "aten::resize", "aten::_copy_from", "aten::_pin_memory",
                "aten::is_pinned", "aten::record_stream")


# A kernel under any of these keys serves neuron tensors without the CPU fallback.
_NATIVE_KEYS = ("PrivateUse1", "CompositeExplicitAutograd", "CompositeImplicitAutograd")


def host_library_enabled() -> bool:
    return os.environ.get("OPENNEURON_HOST_LIBRARY", "") != "0"


def _out_variant(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The out= overload of a functional op (same arguments plus out tensors)."""
    names = [a.name for a in op._schema.arguments]
    packet = op.overloadpacket
    for overload in packet.overloads():
        cand = getattr(packet, overload)
        args = cand._schema.arguments
        if any(a.is_out for a in args) and [a.name for a in args if not a.is_out] == names:
            return cand
    return None


@functools.cache
def _kernel_kind(op: torch._ops.OpOverload) -> str:
    name = op.name()
    has = functools.partial(torch._C._dispatch_has_kernel_for_dispatch_key, name)
    if any(map(has, _NATIVE_KEYS)):
        return "native"  # our lowering, or a device-generic composite of other ops
    if has("CompositeExplicitAutogradNonFunctional"):
        # A structured op's generated wrapper: it runs the out= variant's kernel.
        out = _out_variant(op)
        return _kernel_kind(out) if out is not None else "native"
    if has("CPU") and not name.startswith(_STORAGE_OPS):
        return "library"  # PyTorch's CPU kernel, run in place on device memory
    return "fallback"


def kernel_kind(op: torch._ops.OpOverload) -> str:
    """How neuron runs the op: "native" (a neuron kernel, or a device-generic composite),
    "library" (PyTorch's CPU kernel in place on device memory, OPENNEURON_HOST_LIBRARY) or
    "fallback" (copied to the CPU and back). A native kernel may still decline inputs it
    does not cover (a dtype); those calls are seen at run time (backend.py)."""
    kind = _kernel_kind(op)
    if kind == "library" and not host_library_enabled():
        return "fallback"
    return kind


def _op_nodes(gm: torch.fx.GraphModule):
    """ATen op nodes of the graph and of the subgraphs of its higher-order ops."""
    for mod in gm.modules():
        if isinstance(mod, torch.fx.GraphModule):
            for node in mod.graph.nodes:
                if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                    yield node


def _touches_neuron(node: torch.fx.Node) -> bool:
    def on_neuron(v) -> bool:
        return isinstance(v, torch.Tensor) and v.device.type == "neuron"

    vals = [node.meta.get("val")]
    vals += [a.meta.get("val") for a in node.all_input_nodes]
    for v in vals:
        items = v if isinstance(v, (list, tuple)) else [v]
        if any(on_neuron(x) for x in items):
            return True
    return False


def user_source_line(node: torch.fx.Node) -> str:
    """'file:line: code' of the innermost frame of the node's stack trace outside PyTorch
    itself (torch.nn.functional calls the op on behalf of the line that matters)."""
    trace = node.meta.get("stack_trace") or ""
    lines = trace.rstrip().splitlines()
    frames = []
    for i, raw in enumerate(lines):
        head = raw.strip()
        if head.startswith("File "):
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            parts = head.split(",")
            path = parts[0][len("File "):].strip().strip('"')
            line = parts[1].strip().removeprefix("line ") if len(parts) > 1 else "?"
            frames.append((path, f"{path}:{line}: {code}"))
    outside = [text for path, text in frames if f"{os.sep}torch{os.sep}" not in path]
    return (outside or [text for _, text in frames] or [""])[-1]


def missing_lowerings(gm: torch.fx.GraphModule) -> list[MissingLowering]:
    """The graph's ops on neuron tensors that would run through the CPU fallback, in
    graph order, each (op, source line) once."""
    found: dict[tuple[str, str], MissingLowering] = {}
    for node in _op_nodes(gm):
        if kernel_kind(node.target) != "fallback" or not _touches_neuron(node):
            continue
        m = MissingLowering(node.target.name(), user_source_line(node))
        found.setdefault((m.op, m.source), m)
    return list(found.values())


def count_ops(gm: torch.fx.GraphModule) -> int:
    """ATen ops in the graph and its subgraphs."""
    return sum(1 for _ in _op_nodes(gm))


def library_ops(gm: torch.fx.GraphModule) -> list[str]:
    """The graph's ops that run through the host library (no lowering of our own)."""
    return [n.target.name() for n in _op_nodes(gm)
            if kernel_kind(n.target) == "library" and _touches_neuron(n)]


def _polynomial(v) -> bool:
    if not isinstance(v, torch.SymInt):
        return True
    expr = v.node.expr
    return not expr.free_symbols or expr.is_polynomial(*expr.free_symbols) is True


def non_polynomial_size(gm: torch.fx.GraphModule) -> str | None:
    """The first node whose sizes, strides, storage offset or int value Dynamo derives from
    its size symbols by floor division, modulo, min, max or the like (None if none does):
    such a graph's recordings must not be extrapolated from a few sizes (whole_graph.py)."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for x in val if isinstance(val, (list, tuple)) else [val]:
            if isinstance(x, torch.Tensor):
                try:
                    items = [*x.shape, *x.stride(), x.storage_offset()]
                except RuntimeError:  # layouts without strides
                    items = list(x.shape)
            else:
                items = [x]
            if not all(_polynomial(i) for i in items):
                return node.name
    return None
