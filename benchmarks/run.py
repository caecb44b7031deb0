"""Runs the benchmark suite and writes the results JSON and docs/BENCHMARKS.md.

    python -m benchmarks.run --profile quick|full [--prices prices.toml] [--models gpt2,llama]

Every section runs in its own child process (a crash costs a section, not the suite) with
the same thread count for the neuron device and its CPU reference. Results go to
benchmarks/results/<profile>.json and latest.json; logs of the children to build/bench/logs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from openneuron.tools import bench_report, bench_results

from . import machine
from .profiles import MODEL_WEIGHT, PROFILES, Profile, describe_repetitions

REPO = Path(__file__).resolve().parent.parent
LOGS = REPO / "build" / "bench" / "logs"
RESULTS = REPO / "benchmarks" / "results"
# Seconds kept back per compile-row workload (cold + warm process), which runs last.
COMPILE_RESERVE_S = 70.0
# A model worker late in a run still gets this long: less would only kill it mid-compile.
MIN_MODEL_BUDGET_S = 30.0


def child_env(threads: int) -> dict[str, str]:
    """Environment of every measured process: equal threads, quiet, offline."""
    env = dict(os.environ)
    env.update({
        "OPENNEURON_INTRAOP_THREADS": str(threads),  # neuron's kernel pool
        "OMP_NUM_THREADS": str(threads),  # PyTorch's pool (CPU reference, CPU fallback)
        "OPENNEURON_FALLBACK": "silent",  # counted, not printed: the report lists them
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
    })
    return env


class Runner:
    def __init__(self, profile: Profile, threads: int, log_dir: Path):
        self.profile = profile
        self.threads = threads
        self.env = child_env(threads)
        self.log_dir = log_dir
        self.start = time.monotonic()

    def remaining(self) -> float:
        return self.profile.total_budget_s - (time.monotonic() - self.start)

    def child(self, name: str, module: str, args: list[str], timeout: float) -> str | None:
        """Runs `python -m module args`; returns an error message or None."""
        log = self.log_dir / f"{name}.log"
        cmd = [sys.executable, "-m", module, "--threads", str(self.threads), *args]
        began = time.monotonic()
        print(f"[bench] {name} ...", flush=True)
        with open(log, "w") as f:
            try:
                proc = subprocess.run(cmd, cwd=REPO, env=self.env, stdout=f, stderr=subprocess.STDOUT,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                return f"timed out after {timeout:.0f} s (log: {log.relative_to(REPO)})"
        print(f"[bench] {name} done in {time.monotonic() - began:.0f} s", flush=True)
        if proc.returncode != 0:
            return f"exited with {proc.returncode} (log: {log.relative_to(REPO)})"
        return None

    def json_section(self, name: str, module: str, args: list[str], timeout: float) -> dict:
        out = self.log_dir / f"{name}.json"
        out.unlink(missing_ok=True)
        error = self.child(name, module, [*args, "--out", str(out)], timeout)
        if error or not out.exists():
            return {"error": error or "no output"}
        return json.loads(out.read_text())

    def dispatch(self) -> dict:
        p = self.profile
        return self.json_section("dispatch", "benchmarks.dispatch_latency",
                                 ["--calls", str(p.dispatch_calls), "--rounds", str(p.dispatch_rounds)],
                                 timeout=120)

    def ops(self) -> dict:
        return self.json_section("ops", "benchmarks.ops", ["--dtypes", self.profile.ops_dtypes,
                                                           "--reps", str(self.profile.ops_reps)],
                                 timeout=300)

    def collectives(self) -> dict:
        p = self.profile
        return self.json_section("collectives", "benchmarks.collectives",
                                 ["--reps", str(p.collective_reps), "--max-mib", str(p.collective_max_mib)],
                                 timeout=600)

    def compile(self) -> dict:
        args = [a for w in self.profile.compile_workloads for a in ("--workload", w)]
        return self.json_section("compile", "benchmarks.compile_time", [*args, "--timeout", "240"],
                                 timeout=300 * len(self.profile.compile_workloads))

    def models(self, models: list[str], policy: dict) -> list[dict]:
        from .workloads import workloads_of

        rows: list[dict] = []
        jobs = [(m, d) for m in models for d in self.profile.dtypes]
        for i, (model, dtype) in enumerate(jobs):
            # Each job's share of what is left, by weight, keeping the compile row's reserve.
            weights = [MODEL_WEIGHT.get(m, 1.0) for m, _ in jobs[i:]]
            reserve = COMPILE_RESERVE_S * len(self.profile.compile_workloads)
            left = max(self.remaining() - reserve, 0.0)
            budget = max(left * weights[0] / sum(weights), MIN_MODEL_BUDGET_S)
            out = self.log_dir / f"models-{model}-{dtype}.jsonl"
            out.unlink(missing_ok=True)
            error = self.child(f"models-{model}-{dtype}", "benchmarks.model_worker",
                               ["--model", model, "--dtype", dtype, "--policy", json.dumps(policy),
                                "--budget", f"{budget:.0f}", "--out", str(out)],
                               timeout=2 * budget + 120)
            done = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
            rows.extend(done)
            finished = {r["workload"] for r in done}
            for w in workloads_of(model):
                if w.name not in finished:  # the worker died or timed out before this row
                    rows.append({"model": model, "workload": w.name, "kind": w.kind, "unit": w.unit,
                                 "units_per_call": w.units_per_call, "dtype": dtype, "cells": {},
                                 "error": f"not measured: worker {error or 'stopped early'}"})
        return rows


def run(profile: Profile, threads: int, models: list[str], prices: str | None,
        docs: Path, command: str) -> dict:
    from .columns import COLUMNS

    log_dir = LOGS / profile.name
    log_dir.mkdir(parents=True, exist_ok=True)
    runner = Runner(profile, threads, log_dir)
    results: dict = {
        "schema": bench_results.SCHEMA_VERSION,
        "profile": profile.name,
        "command": command,
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine.describe(threads),
        "settings": {"repetitions": describe_repetitions(profile),
                     "model_policy": profile.model_policy, "budget_s": profile.total_budget_s},
        "columns": [{"name": c.name, "label": c.label, "reference": c.reference} for c in COLUMNS],
        # (column, reference) pairs reported as speed-ups; Inductor vs CPU eager for context.
        "comparisons": [["neuron_eager", "cpu_eager"], ["inductor_cpu", "cpu_eager"],
                        ["neuron_compiled", "inductor_cpu"]],
        "section_errors": {},
    }
    for section, measure in (("dispatch", runner.dispatch), ("ops", runner.ops),
                             ("collectives", runner.collectives)):
        results[section] = measure()
        if "error" in results[section]:
            results["section_errors"][section] = results[section]["error"]
    results["models"] = runner.models(models, profile.model_policy)
    if profile.compile_workloads:
        results["compile"] = runner.compile()
        if "error" in results["compile"]:
            results["section_errors"]["compile"] = results["compile"]["error"]
    else:
        results["compile"] = {"not_in_profile": "measured by `make bench` (full profile)"}

    results["duration_s"] = round(time.monotonic() - runner.start, 1)
    results["load_average_at_end"] = machine.load_average()
    bench_results.summarize(results)
    for name in (f"{profile.name}.json", "latest.json"):
        bench_results.save(results, RESULTS / name)
    results["results_path"] = f"benchmarks/results/{profile.name}.json"
    bench_report.write(results, docs, prices)
    return results


def print_summary(results: dict) -> None:
    print(f"\n[bench] {results['profile']}: {results['duration_s']:.0f} s; speed-ups "
          "(reference time / column time, median of interleaved pairs):")
    for row in results["models"]:
        ratios = ", ".join(f"{col} {s['median']:.2f}x vs {s['vs']}"
                           for col, s in row.get("speedups", {}).items())
        print(f"  {row['model']:<8} {row['workload']:<34} {row['dtype']:<9} "
              f"{ratios or row.get('error') or 'no ratio'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    ap.add_argument("--models", help="comma-separated subset of the profile's models")
    ap.add_argument("--threads", type=int, default=0, help="default: all logical CPUs")
    ap.add_argument("--prices", help="price file: adds the cost table to the report")
    ap.add_argument("--docs", type=Path, default=REPO / "docs" / "BENCHMARKS.md")
    args = ap.parse_args()
    profile = PROFILES[args.profile]
    models = args.models.split(",") if args.models else profile.models
    threads = args.threads or os.cpu_count() or 1
    command = "make bench" if profile.name == "full" else "make bench-quick"
    results = run(profile, threads, models, args.prices, args.docs, command)
    print_summary(results)
    print(f"[bench] wrote benchmarks/results/{profile.name}.json and {args.docs}")


if __name__ == "__main__":
    main()
