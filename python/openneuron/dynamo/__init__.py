"""`torch.compile(backend="neuron")`.

Dynamo captures the Python program as FX graphs; AOTAutograd splits each into a
forward and a backward graph of ATen ops; this package checks every op of those graphs
has a native lowering on neuron and runs them through the same lowerings as eager mode,
so compiled and eager numerics agree by construction.

The backend is found by name through the `torch_dynamo_backends` entry point: importing
this package is never needed. What it does not do yet (whole-graph programs with fusion
across ops, a persistent program cache) is listed in docs/compile.md.
"""

from .backend import NeuronCompileError, neuron_backend
from .metrics import get_dynamo_metrics, reset_dynamo_metrics

__all__ = ["NeuronCompileError", "get_dynamo_metrics", "neuron_backend", "reset_dynamo_metrics"]
