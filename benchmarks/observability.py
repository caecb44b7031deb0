"""What watching costs: the model suite's neuron eager rows timed plain, under
`openneuron report`'s collector and under an active torch.profiler, in one run.

    python -m benchmarks.observability [--models gpt2,llama] [--reps 5] [--calls 3]

Each repetition times every mode once, in a rotating order, so a slow drift of the
machine hits all modes alike; a mode is switched on before its sample and off after it,
outside the timed region (the profiler's post-processing at exit is not charged, as a
user would see it: a slower step, then the trace). Per workload the ratio is the
median over repetitions of (mode time / plain time of the same repetition); the suite's
number is the geometric mean over workloads. The goals (issue 19): report ≤ 1.10,
profiler ≤ 1.25.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from .columns import NEURON_EAGER, synchronize
from .model_worker import quiet_libraries
from .timing import _timed, describe
from .workloads import all_workloads

MODES = ("plain", "report", "profiler")


@contextlib.contextmanager
def mode_active(mode: str):
    if mode == "plain":
        yield
    elif mode == "report":
        from openneuron.report.collect import Collector

        collector = Collector()
        collector.start()
        try:
            yield
        finally:
            collector.stop()
    else:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            yield


def measure_row(workload, reps: int, calls: int) -> dict:
    built = workload.build(torch.float32)
    step = NEURON_EAGER.prepare(built, workload.kind == "training")
    sync = lambda: synchronize("neuron")  # noqa: E731
    for _ in range(2):  # programs compiled, memory cached
        step()
    sync()
    times: dict[str, list[float]] = {m: [] for m in MODES}
    for rep in range(reps):
        order = MODES[rep % len(MODES):] + MODES[:rep % len(MODES)]
        for mode in order:
            with mode_active(mode):
                step()  # the mode's own first call (a profiler's first op) is not timed
                sync()
                times[mode].append(_timed(step, sync, calls))
    ratios = {m: statistics.median(t / p for t, p in zip(times[m], times["plain"]))
              for m in MODES if m != "plain"}
    return {"workload": workload.key, "kind": workload.kind,
            "plain_s": statistics.median(times["plain"]), "ratios": ratios}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="", help="comma-separated model families (default: all)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=3, help="calls per timed sample")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/observability.json"))
    args = ap.parse_args()
    quiet_libraries()
    wanted = set(filter(None, args.models.split(",")))
    rows, started = [], time.monotonic()
    print(f"{'workload':44s} {'plain ms':>9s} {'report':>7s} {'profiler':>8s}")
    for workload in all_workloads():
        if wanted and workload.model not in wanted:
            continue
        try:
            row = measure_row(workload, args.reps, args.calls)
        except Exception as exc:  # one broken model must not stop the suite
            print(f"{workload.key:44s} error: {describe(exc)}")
            continue
        rows.append(row)
        r = row["ratios"]
        print(f"{workload.key:44s} {row['plain_s'] * 1e3:9.2f} {r['report']:7.3f} {r['profiler']:8.3f}",
              flush=True)
    if not rows:
        sys.exit("no workload measured")
    suite = {m: statistics.geometric_mean([row["ratios"][m] for row in rows])
             for m in MODES if m != "plain"}
    print(f"{'suite (geometric mean)':44s} {'':9s} {suite['report']:7.3f} {suite['profiler']:8.3f}")
    print(f"({len(rows)} workloads, {time.monotonic() - started:.0f} s)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "suite": suite, "reps": args.reps,
                                    "calls": args.calls}, indent=1))


if __name__ == "__main__":
    main()
