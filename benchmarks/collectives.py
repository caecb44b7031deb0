"""all_reduce bandwidth on 2 ranks on this host: the neuron c10d backend against Gloo.

Ranks are spawned with torch.multiprocessing (no torchrun) and rendezvous on loopback.
For each size the backends take turns (interleaved); each rank gets an equal share of the
cores. Bus bandwidth uses the usual all_reduce convention: bytes x 2(n-1)/n / time.

    python -m benchmarks.collectives --out coll.json [--max-mib 64]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

NOT_BUILT = "not built yet (c10d backend 'neuron' lands with the distributed issue)"
WORLD = 2


def sizes_bytes(max_mib: int) -> list[int]:
    sizes, size = [], 1024
    while size <= max_mib * 1024 * 1024:
        sizes.append(size)
        size *= 4
    return sizes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _time_all_reduce(tensor: torch.Tensor, group, iters: int) -> float:
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    if tensor.device.type == "neuron":
        torch.neuron.synchronize()
    return (time.perf_counter() - start) / iters


def _rank_main(rank: int, port: int, sizes: list[int], reps: int, threads: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    groups = {"gloo": (None, "cpu")}
    if dist.is_backend_available("neuron"):
        groups["neuron"] = (dist.new_group(backend="neuron"), "neuron")
    rows = []
    for size in sizes:
        per_backend: dict[str, list[float]] = {b: [] for b in groups}
        tensors = {b: torch.ones(size // 4, device=dev) for b, (_, dev) in groups.items()}
        # Small messages are latency-bound: repeat them so each sample lasts a while.
        iters = max(2, min(200, (8 << 20) // size))
        for b, (group, _) in groups.items():
            _time_all_reduce(tensors[b], group, 2)  # warm-up: connection set-up, buffers
        for rep in range(reps):
            order = list(groups) if rep % 2 == 0 else list(reversed(groups))
            for b in order:
                per_backend[b].append(_time_all_reduce(tensors[b], groups[b][0], iters))
        rows.append({"bytes": size, "iters": iters, "samples_s": per_backend})
    if rank == 0:
        with open(out, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def measure(max_mib: int, reps: int, threads_per_rank: int, out: str) -> dict:
    sizes = sizes_bytes(max_mib)
    mp.spawn(_rank_main, args=(_free_port(), sizes, reps, threads_per_rank, out), nprocs=WORLD,
             join=True)
    with open(out) as f:
        raw = json.load(f)
    factor = 2 * (WORLD - 1) / WORLD
    rows = []
    for entry in raw:
        cells = {}
        for backend, column in (("gloo", "gloo"), ("neuron", "neuron")):
            samples = entry["samples_s"].get(backend)
            if samples is None:
                cells[column] = {"status": "unavailable", "reason": NOT_BUILT}
                continue
            t = statistics.median(samples)
            cells[column] = {"status": "ok", "samples_s": samples,
                             "bus_gbps": entry["bytes"] * factor / t / 1e9}
        rows.append({"bytes": entry["bytes"], "iters": entry["iters"], "cells": cells})
    return {"world_size": WORLD, "threads_per_rank": threads_per_rank, "reps": reps, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="host threads to divide among ranks")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    threads = args.threads or torch.get_num_threads()
    result = measure(args.max_mib, args.reps, max(1, threads // WORLD), args.out + ".raw")
    os.unlink(args.out + ".raw")
    with open(args.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
