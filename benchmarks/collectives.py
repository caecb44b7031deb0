"""Collective bandwidth on 2 ranks on this host: the neuron c10d backend against Gloo.

The parent starts `torchrun --standalone --nproc_per_node=2` on this module (`--worker`);
the ranks initialise with backend="cpu:gloo,neuron:neuron", so the same processes run
every collective on neuron tensors (the "neuron" backend, shared memory) and on CPU tensors
(Gloo), taking turns per repetition. Each rank gets half the host threads (torchrun's
LOCAL_WORLD_SIZE does the same for neuron's cores). Rank 0 also measures single-thread
memcpy bandwidth (torch CPU copy_ of 32 MiB, torch.set_num_threads(1)) in the same
repetitions: the ceiling a CPU-memory transport is held against.

Bus bandwidth follows NCCL-tests (n ranks, size = the full tensor, the gathered one for
all_gather, the input for reduce_scatter):
    all_reduce                              size x 2(n-1)/n / time
    all_gather_into_tensor, reduce_scatter  size x (n-1)/n  / time
Medians over repetitions, warm-up excluded; a neuron collective's time includes its
completion (torch.neuron.synchronize() after each call).

    python -m benchmarks.collectives --out coll.json [--max-mib 64] [--reps 5] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORLD = 2
OPS = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor")
MEMCPY_BYTES = 32 << 20
# Latency-bound small messages: repeat a call until a sample lasts about this long.
SAMPLE_BYTES = 16 << 20
MAX_ITERS = 200
NOT_BUILT = "not available: the c10d backend 'neuron' is not registered or not built"


def bus_factor(op: str, n: int) -> float:
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def sizes_bytes(max_mib: int) -> list[int]:
    """1 KiB ... max_mib MiB, powers of 2 (the full tensor's size)."""
    sizes, size = [], 1024
    while size <= max_mib * 1024 * 1024:
        sizes.append(size)
        size *= 2
    return sizes


# ------------------------------------------------------------------ worker (one rank)


def _make_call(op: str, size: int, device, n: int):
    import torch
    import torch.distributed as dist

    numel = size // 4
    if op == "all_reduce":
        t = torch.ones(numel, device=device)
        return lambda: dist.all_reduce(t)
    if op == "all_gather_into_tensor":
        out = torch.empty(numel, device=device)
        inp = torch.ones(numel // n, device=device)
        return lambda: dist.all_gather_into_tensor(out, inp)
    if op == "reduce_scatter_tensor":
        inp = torch.ones(numel, device=device)
        out = torch.empty(numel // n, device=device)
        return lambda: dist.reduce_scatter_tensor(out, inp)
    raise ValueError(op)


def _time_calls(call, iters: int, device, cpu_group) -> float:
    """Seconds per call; ranks start together (a barrier on a Gloo-only group, which
    blocks in a socket rather than spinning while the other rank works)."""
    import torch
    import torch.distributed as dist

    neuron = device.type == "neuron"
    dist.barrier(group=cpu_group)
    start = time.perf_counter()
    for _ in range(iters):
        call()
        if neuron:
            torch.neuron.synchronize()
    return (time.perf_counter() - start) / iters


def _memcpy_sample(src, dst, iters: int = 5) -> float:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        start = time.perf_counter()
        for _ in range(iters):
            dst.copy_(src)
        return (time.perf_counter() - start) / iters
    finally:
        torch.set_num_threads(threads)


def worker(args) -> None:
    import torch
    import torch.distributed as dist

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    torch.set_num_threads(max(1, args.threads // n))
    devices = {"gloo": torch.device("cpu")}
    neuron_reason = None
    has_neuron = dist.is_backend_available("neuron")
    if has_neuron:
        try:
            import openneuron._C as C

            has_neuron = hasattr(C, "_create_neuron_backend")
        except ImportError:
            has_neuron = False
    if has_neuron:
        torch.neuron.set_device(local_rank)
        dist.init_process_group("cpu:gloo,neuron:neuron")
        devices["neuron"] = torch.device("neuron", local_rank)
    else:
        neuron_reason = NOT_BUILT
        dist.init_process_group("gloo")
    cpu_group = dist.new_group(backend="gloo")
    sizes = sizes_bytes(args.max_mib)
    rows = []
    src, dst = torch.ones(MEMCPY_BYTES // 4), torch.empty(MEMCPY_BYTES // 4)
    memcpy_samples = []
    _memcpy_sample(src, dst, 2)  # warm-up: page faults
    for op in OPS:
        for size in sizes:
            iters = max(1, min(MAX_ITERS, SAMPLE_BYTES // size))
            calls = {b: _make_call(op, size, d, n) for b, d in devices.items()}
            for b in calls:  # warm-up: connections, buffers, first-touch
                _time_calls(calls[b], min(iters, 3), devices[b], cpu_group)
            samples = {b: [] for b in calls}
            for rep in range(args.reps):
                order = list(calls) if rep % 2 == 0 else list(reversed(calls))
                for b in order:
                    samples[b].append(_time_calls(calls[b], iters, devices[b], cpu_group))
            del calls
            rows.append({"op": op, "bytes": size, "iters": iters, "samples_s": samples})
            if rank == 0:  # the other rank waits in the Gloo barrier meanwhile
                memcpy_samples.append(_memcpy_sample(src, dst))
            dist.barrier(group=cpu_group)
            if rank == 0:
                med = {b: statistics.median(s) for b, s in samples.items()}
                print(f"[collectives] {op} {size} B: " + ", ".join(
                    f"{b} {size * bus_factor(op, n) / t / 1e9:.3f} GB/s" for b, t in med.items()),
                    flush=True)
    if rank == 0:
        with open(args.raw, "w") as f:
            json.dump({"world_size": n, "threads_per_rank": torch.get_num_threads(), "rows": rows,
                       "neuron_reason": neuron_reason, "memcpy_samples_s": memcpy_samples}, f)
    dist.destroy_process_group()


# ------------------------------------------------------------------ parent


def summarize(raw: dict, reps: int) -> dict:
    n = raw["world_size"]
    rows = []
    for entry in raw["rows"]:
        op, size = entry["op"], entry["bytes"]
        cells = {}
        for backend in ("gloo", "neuron"):
            samples = entry["samples_s"].get(backend)
            if samples is None:
                cells[backend] = {"status": "unavailable", "reason": raw.get("neuron_reason") or NOT_BUILT}
                continue
            t = statistics.median(samples)
            cells[backend] = {"status": "ok", "samples_s": samples,
                              "bus_gbps": size * bus_factor(op, n) / t / 1e9}
        rows.append({"op": op, "bytes": size, "iters": entry["iters"], "cells": cells})
    mem = raw.get("memcpy_samples_s") or []
    memcpy = {"bytes": MEMCPY_BYTES, "threads": 1, "samples_s": mem,
              "gbps": MEMCPY_BYTES / statistics.median(mem) / 1e9 if mem else None}
    return {"world_size": n, "threads_per_rank": raw["threads_per_rank"], "reps": reps,
            "ops": list(OPS), "rows": rows, "memcpy": memcpy}


def print_table(result: dict) -> None:
    def fmt_size(b):
        return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"

    mem = result["memcpy"]["gbps"]
    print(f"\nbus bandwidth, GB/s ({result['world_size']} ranks, {result['threads_per_rank']} "
          f"thread(s) each); single-thread memcpy {mem:.2f} GB/s" if mem else "")
    print(f"{'op':<24} {'size':>8} {'Gloo':>9} {'neuron':>9} {'neuron/Gloo':>12} {'neuron/memcpy':>14}")
    for row in result["rows"]:
        g, nr = row["cells"]["gloo"], row["cells"]["neuron"]
        gb = g.get("bus_gbps")
        nb = nr.get("bus_gbps")
        print(f"{row['op']:<24} {fmt_size(row['bytes']):>8} {gb:>9.3f} "
              + (f"{nb:>9.3f} {nb / gb:>11.2f}x {nb / mem:>13.2f}x" if nb else f"{'n/a':>9}"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="host threads to divide among ranks")
    ap.add_argument("--out")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--raw", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.threads = args.threads or os.cpu_count() or 1
    if args.worker:
        worker(args)
        return
    if not args.out:
        ap.error("--out is required")
    raw_path = args.out + ".raw"
    per_rank = str(max(1, args.threads // WORLD))
    repo = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENNEURON_NUM_CORES", "NEURON_RT_VISIBLE_CORES"))}
    env.update(OMP_NUM_THREADS=per_rank, OPENNEURON_INTRAOP_THREADS=per_rank,
               PYTHONPATH=os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={WORLD}", "-m", "benchmarks.collectives", "--worker",
           "--raw", raw_path, "--reps", str(args.reps), "--max-mib", str(args.max_mib),
           "--threads", str(args.threads)]
    subprocess.run(cmd, cwd=repo, env=env, check=True)
    with open(raw_path) as f:
        result = summarize(json.load(f), args.reps)
    os.unlink(raw_path)
    print_table(result)
    with open(args.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
