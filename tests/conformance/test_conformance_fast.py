"""The fast conformance subset (`make test`): representative OpInfos of every op family of
issue 4, a few samples each, in this process.

Fails on: any wrong result (unless listed in families.KNOWN_WRONG, which is xfail-strict:
fixing the bug makes the test fail until the entry is removed), a case in MUST_BE_NATIVE
that no longer runs natively, and a failure of the harness itself.
The full sweep is `make conformance`.
"""

from __future__ import annotations

import pytest
import torch

from tests.conformance import classify, families, opinfos

# PyTorch's own deprecation warnings from the samples are noise here.
pytestmark = [pytest.mark.filterwarnings("ignore"), pytest.mark.usefixtures("quiet_fallback")]

ISSUE_FAMILIES = ("elementwise", "activations", "reductions", "softmax", "norms", "matmul",
                  "conv/pool/upsample", "index/gather/scatter/join/sort", "attention",
                  "random", "losses", "optimizer", "grouped_mm")


def _cases():
    ops = opinfos.all_opinfos()
    out = []
    for key, dtypes in families.FAST_SUBSET.items():
        op, _ = ops[key]
        declared = {str(d).removeprefix("torch.") for d in opinfos.cpu_dtypes(op)}
        for d in dtypes:
            if d not in declared:
                continue
            marks = []
            if (key, d) in families.KNOWN_WRONG:
                marks.append(pytest.mark.xfail(reason=families.KNOWN_WRONG[(key, d)],
                                               strict=True))
            out.append(pytest.param(key, d, id=f"{key}-{d}", marks=marks))
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key,dtype", _cases())
def test_op_conforms(key, dtype):
    op, _ = opinfos.all_opinfos()[key]
    res = classify.run_case(op, getattr(torch, dtype), max_samples=families.FAST_MAX_SAMPLES)
    where = f"{key} {dtype}: {res.detail}"
    assert res.detail.get("phase") != "harness", "the harness failed: " + where
    assert res.status != "wrong", "wrong result: " + where + \
        f"\nrepro: python -m tests.conformance.sweep --op '{key}' --dtype {dtype} " \
        f"--sample {res.detail.get('sample')}"
    if dtype in families.MUST_BE_NATIVE.get(key, ()):
        assert res.status in ("native_own", "native_library"), (
            f"{key} {dtype} must run natively but is {res.status}: fell back on "
            f"{sorted(set(res.fallback_forward) | set(res.fallback_backward))} {res.detail}")
    assert res.samples > 0 or res.status == "skipped"


def test_fast_subset_covers_every_issue_family():
    ops = opinfos.all_opinfos()
    covered = {families.family_of(ops[k][0]) for k in families.FAST_SUBSET}
    assert set(ISSUE_FAMILIES) <= covered, set(ISSUE_FAMILIES) - covered


def test_must_be_native_entries_are_in_the_fast_subset():
    for key, dtypes in families.MUST_BE_NATIVE.items():
        assert key in families.FAST_SUBSET, key
        assert set(dtypes) <= set(families.FAST_SUBSET[key]), (key, dtypes)
    for key, dtype in families.KNOWN_WRONG:
        assert dtype in families.FAST_SUBSET.get(key, ()), (key, dtype)


# The harness must be able to see what it is meant to see.


def _fake_opinfo(name, fn, dtypes=(torch.float32,)):
    from torch.testing._internal.opinfo.core import OpInfo, SampleInput

    def samples(op_info, device, dtype, requires_grad=False, **kwargs):
        yield SampleInput(torch.linspace(-2, 2, 12, dtype=dtype).reshape(3, 4)
                          .requires_grad_(requires_grad))

    return OpInfo(name, op=fn, dtypes=dtypes, sample_inputs_func=samples,
                  supports_autograd=True, supports_out=False)


def test_harness_flags_a_wrong_forward_result():
    op = _fake_opinfo("fake_off_by_eps",
                      lambda x: x * 2 + (0.01 if x.device.type == "neuron" else 0.0))
    res = classify.run_case(op, torch.float32)
    assert res.status == "wrong", res
    assert "differ" in res.detail["message"]


def test_harness_flags_a_wrong_gradient():
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.neuron = x.device.type == "neuron"
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * (3.5 if ctx.neuron else 3.0)

    res = classify.run_case(_fake_opinfo("fake_bad_grad", Bad.apply), torch.float32)
    assert res.status == "wrong" and res.detail["phase"] == "backward", res


# torch.ops.conformance_selftest.twice (conftest.py) has a CPU kernel only: on neuron it
# runs as a host library kernel, or through the CPU fallback when that path is turned off.


def test_harness_sees_host_library_kernels():
    op = _fake_opinfo("fake_cpu_only", torch.ops.conformance_selftest.twice)
    op.supports_autograd = False
    res = classify.run_case(op, torch.float32)
    assert res.status == "native_library", res
    assert res.library_ops == ["conformance_selftest::twice"], res


def test_harness_sees_the_cpu_fallback(monkeypatch):
    monkeypatch.setenv("OPENNEURON_HOST_LIBRARY", "0")
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent")
    op = _fake_opinfo("fake_cpu_only", torch.ops.conformance_selftest.twice)
    op.supports_autograd = False
    res = classify.run_case(op, torch.float32)
    assert res.status == "fallback", res
    assert "conformance_selftest::twice" in res.fallback_forward, res


def test_harness_counts_native_ops_as_native():
    res = classify.run_case(_fake_opinfo("fake_mul_add", lambda x: x * 2 + 1), torch.float32)
    assert res.status == "native_own", res
    assert res.grad_samples == 1


def test_library_ops_are_reported_apart(monkeypatch):
    monkeypatch.setattr(classify, "LIBRARY_OPS", {"aten::mul.Tensor"})
    op = _fake_opinfo("fake_mul", lambda x: x * x)
    assert classify.run_case(op, torch.float32).status == "native_library"
