import sys
from pathlib import Path

# `from tests.conformance import ...` from the repository root, however pytest is started.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import pytest  # noqa: E402
import torch  # noqa: E402  (after the path set-up above)


@pytest.fixture
def quiet_fallback(monkeypatch):
    # Fallbacks are still counted (that is how the harness tells native from fallback).
    monkeypatch.setenv("OPENNEURON_FALLBACK", "silent")


# An op with a CPU kernel only, for the harness self-tests of test_conformance_fast.py and
# test_modules_fast.py: on neuron it runs as a host library kernel (the CPU kernel in place
# on device memory), or through the CPU fallback when that path is turned off.
_SELFTEST = torch.library.Library("conformance_selftest", "DEF")
_SELFTEST.define("twice(Tensor x) -> Tensor")
_SELFTEST.impl("twice", lambda x: x * 2, "CPU")
