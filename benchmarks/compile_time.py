"""First-call compile time and warm-cache start, compiled backends against Inductor.

For each workload the parent runs two fresh processes that share a new, empty on-disk
cache: the first compiles from nothing (cold), the second finds the first one's artefacts
(warm start). Each child reports its first call (compilation included), a steady call,
and the wall time from process spawn to the first result.

    python -m benchmarks.compile_time --workload "gpt2/forward b1 s128" --out c.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from .timing import describe

# backend -> column name in the report; "neuron" becomes measurable when it is registered.
BACKENDS = {"inductor": "inductor_cpu", "neuron": "neuron_compiled"}


def child(workload_key: str, backend: str, dtype_name: str, out: str) -> None:
    """Runs in the measured process: build, compile on first call, then steady calls."""
    spawned = float(os.environ["BENCH_SPAWNED_AT"])
    import torch

    from .columns import BY_NAME
    from .model_worker import DTYPES, quiet_libraries
    from .workloads import all_workloads

    quiet_libraries()
    imported = time.time()
    workload = next(w for w in all_workloads() if w.key == workload_key)
    built = workload.build(DTYPES[dtype_name])
    column = BY_NAME[BACKENDS[backend]]
    result: dict = {"import_s": imported - spawned}
    reason = column.unavailable()
    if reason:
        result.update(status="unavailable", reason=reason)
    else:
        from .columns import synchronize

        step = column.prepare(built, workload.kind == "training")
        start = time.perf_counter()
        step()
        synchronize(column.device)
        result["first_call_s"] = time.perf_counter() - start
        result["spawn_to_first_result_s"] = time.time() - spawned
        steady = []
        for _ in range(3):
            start = time.perf_counter()
            step()
            synchronize(column.device)
            steady.append(time.perf_counter() - start)
        result["steady_call_s"] = statistics.median(steady)
        result["phases"] = phases(backend, result["first_call_s"] - result["steady_call_s"])
        result["status"] = "ok"
        counters = torch._dynamo.utils.counters["inductor"]
        result["inductor_fx_cache"] = {"hits": counters["fxgraph_cache_hit"],
                                       "misses": counters["fxgraph_cache_miss"]}
    with open(out, "w") as f:
        json.dump(result, f)


# Dynamo's table of compile phases (torch._dynamo.utils.compilation_time_metrics): the
# backend's graph compilers, all of them and those that run inside the Dynamo compile (a
# training graph's backward compiles later, at the first backward()).
_BACKEND_KEYS = {
    "inductor": (("compile_fx_inner",), ("compile_fx.<locals>.fw_compiler_base",)),
    "neuron": (("neuron_compile.forward", "neuron_compile.backward", "neuron_compile.inference",
                "neuron_program_compile"),
               ("neuron_compile.forward", "neuron_compile.inference")),
}


def phases(backend: str, first_call_extra_s: float) -> dict:
    """The first call's extra time over a steady call, split: Dynamo's tracing, AOTAutograd
    (tracing, partitioning), the backend's own compiler (Inductor: compile_fx_inner; neuron:
    the graph check and our compiler turning recordings into programs) and the rest (for
    neuron the op-by-op recording run, for both the first run's cold caches)."""
    from torch._dynamo.utils import compilation_time_metrics as t

    def total(*keys: str) -> float:
        return sum(sum(t.get(k, [])) for k in keys)

    all_keys, inside_keys = _BACKEND_KEYS[backend]
    user_compiler = total("OutputGraph.call_user_compiler")
    dynamo = total("_compile.compile_inner") - user_compiler
    backend_s = total(*all_keys)
    aot = max(0.0, user_compiler - total(*inside_keys))
    return {"dynamo_s": dynamo, "aot_autograd_s": aot, "backend_compiler_s": backend_s,
            "other_s": first_call_extra_s - dynamo - aot - backend_s}


def run_child(workload_key: str, backend: str, dtype: str, cache_dir: str, timeout: float,
              env: dict) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = tmp.name
    child_env = {**env, "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache_dir, "inductor"),
                 "TORCH_NEURONX_NEFF_CACHE_DIR": os.path.join(cache_dir, "neuron"),
                 "BENCH_SPAWNED_AT": repr(time.time())}
    cmd = [sys.executable, "-m", "benchmarks.compile_time", "--child", "--workload", workload_key,
           "--backend", backend, "--dtype", dtype, "--out", out]
    try:
        proc = subprocess.run(cmd, env=child_env, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            return {"status": "error", "error": f"exit {proc.returncode}: {tail}"[:400]}
        with open(out) as f:
            return json.load(f)
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"timed out after {timeout:.0f} s"}
    except Exception as exc:
        return {"status": "error", "error": describe(exc)}
    finally:
        if os.path.exists(out):
            os.unlink(out)


def measure(workload_key: str, dtype: str, timeout: float) -> dict:
    row: dict = {"workload": workload_key, "dtype": dtype, "cells": {}}
    env = dict(os.environ)
    from .columns import BY_NAME

    for backend, column in BACKENDS.items():
        reason = BY_NAME[column].unavailable()
        if reason:  # no process to spawn for a backend that does not exist yet
            row["cells"][column] = {"status": "unavailable", "reason": reason}
            continue
        with tempfile.TemporaryDirectory(prefix="bench-compile-") as cache_dir:
            cold = run_child(workload_key, backend, dtype, cache_dir, timeout, env)
            if cold.get("status") != "ok":
                row["cells"][column] = cold
                continue
            warm = run_child(workload_key, backend, dtype, cache_dir, timeout, env)
            row["cells"][column] = {"status": "ok", "cold": cold, "warm": warm}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", action="append", required=True, help="model/workload key")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--backend", choices=sorted(BACKENDS))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--threads", type=int, default=0, help="ignored: children inherit "
                    "OMP_NUM_THREADS and OPENNEURON_INTRAOP_THREADS from the environment")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.child:
        child(args.workload[0], args.backend, args.dtype, args.out)
        return
    rows = [measure(key, args.dtype, args.timeout) for key in args.workload]
    with open(args.out, "w") as f:
        json.dump({"rows": rows}, f)


if __name__ == "__main__":
    main()
