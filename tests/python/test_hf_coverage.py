"""A fast sample of the architecture coverage harness (python -m openneuron.coverage)."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("transformers")

SAMPLE = ["gpt2", "llama", "qwen2"]


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_sample_architectures_generate_same_tokens_as_cpu(mode):
    """compiled: the model's forward under torch.compile(backend="neuron")."""
    proc = subprocess.run(
        [sys.executable, "-m", "openneuron.coverage.worker", "causal-lm", mode, *SAMPLE],
        capture_output=True, text=True, timeout=600)
    results = [json.loads(l) for l in proc.stdout.splitlines() if l.startswith("{")]
    assert [r["arch"] for r in results] == SAMPLE, proc.stderr[-2000:]
    for r in results:
        assert r["status"] in ("pass", "pass-with-fallback"), r
        assert r["same_tokens"] and r["max_logit_diff"] < 1e-3, r


def test_harness_classifies_a_wrong_result_as_mismatch(monkeypatch):
    """The comparison can fail: perturbing the neuron logits must give 'mismatch'."""
    import torch

    from openneuron.coverage import worker
    from openneuron.coverage.mappings import MAPPINGS

    real_run = worker._run

    def perturbed(model, inputs, mapping, pad_id):
        tokens, logits = real_run(model, inputs, mapping, pad_id)
        if next(model.parameters()).device.type == "neuron":
            logits = logits + 0.1
        return tokens, logits

    monkeypatch.setattr(worker, "_run", perturbed)
    r = worker.run_one(MAPPINGS["causal-lm"], "gpt2", compiled=False)
    assert r["status"] == "mismatch" and r["max_logit_diff"] == pytest.approx(0.1, rel=1e-3)
