"""The fast ModuleInfo subset (`make test`): representative modules of PyTorch's module_db,
forward and backward (inputs and parameters) on neuron against the CPU, a few samples each,
in this process (tests/conformance/modules.py runs them through classify.run_case).

Fails on: a wrong result (unless in families.MODULE_KNOWN_WRONG, strict xfail), a module of
MODULE_MUST_BE_NATIVE that no longer runs natively, a case whose gradients were never
compared, and a failure of the harness itself. The full sweep: `make conformance`
(`python -m tests.conformance.sweep --modules`).
"""

from __future__ import annotations

import pytest
import torch

from tests.conformance import classify, families, modules, opinfos, report

# PyTorch's own deprecation warnings from the samples are noise here.
pytestmark = [pytest.mark.filterwarnings("ignore"), pytest.mark.usefixtures("quiet_fallback")]


def _cases():
    out = []
    for key, dtypes in families.MODULE_FAST_SUBSET.items():
        for d in dtypes:
            marks = []
            if (key, d) in families.MODULE_KNOWN_WRONG:
                marks.append(pytest.mark.xfail(reason=families.MODULE_KNOWN_WRONG[(key, d)],
                                               strict=True))
            out.append(pytest.param(key, d, id=f"{key}-{d}", marks=marks))
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key,dtype", _cases())
def test_module_conforms(key, dtype):
    op, _ = modules.all_moduleinfos()[key]
    res = classify.run_case(op, getattr(torch, dtype),
                            max_samples=families.MODULE_FAST_MAX_SAMPLES)
    where = f"{key} {dtype}: {res.detail}"
    assert res.detail.get("phase") != "harness", "the harness failed: " + where
    assert res.status != "wrong", "wrong result: " + where + \
        f"\nrepro: python -m tests.conformance.sweep --modules --op '{key}' --dtype {dtype} " \
        f"--sample {res.detail.get('sample')}"
    if dtype in families.MODULE_MUST_BE_NATIVE.get(key, ()):
        assert res.status in ("native_own", "native_library"), (
            f"{key} {dtype} must run natively but is {res.status}: fell back on "
            f"{sorted(set(res.fallback_forward) | set(res.fallback_backward))} {res.detail}")
    assert res.samples > 0 and res.grad_samples > 0, res


def test_every_moduleinfo_is_a_case():
    from torch.testing._internal.common_modules import module_db

    db = modules.all_moduleinfos()
    assert len(db) == len(module_db)
    assert all("float32" in {str(d).removeprefix("torch.") for d in opinfos.cpu_dtypes(op)}
               for op, _ in db.values())


def test_module_subset_entries_exist():
    db = modules.all_moduleinfos()
    for key, dtypes in families.MODULE_MUST_BE_NATIVE.items():
        assert set(dtypes) <= set(families.MODULE_FAST_SUBSET.get(key, ())), key
    for key in families.MODULE_FAST_SUBSET:
        assert key in db, key
    for key, dtype in families.MODULE_KNOWN_WRONG:
        assert dtype in families.MODULE_FAST_SUBSET.get(key, ()), (key, dtype)


# The harness must see, in a module, what it is meant to see.


class _WrongWeightGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        ctx.neuron = x.device.type == "neuron"
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum(0) * (1.5 if ctx.neuron else 1.0)


class _Scale(torch.nn.Module):
    def __init__(self, bad_grad=False, bad_buffer=False, cpu_kernel=False):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 2.0, 4))
        self.register_buffer("steps", torch.zeros(()))
        self.bad_grad, self.bad_buffer, self.cpu_kernel = bad_grad, bad_buffer, cpu_kernel

    def forward(self, x):
        if self.cpu_kernel:  # conftest.py's op with a CPU kernel only
            return torch.ops.conformance_selftest.twice(x)
        if self.training:
            self.steps.add_(2.0 if self.bad_buffer and x.device.type == "neuron" else 1.0)
        return _WrongWeightGrad.apply(x, self.weight) if self.bad_grad else x * self.weight


def _scale_op(**ctor):
    from torch.testing._internal.common_modules import FunctionInput, ModuleInfo, ModuleInput

    def inputs(module_info, device, dtype, requires_grad, training, **kwargs):
        x = torch.linspace(-1, 1, 12, device=device, dtype=dtype).reshape(3, 4)
        return [ModuleInput(FunctionInput(**ctor),
                            forward_input=FunctionInput(x.requires_grad_(requires_grad)))]

    return modules.as_opinfo(ModuleInfo(_Scale, module_inputs_func=inputs))


def test_harness_compares_parameter_gradients():
    assert classify.run_case(_scale_op(), torch.float32).status == "native_own"
    res = classify.run_case(_scale_op(bad_grad=True), torch.float32)
    assert res.status == "wrong" and res.detail["phase"] == "backward", res


def test_harness_compares_updated_buffers():
    res = classify.run_case(_scale_op(bad_buffer=True), torch.float32)
    assert res.status == "wrong" and "after the call" in res.detail["message"], res
    assert res.detail["input"].startswith("[train]"), res  # eval mode leaves it alone


def test_harness_sees_a_modules_library_kernels_and_fallbacks(monkeypatch):
    op = _scale_op(cpu_kernel=True)
    op.supports_autograd = False  # the self-test op has no derivative
    res = classify.run_case(op, torch.float32)
    assert res.status == "native_library", res
    assert res.library_ops == ["conformance_selftest::twice"], res
    monkeypatch.setenv("OPENNEURON_HOST_LIBRARY", "0")
    res = classify.run_case(op, torch.float32)
    assert res.status == "fallback", res
    assert "conformance_selftest::twice" in res.fallback_forward, res


def test_report_keeps_each_sweeps_part(tmp_path):
    page = tmp_path / "op-coverage.md"
    ops = {"meta": {}, "opinfos": {}, "cases": []}
    mods = {"meta": {"database": "module_db"}, "opinfos": {}, "cases": []}
    report.write(page, ops)
    report.write(page, mods)
    report.write(page, ops)  # an OpInfo sweep re-renders its part, keeps the other
    text = page.read_text()
    assert text.count(report.MODULES_BEGIN) == 1 and text.count("# Op coverage") == 1
    assert text.index(report.MODULES_END) < text.index("## How it is measured")
