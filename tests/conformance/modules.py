"""PyTorch's ModuleInfo database (`common_modules.module_db`) as OpInfos the harness runs.

Each ModuleInfo becomes an OpInfo whose samples are its `module_inputs_func`'s inputs for
training=True and training=False. A sample holds the module (built on the CPU from the
constructor input, in the case's dtype, as PyTorch's `test_cpu_gpu_parity` builds it),
the forward input, and its parameters and buffers; the op calls the module through
`torch.func.functional_call`. So `classify.run_case` runs a module case unchanged: the
parameters and buffers are copied to neuron like any sample tensor, the forward outputs
are compared, updated buffers (BatchNorm's running statistics) are compared as in-place
effects, and gradients are taken with respect to the inputs *and* the parameters; native,
library, fallback, wrong and error mean what they mean for an OpInfo.
"""

from __future__ import annotations

import functools
from itertools import chain, zip_longest

import torch


class BuiltModule:
    """A sample's module; shown as its constructor call (describe_sample prints repr)."""

    __slots__ = ("module", "text")

    def __init__(self, module: torch.nn.Module, text: str):
        self.module, self.text = module, text

    def __repr__(self) -> str:
        return self.text


def call_module(built: BuiltModule, args: tuple, kwargs: dict, /, **state):
    # Parameters and buffers come from the sample (its kwargs, so that a sample's
    # description shows the forward input before them), on the sample's device.
    return torch.func.functional_call(built.module, state, args, kwargs)


def _arg_text(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"Tensor{list(x.shape)}"
    return repr(x)


def _build(module_info, module_input, dtype: torch.dtype, training: bool) -> BuiltModule:
    ctor = module_input.constructor_input
    module = module_info.module_cls(*ctor.args, **ctor.kwargs).to(dtype)
    module.train(training)
    fwd = module_input.forward_input
    if module_info.is_lazy and fwd is not None:
        with torch.no_grad():  # a lazy module's parameters take their shapes from an input
            module(*fwd.args, **fwd.kwargs)
    args = [_arg_text(a) for a in ctor.args] + [f"{k}={_arg_text(v)}"
                                                 for k, v in ctor.kwargs.items()]
    return BuiltModule(module, f"{module_info.name}({', '.join(args)})")


def _sample_inputs(module_info):
    def sample_inputs(op_info, device, dtype, requires_grad=False, **kwargs):
        from torch.testing._internal.opinfo.core import SampleInput

        per_mode = [[(training, mi) for mi in module_info.module_inputs_func(
            module_info, device=device, dtype=dtype, requires_grad=requires_grad,
            training=training)] for training in (True, False)]
        # Interleaved, so a cap on the number of samples keeps both modes.
        for training, mi in (x for x in chain.from_iterable(zip_longest(*per_mode))
                             if x is not None):
            built = _build(module_info, mi, dtype, training)
            state = {**dict(built.module.named_parameters()),
                     **dict(built.module.named_buffers())}
            fwd = mi.forward_input
            mode = "train" if training else "eval"
            yield SampleInput(built, args=(tuple(fwd.args) if fwd else (),
                                           dict(fwd.kwargs) if fwd else {}),
                              kwargs=state, name=f"{mode}: {mi.desc}" if mi.desc else mode)

    return sample_inputs


def parity_marks(module_info) -> list[str]:
    """How PyTorch marks its own CPU/accelerator parity test (test_cpu_gpu_parity) for this
    module: "skipped", "expected failure on cuda (complex32)", ... Reported beside our
    result: PyTorch itself does not expect those cases to match."""
    marks = []
    for info in module_info.decorators:
        if getattr(info, "test_name", None) != "test_cpu_gpu_parity":
            continue
        device = getattr(info, "device_type", None)
        dtypes = getattr(info, "dtypes", None)
        where = (f" on {device}" if device else "") + (
            f" ({', '.join(str(d).removeprefix('torch.') for d in dtypes)})" if dtypes else "")
        for dec in info.decorators:
            if getattr(dec, "__module__", None) != "unittest.case":  # skip / expectedFailure
                continue
            kind = "expected failure" if dec.__qualname__ == "expectedFailure" else "skipped"
            marks.append(kind + where)
    return marks


def as_opinfo(module_info):
    """The OpInfo that runs a ModuleInfo (its decorators carry the parity test's
    tolerance overrides, which classify.tolerance reads)."""
    from torch.testing._internal.opinfo.core import OpInfo

    op = OpInfo(module_info.name, op=call_module, dtypes=module_info.supported_dtypes("cpu"),
                sample_inputs_func=_sample_inputs(module_info), supports_autograd=True,
                supports_out=False, decorators=module_info.decorators)
    op.module_info = module_info
    return op


@functools.cache
def all_moduleinfos() -> dict[str, tuple[object, str]]:
    """module name ("nn.Linear") -> (OpInfo running it, "module_db")."""
    from torch.testing._internal.common_modules import module_db

    return {mi.name: (as_opinfo(mi), "module_db") for mi in module_db}
