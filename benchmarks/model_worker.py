"""Child process: every workload of one model in one dtype, across all columns.

Run by benchmarks.run in its own process, so a crash or a hang (the C++ underneath is
changing daily) costs one model's rows, not the suite. Writes one JSON line per workload
as soon as it is measured, so rows finished before a crash survive it.

    python -m benchmarks.model_worker --model gpt2 --dtype float32 --out rows.jsonl \
        --policy '{"min_reps": 3, ...}' --budget 120
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
import warnings

import torch

from . import memory, work_counts
from .columns import COLUMNS, Column, synchronize
from .timing import RepetitionPolicy, Timing, describe, measure
from .workloads import Built, Workload, workloads_of

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def quiet_libraries() -> None:
    """Progress bars and load reports would bury the log that explains a failure."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    warnings.filterwarnings("ignore")
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    try:
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
        import diffusers

        diffusers.utils.logging.set_verbosity_error()
    except ImportError:
        pass


def neuron_observations(step) -> dict:
    """One more call with the neuron counters reset: CPU fallbacks per op, program
    compilations and launches per call, and peak device memory."""
    import openneuron

    torch.neuron.synchronize()
    openneuron.reset_fallback_stats()
    before_cache = openneuron.compile_cache_stats()
    before_counters = openneuron.runtime_counters()
    peak = memory.peak_bytes("neuron", step)
    after_cache = openneuron.compile_cache_stats()
    after_counters = openneuron.runtime_counters()
    return {
        "peak_bytes": peak,
        "fallbacks": openneuron.fallback_stats(),
        "program_compiles": int(after_cache.get("misses", 0) - before_cache.get("misses", 0)),
        "launches": int(after_counters.get("launches", 0) - before_counters.get("launches", 0)),
    }


def cell_of(timing: Timing) -> dict:
    cell = {"status": "error" if timing.error else "ok", "first_call_s": timing.first_call_s,
            "samples_s": timing.samples, "calls_per_sample": timing.calls_per_sample}
    if timing.error:
        cell["error"] = timing.error
    return cell


def measure_workload(workload: Workload, dtype: torch.dtype, policy: RepetitionPolicy,
                     deadline: float, columns: list[Column]) -> dict:
    row: dict = {"model": workload.model, "workload": workload.name, "kind": workload.kind,
                 "unit": workload.unit, "units_per_call": workload.units_per_call,
                 "dtype": str(dtype).removeprefix("torch."), "cells": {}}
    started = time.monotonic()
    try:
        built: Built = workload.build(dtype)
    except Exception as exc:
        row["error"] = f"building the model failed: {describe(exc)}"
        return row
    training = workload.kind == "training"
    phases = {"build": time.monotonic() - started}

    steps, syncs = {}, {}
    for column in columns:
        reason = column.unavailable()
        if reason:
            row["cells"][column.name] = {"status": "unavailable", "reason": reason}
            continue
        try:
            steps[column.name] = column.prepare(built, training)
            syncs[column.name] = (lambda d=column.device: synchronize(d))
        except Exception as exc:
            row["cells"][column.name] = {"status": "error", "error": describe(exc)}

    phases["prepare"] = time.monotonic() - started - sum(phases.values())
    timings = measure(steps, syncs, policy, deadline=deadline)
    phases["timing"] = time.monotonic() - started - sum(phases.values())
    for name, timing in timings.items():
        row["cells"][name] = cell_of(timing)

    # Observations outside the timed region: memory, fallbacks, work counts.
    for column in columns:
        cell = row["cells"].get(column.name, {})
        if cell.get("status") != "ok":
            continue
        began = time.monotonic()
        try:
            if column.name == "cpu_eager":  # one call gives FLOPs, traffic and peak memory
                work = work_counts.count(steps[column.name], built.model, built.weight_passes)
                cell["peak_bytes"] = work.pop("peak_bytes")
                row["work"] = work
            elif column.device == "neuron":
                cell.update(neuron_observations(steps[column.name]))
            else:
                cell["peak_bytes"] = memory.peak_bytes("cpu", steps[column.name])
        except Exception as exc:
            cell["observation_error"] = describe(exc)
        phases[f"observe {column.name}"] = time.monotonic() - began
    row["seconds_spent"] = round(time.monotonic() - started, 2)
    row["phase_seconds"] = {k: round(v, 2) for k, v in phases.items()}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", choices=sorted(DTYPES), required=True)
    ap.add_argument("--workloads", default="", help="comma-separated workload names (default: all)")
    ap.add_argument("--columns", default=",".join(c.name for c in COLUMNS))
    ap.add_argument("--policy", default="{}", help="RepetitionPolicy fields as JSON")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds for all workloads")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    quiet_libraries()
    policy = RepetitionPolicy(**json.loads(args.policy))
    wanted = [c for c in COLUMNS if c.name in args.columns.split(",")]
    workloads = workloads_of(args.model)
    if args.workloads:
        names = args.workloads.split(",")
        workloads = [w for w in workloads if w.name in names]

    start = time.monotonic()
    for i, workload in enumerate(workloads):
        # Spread what is left of the budget over the workloads still to run.
        remaining = args.budget - (time.monotonic() - start)
        share = remaining / (len(workloads) - i)
        row = measure_workload(workload, DTYPES[args.dtype], policy,
                               deadline=time.monotonic() + share, columns=wanted)
        row["threads"] = torch.get_num_threads()
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
