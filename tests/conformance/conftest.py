import sys
from pathlib import Path

# `from tests.conformance import ...` from the repository root, however pytest is started.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
