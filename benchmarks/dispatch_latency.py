"""Per-op dispatch latency: tiny ops on 1-element tensors, neuron against the CPU.

On one element the kernel costs nothing, so the time per call is the framework's: Python,
the dispatcher, the device's registration, program-cache lookup and the launch. Rounds
are interleaved in one run; reports median per-call times and the ratio per op.

    python -m benchmarks.dispatch_latency [--calls 10000] [--rounds 7] [--out d.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from .columns import synchronize

# name -> fn(x, y); the result is discarded, as in a real op stream
OPS = {
    "add": lambda x, y: x + y,
    "mul": lambda x, y: x * y,
    "relu": lambda x, y: torch.relu(x),
    "sum": lambda x, y: x.sum(),
    "view (no kernel)": lambda x, y: x.view(1, 1),
}


def per_call_us(fn, x: torch.Tensor, y: torch.Tensor, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(x, y)
    synchronize(x.device.type)  # queued launches count: the device has to finish them
    return (time.perf_counter() - start) / calls * 1e6


def measure(calls: int, rounds: int) -> list[dict]:
    tensors = {d: (torch.ones(1, device=d), torch.ones(1, device=d)) for d in ("cpu", "neuron")}
    rows = []
    for name, fn in OPS.items():
        for x, y in tensors.values():
            per_call_us(fn, x, y, 1000)  # warm-up (the first call compiles the program)
        times: dict[str, list[float]] = {"cpu_eager": [], "neuron_eager": []}
        for _ in range(rounds):
            for col, (x, y) in zip(times, tensors.values()):
                times[col].append(per_call_us(fn, x, y, calls))
        rows.append({"op": name, "calls": calls, "rounds": rounds,
                     "cells": {col: {"status": "ok", "samples_s": [us * 1e-6 for us in t]}
                               for col, t in times.items()}})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", help="write the rows as JSON here")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rows = measure(args.calls, args.rounds)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows}, f)
        return
    print(f"1-element ops, {args.calls} calls x {args.rounds} interleaved rounds "
          f"(torch threads={torch.get_num_threads()})")
    for row in rows:
        cpu = statistics.median(row["cells"]["cpu_eager"]["samples_s"]) * 1e6
        neu = statistics.median(row["cells"]["neuron_eager"]["samples_s"]) * 1e6
        print(f"  {row['op']:<18} cpu {cpu:7.2f} us  neuron {neu:7.2f} us  neuron/cpu {neu / cpu:5.2f}")


if __name__ == "__main__":
    main()
