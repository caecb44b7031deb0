"""Eager mode on a busy machine: the model suite's eager rows (neuron against CPU eager)
timed on a quiet machine and with one busy competing process, in one run.

    python -m benchmarks.under_load [--models gpt2,llama] [--reps 5] [--calls 3]

The competitor is a child process spinning on one core. It is paused (SIGSTOP) for
the quiet samples and resumed (SIGCONT) for the loaded ones, so both states run in the
same processes with the same warm caches. Each repetition has a quiet and a loaded
phase (alternating which comes first); a phase starts with 0.6 s of untimed neuron work,
so its samples measure the steady state of a quiet or a busy machine, then times CPU
eager and neuron eager (alternating which comes first), each after an untimed call.
Per workload, the neuron/CPU speed ratio is
the median over repetitions of (CPU time / neuron time); the figure of merit is
loaded ratio / quiet ratio (1.0: the load slows neuron exactly as much as the CPU;
issue 20's goal: ≥ 0.9). Besides the model suite, a loop of small elementwise ops
("small ops") shows the handoff between the Python thread and the device stream,
which contention hurts most.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from .columns import CPU_EAGER, NEURON_EAGER, synchronize
from .model_worker import quiet_libraries
from .timing import _timed, describe
from .workloads import all_workloads

STATES = ("quiet", "loaded")
SETTLE_S = 0.6
COLUMNS = (CPU_EAGER, NEURON_EAGER)


class Competitor:
    """One busy process, paused unless a loaded sample runs."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        os.kill(self.proc.pid, signal.SIGSTOP)

    @contextlib.contextmanager
    def running(self, on: bool):
        os.kill(self.proc.pid, signal.SIGCONT if on else signal.SIGSTOP)
        yield
        os.kill(self.proc.pid, signal.SIGSTOP)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def settle(step, sync) -> None:
    """Neuron work for SETTLE_S before a state's samples: the runtime judges contention
    from its stream workers (docs/architecture.md) and keeps a judgement up to 500 ms."""
    end = time.perf_counter() + SETTLE_S
    while True:
        step()
        sync()
        if time.perf_counter() >= end:
            return


def small_ops_step(device: str):
    x = torch.randn(64, 64, device=device)

    def step():
        y = x
        for _ in range(50):
            y = (y * 0.5 + 1.0).relu()
        return y

    return step


def steps_of(workload) -> dict[str, object]:
    if workload is None:
        return {c.name: small_ops_step(c.device) for c in COLUMNS}
    built = workload.build(torch.float32)
    training = workload.kind == "training"
    return {c.name: c.prepare(built, training) for c in COLUMNS}


def measure_row(name: str, workload, competitor: Competitor, reps: int, calls: int) -> dict:
    steps = steps_of(workload)
    syncs = {c.name: (lambda d=c.device: synchronize(d)) for c in COLUMNS}
    for c in COLUMNS:  # programs compiled, memory cached
        for _ in range(2):
            steps[c.name]()
        syncs[c.name]()
    times = {(s, c.name): [] for s in STATES for c in COLUMNS}
    names = [c.name for c in COLUMNS]
    for rep in range(reps):
        for state in STATES[rep % 2:] + STATES[:rep % 2]:
            with competitor.running(state == "loaded"):
                settle(steps["neuron_eager"], syncs["neuron_eager"])
                for col in names[rep % 2:] + names[:rep % 2]:
                    steps[col]()
                    syncs[col]()
                    times[(state, col)].append(_timed(steps[col], syncs[col], calls))
    speed = {s: statistics.median(cpu / neuron for cpu, neuron in
                                  zip(times[(s, "cpu_eager")], times[(s, "neuron_eager")]))
             for s in STATES}
    return {"workload": name, "speed": speed, "retained": speed["loaded"] / speed["quiet"],
            "ms": {f"{s}/{c}": statistics.median(v) * 1e3 for (s, c), v in times.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="", help="comma-separated model families (default: all)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=3, help="calls per timed sample")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/under_load.json"))
    args = ap.parse_args()
    quiet_libraries()
    wanted = set(filter(None, args.models.split(",")))
    work = [("small ops (50 x 3 elementwise, 64x64)", None)]
    work += [(w.key, w) for w in all_workloads() if not wanted or w.model in wanted]
    competitor = Competitor()
    rows, started = [], time.monotonic()
    print(f"{'workload':44s} {'quiet':>7s} {'loaded':>7s} {'retained':>8s}")
    try:
        for name, workload in work:
            try:
                row = measure_row(name, workload, competitor, args.reps, args.calls)
            except Exception as exc:  # one broken model must not stop the suite
                print(f"{name:44s} error: {describe(exc)}")
                continue
            rows.append(row)
            print(f"{name:44s} {row['speed']['quiet']:6.2f}x {row['speed']['loaded']:6.2f}x "
                  f"{row['retained']:8.3f}", flush=True)
    finally:
        competitor.close()
    if not rows:
        sys.exit("no workload measured")
    suite = statistics.geometric_mean([r["retained"] for r in rows])
    worst = min(rows, key=lambda r: r["retained"])
    print(f"{'suite (geometric mean)':44s} {'':7s} {'':7s} {suite:8.3f}")
    print(f"worst: {worst['workload']} {worst['retained']:.3f}; {len(rows)} workloads, "
          f"{time.monotonic() - started:.0f} s, {os.cpu_count()} host cores")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "retained_geomean": suite, "reps": args.reps,
                                    "calls": args.calls}, indent=1))


if __name__ == "__main__":
    main()
