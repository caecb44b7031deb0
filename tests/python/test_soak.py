"""The soak (soak.py) briefly: allocate/free across streams, eager ops, compiled graphs with
changing shapes, and 2-rank collectives, after which each process's RSS, open file
descriptors, threads and device memory are back where they stood after the warm-up.
Longer: `python tests/python/soak.py --seconds 1800 --seed N`."""

import json
import subprocess
import sys
from pathlib import Path

import torch

SOAK = Path(__file__).with_name("soak.py")
# About 60 s of wall time on 2 cores: the single-process worker and the 2 ranks run at once,
# each warming up, then 5 s of random rounds before the baseline and 30 s measured.
CI_ARGS = ["--seconds", "30", "--warmup", "5", "--checkpoint", "10", "--seed", "0"]
WORKERS = ("single", "rank 0", "rank 1")
# Enough iterations that a leak of a little per iteration shows (runs here do 5-20x more).
MIN_ITERATIONS = {"alloc": 300, "eager": 80, "compiled": 80, "collectives": 500}


def results(stdout: str) -> dict[str, dict]:
    """Each worker's RESULT line, parsed: who -> {base, end, iterations, ...}."""
    out = {}
    for line in stdout.splitlines():
        who, sep, rest = line.partition(": RESULT ")
        if sep:
            out[who] = json.loads(rest)
    return out


def test_soak_comes_back_to_its_baseline():
    proc = subprocess.run([sys.executable, str(SOAK), *CI_ARGS], capture_output=True,
                          text=True, timeout=300)
    log = "\n".join(line for line in proc.stdout.splitlines() if ": RESULT " not in line)
    assert proc.returncode == 0, f"{log}\n--- stderr ---\n{proc.stderr[-6000:]}"
    found = results(proc.stdout)
    assert sorted(found) == sorted(WORKERS), log
    for who in WORKERS:
        assert f"{who}: ok" in proc.stdout, log
        for phase, n in found[who]["iterations"].items():
            assert n >= MIN_ITERATIONS[phase], f"{who}: only {n} {phase} iterations\n{log}"
