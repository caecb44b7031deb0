"""Interleaved timing: every repetition times each contender once, in a rotating order,
so slow drifts of a shared machine hit all of them alike and paired ratios stay fair."""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class RepetitionPolicy:
    warmup: int = 2  # untimed calls after the (separately timed) first call
    min_reps: int = 3
    max_reps: int = 7
    budget_s: float = 20.0  # target time for all timed repetitions of one row
    min_sample_s: float = 0.0  # repeat a fast call inside one sample until this long
    # Quiet time before each sample. libgomp's workers (PyTorch's CPU threads) busy-wait
    # ~10 ms after every parallel region: without a pause the contender timed next shares
    # the cores with the previous one's spinning threads and is charged for them.
    settle_s: float = 0.0


@dataclass
class Timing:
    first_call_s: float | None = None  # includes compilation (program cache, Inductor)
    samples: list[float] = field(default_factory=list)  # seconds per call, one per repetition
    calls_per_sample: int = 1
    error: str | None = None


def _timed(step: Callable[[], object], sync: Callable[[], None], calls: int) -> float:
    gc.collect()
    gc.disable()  # a collection in the middle of one sample would be charged to it alone
    try:
        start = time.perf_counter()
        for _ in range(calls):
            step()
        sync()
        return (time.perf_counter() - start) / calls
    finally:
        gc.enable()


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:400]


def measure(steps: dict[str, Callable[[], object]], syncs: dict[str, Callable[[], None]],
            policy: RepetitionPolicy, deadline: float | None = None) -> dict[str, Timing]:
    """Times each named step; a step that raises is recorded and dropped, not fatal."""
    results = {name: Timing() for name in steps}
    live = dict(steps)
    # Objects alive now (models, modules of the libraries) are never garbage: freezing them
    # keeps the collection before each sample short, whatever the process has loaded.
    gc.collect()
    gc.freeze()
    try:
        _measure_frozen(results, live, syncs, policy, deadline)
    finally:
        gc.unfreeze()
    return results


def _measure_frozen(results: dict[str, Timing], live: dict[str, Callable[[], object]],
                    syncs: dict[str, Callable[[], None]], policy: RepetitionPolicy,
                    deadline: float | None) -> None:
    """First call, warm-up, then interleaved repetitions; fills `results` in place."""

    def run(name: str, calls: int) -> float | None:
        try:
            return _timed(live[name], syncs[name], calls)
        except Exception as exc:  # one broken contender must not stop the others
            results[name].error = describe(exc)
            del live[name]
            return None

    for name in list(live):
        results[name].first_call_s = run(name, 1)
    per_call: dict[str, float] = {}
    for name in list(live):
        for _ in range(max(policy.warmup, 1)):
            t = run(name, 1)
            if t is None:
                break
            per_call[name] = t
        # One call timed alone includes a wake-up (the device's worker, PyTorch's OpenMP
        # team) that a sample of many calls pays once: size samples from a batch instead.
        calls = 2
        while name in live and policy.min_sample_s > 0:
            t = run(name, calls)
            # A stall of the shared machine can stretch one batch tenfold, which would
            # size the samples at a handful of calls dominated by wake-ups: a batch long
            # enough to stop on is timed up to three times and the fastest counts.
            for _ in range(2):
                if t is None or t * calls < policy.min_sample_s / 4:
                    break
                again = run(name, calls)
                t = None if again is None else min(t, again)
            if t is None:
                break
            per_call[name] = t
            if t * calls >= policy.min_sample_s / 4:
                break
            calls *= 4
    if not live:
        return

    for name in live:
        if policy.min_sample_s > 0 and per_call[name] < policy.min_sample_s:
            results[name].calls_per_sample = math.ceil(policy.min_sample_s / max(per_call[name], 1e-7))
    rep_cost = sum(per_call[n] * results[n].calls_per_sample for n in live)
    reps = int(policy.budget_s / max(rep_cost, 1e-9))
    reps = max(policy.min_reps, min(policy.max_reps, reps))

    names = list(live)
    for rep in range(reps):
        if deadline is not None and rep >= policy.min_reps and time.monotonic() > deadline:
            break
        order = names[rep % len(names):] + names[:rep % len(names)]
        for name in order:
            if name in live:
                if policy.settle_s > 0:
                    time.sleep(policy.settle_s)
                t = run(name, results[name].calls_per_sample)
                if t is not None:
                    results[name].samples.append(t)
