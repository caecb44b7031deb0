"""Per-op dispatch latency: `x + y` on 1-element tensors, neuron against the CPU.

Interleaved rounds in one run; reports the median per-call time of each device and the
ratio. Usage: python benchmarks/dispatch_latency.py [--calls 10000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def per_call_us(x: torch.Tensor, y: torch.Tensor, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        z = x + y
    if z.device.type == "neuron":
        torch.neuron.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    tensors = {d: (torch.ones(1, device=d), torch.ones(1, device=d)) for d in ("cpu", "neuron")}
    for d, (x, y) in tensors.items():
        per_call_us(x, y, 1000)  # warm-up (first call compiles the program)
    times: dict[str, list[float]] = {"cpu": [], "neuron": []}
    for _ in range(args.rounds):
        for d, (x, y) in tensors.items():
            times[d].append(per_call_us(x, y, args.calls))
    cpu, neu = statistics.median(times["cpu"]), statistics.median(times["neuron"])
    print(f"x + y, 1 element, {args.calls} calls x {args.rounds} interleaved rounds "
          f"(torch threads={torch.get_num_threads()})")
    print(f"  cpu    median {cpu:6.2f} us/call  (spread {min(times['cpu']):.2f}-{max(times['cpu']):.2f})")
    print(f"  neuron median {neu:6.2f} us/call  (spread {min(times['neuron']):.2f}-{max(times['neuron']):.2f})")
    print(f"  neuron / cpu = {neu / cpu:.2f}")


if __name__ == "__main__":
    main()
