"""The OpInfos the harness runs: PyTorch's op_db, its _foreach_* databases, and a few
OpInfos of our own for issue-4 ops that have none in PyTorch (_fused_adamw_, _fused_adam_,
torch._grouped_mm)."""

from __future__ import annotations

import copy
import functools

import torch


def _fused_adam_samples(op_info, device, dtype, requires_grad=False, **kwargs):
    from torch.testing._internal.common_utils import make_tensor
    from torch.testing._internal.opinfo.core import SampleInput

    shapes = [(7,), (4, 5), (2, 3, 8), ()]
    for amsgrad, maximize, weight_decay in [(False, False, 0.0), (True, False, 1e-2),
                                            (False, True, 1e-2)]:
        mk = functools.partial(make_tensor, device=device, dtype=dtype)
        params = [mk(s, low=-2, high=2) for s in shapes]
        grads = [mk(s, low=-1, high=1) for s in shapes]
        exp_avgs = [mk(s, low=-0.1, high=0.1) for s in shapes]
        exp_avg_sqs = [mk(s, low=0, high=0.01) for s in shapes]
        max_sqs = [mk(s, low=0.005, high=0.02) for s in shapes] if amsgrad else []
        steps = [torch.tensor(3.0, device=device) for _ in shapes]
        yield SampleInput(params, args=(grads, exp_avgs, exp_avg_sqs, max_sqs, steps),
                          kwargs=dict(lr=1e-2, beta1=0.9, beta2=0.999,
                                      weight_decay=weight_decay, eps=1e-8, amsgrad=amsgrad,
                                      maximize=maximize),
                          name=f"amsgrad={amsgrad} maximize={maximize} wd={weight_decay}")


def _call_fused(fn):
    def call(*args, **kwargs):
        fn(*args, **kwargs)  # updates params and state in place; returns None
    return call


def _grouped_mm_samples(op_info, device, dtype, requires_grad=False, **kwargs):
    from torch.testing._internal.common_utils import make_tensor
    from torch.testing._internal.opinfo.core import SampleInput

    mk = functools.partial(make_tensor, device=device, dtype=dtype, requires_grad=requires_grad,
                           low=-1, high=1)
    # Mixture-of-experts layout: tokens (M, K) grouped by offs, one (K, N) weight per group.
    offs = torch.tensor([5, 12, 16], device=device, dtype=torch.int32)
    yield SampleInput(mk((16, 16)), args=(mk((3, 16, 8)),), kwargs={"offs": offs},
                      name="2d x 3d, offs")
    offs = torch.tensor([0, 8, 24, 24], device=device, dtype=torch.int32)
    yield SampleInput(mk((24, 8)), args=(mk((4, 8, 16)),), kwargs={"offs": offs},
                      name="2d x 3d, empty groups")
    # Batched: (G, M, K) x (G, K, N).
    yield SampleInput(mk((3, 5, 16)), args=(mk((3, 16, 8)),), name="3d x 3d")


def _inplace_foreach(op):
    variant = copy.copy(op)
    inplace = op.inplace_variant

    def call(*args, **kwargs):
        inplace(*args, **kwargs)  # returns None; the updated inputs are compared

    variant.name = op.name + "_"
    variant.op = call
    variant.supports_autograd = False
    return variant


@functools.cache
def extra_opinfos() -> list:
    from torch.testing._internal.opinfo.core import OpInfo

    floats = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
    ops = []
    for name in ("_fused_adamw_", "_fused_adam_"):
        ops.append(OpInfo(name, op=_call_fused(getattr(torch, name)), dtypes=floats,
                          sample_inputs_func=_fused_adam_samples, supports_autograd=False,
                          supports_out=False))
    ops.append(OpInfo("_grouped_mm", op=torch._grouped_mm,
                      dtypes=(torch.float32, torch.bfloat16),
                      sample_inputs_func=_grouped_mm_samples, supports_autograd=True,
                      supports_out=False))
    return ops


@functools.cache
def all_opinfos() -> dict[str, tuple[object, str]]:
    """full name ("name" or "name.variant") -> (OpInfo, source: op_db | foreach | extra)."""
    from torch.testing._internal import common_methods_invocations as cmi

    out: dict[str, tuple[object, str]] = {}

    def add(op, source):
        key = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        out.setdefault(key, (op, source))

    for op in cmi.op_db:
        add(op, "op_db")
    for db in ("foreach_unary_op_db", "foreach_binary_op_db", "foreach_pointwise_op_db",
               "foreach_reduce_op_db", "foreach_other_op_db"):
        for op in getattr(cmi, db, []):
            add(op, "foreach")
            if op.inplace_variant is not None:
                # Optimizers call the in-place forms (_foreach_mul_, _foreach_lerp_, ...):
                # run them too, compared through the tensors they update.
                add(_inplace_foreach(op), "foreach")
    for op in extra_opinfos():
        add(op, "extra")
    return out


def cpu_dtypes(op) -> list[torch.dtype]:
    """The dtypes the OpInfo declares for the CPU, in a stable order."""
    order = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.complex64,
             torch.complex128, torch.complex32, torch.int8, torch.int16, torch.int32,
             torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.bool]
    declared = set(op.supported_dtypes("cpu"))
    return [d for d in order if d in declared] + sorted(
        (d for d in declared if d not in order), key=str)
