import os
import subprocess
import sys

import pytest
import torch

# Tests count recordings and op-by-op calls: entries another test (or run) left on disk
# would change those counts. test_compile_disk_cache.py turns the disk cache on itself.
os.environ["OPENNEURON_DISK_CACHE"] = "0"


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (for process-wide settings like env vars)."""
    full_env = {**os.environ, **{k: str(v) for k, v in env.items()}}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=300)


@pytest.fixture
def neuron():
    assert hasattr(torch, "neuron") and torch.neuron.is_available(), "neuron device not loaded"
    return torch.device("neuron")


@pytest.fixture
def no_fallback(monkeypatch):
    """The ops under test must run natively: any CPU fallback raises. A file whose every
    test needs it says `pytestmark = pytest.mark.usefixtures("no_fallback")`."""
    monkeypatch.setenv("OPENNEURON_FALLBACK", "error")
