"""Soak: a long, seeded loop of what a long job does on neuron, then a check that each
process came back to where it stood after its warm-up: private resident memory, device
memory, open file descriptors, threads.

    python tests/python/soak.py --seconds 1800 --seed 7            # half an hour
    python tests/python/soak.py --seconds 120 --phases alloc,eager   # bisect by phase

Two workers run at once, each for --seconds after its warm-up:
  single       one process interleaving, in rounds in random order: (a) "alloc", tensors
               of random sizes allocated on several streams and read on others;
               (b) "eager", ops on random shapes and dtypes; (c) "compiled",
               torch.compile(backend="neuron") graphs called with changing shapes
  collectives  (d) 2 ranks under torchrun (dist_launch.py), each looping all_reduce,
               all_gather and broadcast of random sizes and dtypes, checking values
Each worker warms up until every shape it will use has been seen (every cache then holds
all it will ever hold), runs random rounds for --warmup seconds more, settles (settle())
and takes its baseline, snapshots at every
--checkpoint seconds and at the end, prints the series, its iterations and the drift, and
exits non-zero when a bound (RSS_BOUND_MIB, EXACT, RESERVED_PEAK_MIB) is exceeded.
tests/python/test_soak.py runs it briefly in CI.
"""

from __future__ import annotations

import argparse
import copy
import ctypes
import gc
import itertools
import json
import math
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import openneuron

MIB = 1 << 20

# Private resident memory (RssAnon + RssFile: VmRSS without RssShmem, which holds the
# memfd-backed device memory of ranks that share it and the pages of peers' memory they
# touched; device memory is checked exactly below) may grow this much between the baseline (after the warm-up) and the end
# of the loop, however long: over ten times the noise of long runs (docs/architecture.md),
# yet small enough that 1 KiB kept per "alloc" step fails CI's 30 s run; a bound that does
# not grow with time makes a long run catch a few bytes per iteration.
RSS_BOUND_MIB = 2.0
# These must come back exactly: open file descriptors, threads, device bytes allocated
# (every tensor of the loop freed) and reserved (after empty_cache), eager program cache
# entries (every shape was seen in the warm-up).
EXACT = ("fds", "threads", "allocated", "reserved", "programs")
# Device memory the loop may hold at its peak: its tensors plus the caching allocator's
# segments, per stream, with a wide margin; far above it means freed blocks are not reused.
RESERVED_PEAK_MIB = 256


# ---------------------------------------------------------------- measuring

_libc = ctypes.CDLL("libc.so.6")


def proc_status(field: str) -> int:
    """A number of /proc/self/status (RssAnon in kB, Threads)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def settle() -> None:
    """Frees what is only cached, so that a snapshot shows what is held: Python's cycles,
    the device's queued work and cached segments, and the free pages of glibc's heap (its
    arenas keep them otherwise, which hides and mimics growth by turns)."""
    gc.collect()
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    _libc.malloc_trim(0)


@dataclass
class Snapshot:
    seconds: float
    rss: int  # private resident bytes (RssAnon + RssFile)
    fds: int
    threads: int
    allocated: int  # device bytes
    allocations: int  # device blocks
    reserved: int  # device bytes
    programs: int  # eager program cache entries

    def line(self, base: Snapshot | None) -> str:
        def delta(name):
            now = getattr(self, name)
            return str(now) + ("" if base is None else f" ({now - getattr(base, name):+})")
        return (f"t={self.seconds:6.0f}s rss={self.rss / MIB:.1f} MiB "
                f"({0 if base is None else (self.rss - base.rss) / MIB:+.2f}) "
                f"fds={delta('fds')} threads={delta('threads')} "
                f"allocated={delta('allocated')} B blocks={delta('allocations')} "
                f"reserved={delta('reserved')} B programs={delta('programs')}")


def snapshot(start: float) -> Snapshot:
    stats = torch.neuron.memory_stats()
    return Snapshot(seconds=time.monotonic() - start,
                    rss=(proc_status("RssAnon") + proc_status("RssFile")) * 1024,
                    fds=open_fds(), threads=proc_status("Threads"),
                    allocated=stats["allocated_bytes.all.current"],
                    allocations=stats["allocation.all.current"],
                    reserved=stats["reserved_bytes.all.current"],
                    programs=int(openneuron.compile_cache_stats()["entries"]))


def rss_slope_mib_per_min(series: list[Snapshot]) -> float:
    """Least-squares slope of RSS over time: the drift rate, less sensitive than the end
    point to one noisy snapshot."""
    if len(series) < 2:
        return 0.0
    ts = [s.seconds / 60 for s in series]
    ys = [s.rss / MIB for s in series]
    tm, ym = sum(ts) / len(ts), sum(ys) / len(ys)
    var = sum((t - tm) ** 2 for t in ts)
    return 0.0 if var == 0 else sum((t - tm) * (y - ym) for t, y in zip(ts, ys)) / var


def violations(base: Snapshot, end: Snapshot, peak_reserved: int) -> list[str]:
    """The bounds the end snapshot exceeds, as readable lines."""
    out = []
    rss_growth = (end.rss - base.rss) / MIB
    if rss_growth > RSS_BOUND_MIB:
        out.append(f"rss grew by {rss_growth:+.2f} MiB (bound {RSS_BOUND_MIB} MiB)")
    for name in EXACT:
        if getattr(end, name) != getattr(base, name):
            out.append(f"{name} {getattr(base, name)} -> {getattr(end, name)} (must not change)")
    if peak_reserved > RESERVED_PEAK_MIB * MIB:
        out.append(f"peak reserved {peak_reserved / MIB:.0f} MiB > {RESERVED_PEAK_MIB} MiB")
    return out


# ---------------------------------------------------------------- phases


def log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    """An int in [lo, hi], as many of each order of magnitude: bytes to MiB alike."""
    return min(hi, int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))


class StreamAllocations:
    """(a) Tensors of 1 byte to 4 MiB, filled on one stream (a host copy: no program,
    whatever the size) and summed on another, which waits for an event and is recorded on
    the tensor; the tensor is dropped before the sum has run, so only record_stream keeps
    its block from being handed out again meanwhile. Some tensors live on for a few steps, so frees interleave with allocations of other
    sizes on other streams."""

    name = "alloc"
    MAX_BYTES = 4 * MIB
    TAIL = 16  # bytes summed: one program per tail length, not per size
    KEEP = 8  # tensors alive at once at most

    def __init__(self, rng: random.Random, dev: torch.device):
        self.rng, self.dev = rng, dev
        self.streams = [torch.neuron.current_stream()] + [torch.neuron.Stream() for _ in range(3)]
        gen = torch.Generator().manual_seed(rng.getrandbits(62))
        self.pattern = torch.randint(0, 256, (self.MAX_BYTES,), dtype=torch.uint8, generator=gen)
        self.live: list[torch.Tensor] = []
        self.pending: list[tuple[torch.Tensor, int]] = []
        self.iterations = 0

    def warm_up(self) -> None:
        # Every tail-sum program: sizes up to TAIL sum the whole tensor, larger ones a view
        # of its last TAIL bytes (another program); each stream once as the reader.
        for size in [*range(1, self.TAIL + 1), self.TAIL + 1, self.MAX_BYTES]:
            for stream in self.streams:
                self.step(size=size, consumer=stream)
        self.end_round()

    def step(self, size: int | None = None, consumer=None) -> None:
        n = size or log_uniform(self.rng, 1, self.MAX_BYTES)
        producer, other = self.rng.sample(self.streams, 2)
        consumer = consumer or other
        if consumer == producer:
            producer = other
        start = self.rng.randrange(self.MAX_BYTES - n + 1)
        with torch.neuron.stream(producer):
            x = torch.empty(n, dtype=torch.uint8, device=self.dev)
            x.copy_(self.pattern[start:start + n])
            filled = torch.neuron.Event()
            filled.record(producer)
        k = min(n, self.TAIL)
        with torch.neuron.stream(consumer):
            consumer.wait_event(filled)
            total = x[n - k:].sum()
        x.record_stream(consumer)
        self.pending.append((total, int(self.pattern[start + n - k:start + n].sum())))
        if self.rng.random() < 0.5:
            self.live.append(x)
        if len(self.live) > self.KEEP:
            self.live.pop(self.rng.randrange(len(self.live)))
        self.iterations += 1

    def end_round(self) -> None:
        torch.neuron.synchronize()  # the sums ran on other streams than the one reading them
        for total, expected in self.pending:
            assert total.item() == expected, f"alloc: tail sum {total.item()} != {expected}"
        self.pending.clear()

    def release(self) -> None:
        self.live.clear()


DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64]
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 5e-3, torch.int64: 0}


def random_shape(rng: random.Random) -> tuple[int, ...]:
    """1 to 3 dims of 1 to 300, at most 64K elements."""
    while True:
        shape = tuple(log_uniform(rng, 1, 300) for _ in range(rng.randint(1, 3)))
        if math.prod(shape) <= 65536:
            return shape


def random_tensor(gen: torch.Generator, shape, dtype) -> torch.Tensor:
    if dtype == torch.int64:
        return torch.randint(-50, 50, shape, generator=gen)
    return torch.randn(shape, generator=gen).to(dtype)


def eager_ops(dtype):
    """(name, fn(a, b)) run on both devices; the float-only ones where they apply."""
    ops = [("axpy", lambda a, b: a * 3 + b), ("absdiff_sum", lambda a, b: (a - b).abs().sum(-1)),
           ("cat", lambda a, b: torch.cat([a, b[..., ::2]], dim=-1)),
           ("maximum", lambda a, b: torch.maximum(a, b))]
    if dtype.is_floating_point:
        ops += [("softmax", lambda a, b: torch.softmax(a, -1)),
                ("matmul", lambda a, b: a @ b.transpose(-1, -2) if a.dim() > 1 else a @ b)]
    return ops


class EagerOps:
    """(b) Eager ops on random shapes and dtypes, checked against the CPU. Shapes come from a
    pool drawn from the seed: the eager program cache keeps every (op, dtype, shape) it
    compiled, so endless new shapes would grow it by design, not by leak."""

    name = "eager"
    SHAPES = 8

    def __init__(self, rng: random.Random, dev: torch.device):
        self.rng, self.dev = rng, dev
        self.gen = torch.Generator().manual_seed(rng.getrandbits(62))
        self.shapes = [random_shape(rng) for _ in range(self.SHAPES)]
        self.iterations = 0

    def warm_up(self) -> None:
        for shape, dtype in itertools.product(self.shapes, DTYPES):
            self.run(shape, dtype)

    def step(self) -> None:
        self.run(self.rng.choice(self.shapes), self.rng.choice(DTYPES))

    def run(self, shape, dtype) -> None:
        a, b = random_tensor(self.gen, shape, dtype), random_tensor(self.gen, shape, dtype)
        da, db = a.to(self.dev), b.to(self.dev)
        for name, fn in eager_ops(dtype):
            got, ref = fn(da, db), fn(a, b)
            tol = TOLERANCE[dtype] * (shape[-1] if name in ("matmul", "absdiff_sum") else 1)
            torch.testing.assert_close(got.cpu(), ref, rtol=TOLERANCE[dtype], atol=tol,
                                       msg=lambda m: f"eager {name} {dtype} {shape}: {m}")
        self.iterations += 1

    def end_round(self) -> None:
        pass

    def release(self) -> None:
        pass


class CompiledGraphs:
    """(c) torch.compile(backend="neuron") called with changing shapes. An MLP trained under
    dynamic=False (forward and backward graphs) on a few batch sizes, one Dynamo graph each;
    and a function under dynamic=True on every length of LENGTHS: after three recordings
    each new length gets a program instantiated from the symbolic recording, and there are
    more lengths than the 64 instances a graph keeps, so the loop keeps evicting and
    instantiating programs (what eviction frees is part of the check). The warm-up calls
    every shape once; after it no graph is compiled."""

    name = "compiled"
    BATCHES = (3, 8, 24)  # below Dynamo's recompile limit of 8
    LENGTHS = range(2, 98)  # 1 would be a graph of its own (Dynamo specializes 0 and 1)

    def __init__(self, rng: random.Random, dev: torch.device):
        self.rng, self.dev = rng, dev
        self.gen = torch.Generator().manual_seed(rng.getrandbits(62))
        torch.manual_seed(rng.getrandbits(62))
        self.cpu_mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                           torch.nn.Linear(32, 4))
        self.mlp = copy.deepcopy(self.cpu_mlp).to(dev)
        self.static = torch.compile(self.mlp, backend="neuron", dynamic=False)
        self.w = torch.randn(16, 8, generator=self.gen)
        self.dw = self.w.to(dev)
        self.dynamic = torch.compile(self.mix, backend="neuron", dynamic=True)
        self.iterations = 0

    @staticmethod
    def mix(x, w):
        return torch.softmax(x * 0.5 + 1.0, dim=-1) @ w

    def warm_up(self) -> None:
        for batch in self.BATCHES:
            for _ in range(2):  # the first call records, the second launches the program
                self.train_step(batch)
        for n in self.LENGTHS:
            self.mix_step(n)

    def step(self) -> None:
        if self.rng.random() < 0.5:
            self.train_step(self.rng.choice(self.BATCHES))
        else:
            self.mix_step(self.rng.choice(self.LENGTHS))
        self.iterations += 1

    def train_step(self, batch: int) -> None:
        x = torch.randn(batch, 16, generator=self.gen)
        loss = self.static(x.to(self.dev)).square().mean()
        loss.backward()
        ref = self.cpu_mlp(x).square().mean()
        ref.backward()
        torch.testing.assert_close(loss.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-5)
        for got, want in zip(self.mlp.parameters(), self.cpu_mlp.parameters()):
            torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-5)
            got.grad, want.grad = None, None  # weights stay: every call sees the same model

    def mix_step(self, n: int) -> None:
        x = torch.randn(n, 16, generator=self.gen)
        got = self.dynamic(x.to(self.dev), self.dw)
        torch.testing.assert_close(got.cpu(), self.mix(x, self.w), rtol=1e-4, atol=1e-5)

    def end_round(self) -> None:
        pass

    def release(self) -> None:
        pass


PHASES = {cls.name: cls for cls in (StreamAllocations, EagerOps, CompiledGraphs)}
STEPS_PER_ROUND = {"alloc": 8, "eager": 2, "compiled": 2}


# ---------------------------------------------------------------- the loop


class Soak:
    """Warm-up, baseline, a loop of rounds with checkpoints, the end snapshot: what both
    workers share. `round_fn()` runs one round; `release()` drops what the loop holds
    between rounds; `keep_going()` and `checkpoint_due()` decide (the collectives worker
    makes rank 0's decision everyone's)."""

    def __init__(self, who: str, seconds: float, every: float):
        self.who, self.seconds, self.every = who, seconds, every
        self.start = time.monotonic()
        self.series: list[Snapshot] = []

    def say(self, line: str) -> None:
        sys.stdout.write(f"{self.who}: {line}\n")
        sys.stdout.flush()

    def take(self, release) -> Snapshot:
        release()
        settle()
        snap = snapshot(self.start)
        self.say(snap.line(self.series[0] if self.series else None))
        self.series.append(snap)
        return snap

    def run(self, round_fn, release, decide, warmup: float) -> tuple[Snapshot, Snapshot]:
        """Random rounds for `warmup` seconds (glibc's arenas, Python's free lists and the
        allocator's segments reach their working size), the baseline, then rounds until the
        time is up. decide(flags) -> flags lets ranks agree on them."""
        warm_start = time.monotonic()
        while decide((time.monotonic() - warm_start < warmup, False))[0]:
            round_fn()
        base = self.take(release)
        torch.neuron.reset_peak_memory_stats()
        loop_start = last = time.monotonic()
        while True:
            now = time.monotonic()
            go, checkpoint = decide((now - loop_start < self.seconds, now - last >= self.every))
            if not go:
                break
            round_fn()
            if checkpoint:
                self.take(release)
                last = time.monotonic()
        end = self.take(release)
        return base, end

    def report(self, base: Snapshot, end: Snapshot, iterations: dict[str, int]) -> bool:
        peak = torch.neuron.max_memory_reserved()
        minutes = (end.seconds - base.seconds) / 60
        self.say("iterations " + " ".join(f"{k}={v}" for k, v in iterations.items())
                 + f" in {minutes:.1f} min")
        self.say(f"drift rss {(end.rss - base.rss) / MIB:+.2f} MiB "
                 f"(slope {rss_slope_mib_per_min(self.series):+.3f} MiB/min), "
                 f"fds {end.fds - base.fds:+}, threads {end.threads - base.threads:+}, "
                 f"allocated {end.allocated - base.allocated:+} B, "
                 f"reserved {end.reserved - base.reserved:+} B (peak {peak / MIB:.1f} MiB), "
                 f"programs {end.programs - base.programs:+}")
        self.say("RESULT " + json.dumps({"base": asdict(base), "end": asdict(end),
                                         "peak_reserved": peak, "iterations": iterations,
                                         "series": [asdict(s) for s in self.series]}))
        failed = violations(base, end, peak)
        for line in failed:
            self.say("FAIL " + line)
        if not failed:
            self.say("ok")
        return not failed


def single_worker(args) -> int:
    dev = torch.device("neuron")
    names = [p for p in args.phases if p in PHASES]
    phases = [PHASES[n](random.Random(f"{args.seed}/{n}"), dev) for n in names]
    order = random.Random(f"{args.seed}/order")
    soak = Soak("single", args.seconds, args.checkpoint)
    for phase in phases:
        phase.warm_up()
        phase.release()
    soak.say(f"warm-up {time.monotonic() - soak.start:.1f} s, phases {','.join(names)}")

    def one_round():
        order.shuffle(phases)
        for phase in phases:
            for _ in range(STEPS_PER_ROUND[phase.name]):
                phase.step()
            phase.end_round()

    def release():
        for phase in phases:
            phase.release()

    base, end = soak.run(one_round, release, lambda flags: flags, args.warmup)
    return 0 if soak.report(base, end, {p.name: p.iterations for p in phases}) else 1


# ---------------------------------------------------------------- collectives


COLLECTIVE_DTYPES = [torch.float32, torch.bfloat16, torch.int64]


def rank_input(seed: int, step: int, rank: int, n: int, dtype) -> torch.Tensor:
    """Rank `rank`'s input at `step`, which every rank can rebuild. Small integers, so that
    sums are exact in every dtype and the check needs no tolerance."""
    gen = torch.Generator().manual_seed((seed * 1_000_003 + step) * 64 + rank)
    return torch.randint(-8, 8, (n,), generator=gen).to(dtype)


class Collectives:
    """(d) One rank's loop: all_reduce, all_gather and broadcast (sometimes async) of random
    sizes and dtypes, every rank drawing the same choices from the shared seed."""

    name = "collectives"
    MAX_NUMEL = 1 << 18

    def __init__(self, seed: int, dev: torch.device):
        import torch.distributed as dist

        self.dist, self.dev, self.seed = dist, dev, seed
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.rng = random.Random(f"{seed}/collectives")
        self.steps = 0
        self.iterations = 0

    def inputs(self, n, dtype) -> list[torch.Tensor]:
        self.steps += 1
        return [rank_input(self.seed, self.steps, r, n, dtype) for r in range(self.world)]

    def warm_up(self) -> None:
        for dtype in COLLECTIVE_DTYPES:
            for n in (1, 1000, self.MAX_NUMEL):
                self.all_reduce(n, dtype, False)
                self.all_gather(n, dtype, True)
                self.broadcast(n, dtype, False)

    def step(self) -> None:
        n = log_uniform(self.rng, 1, self.MAX_NUMEL)
        dtype = self.rng.choice(COLLECTIVE_DTYPES)
        op = self.rng.choice([self.all_reduce, self.all_gather, self.broadcast])
        op(n, dtype, self.rng.random() < 0.3)
        self.iterations += 1

    def wait(self, work) -> None:
        if work is not None:
            work.wait()

    def all_reduce(self, n, dtype, async_op) -> None:
        ins = self.inputs(n, dtype)
        t = ins[self.rank].to(self.dev)
        self.wait(self.dist.all_reduce(t, async_op=async_op))
        assert torch.equal(t.cpu(), sum(ins[1:], ins[0])), f"all_reduce {n} {dtype}"

    def all_gather(self, n, dtype, async_op) -> None:
        ins = self.inputs(n, dtype)
        outs = [torch.empty(n, dtype=dtype, device=self.dev) for _ in range(self.world)]
        self.wait(self.dist.all_gather(outs, ins[self.rank].to(self.dev), async_op=async_op))
        for r, (got, want) in enumerate(zip(outs, ins)):
            assert torch.equal(got.cpu(), want), f"all_gather {n} {dtype} from rank {r}"

    def broadcast(self, n, dtype, async_op) -> None:
        ins = self.inputs(n, dtype)
        root = self.rng.randrange(self.world)
        t = ins[self.rank].to(self.dev)
        self.wait(self.dist.broadcast(t, src=root, async_op=async_op))
        assert torch.equal(t.cpu(), ins[root]), f"broadcast {n} {dtype} from {root}"


def collectives_worker(args) -> int:
    import datetime

    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dev = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("neuron", device_id=dev, timeout=datetime.timedelta(seconds=120))
    soak = Soak(f"rank {rank}", args.seconds, args.checkpoint)
    loop = Collectives(args.seed, dev)
    loop.warm_up()
    soak.say(f"warm-up {time.monotonic() - soak.start:.1f} s")

    def rank0_decides(flags):
        # Ranks must run the same collectives: rank 0's clock decides for all.
        t = torch.tensor(flags, dtype=torch.int64, device=dev)
        dist.broadcast(t, src=0)
        return tuple(bool(v) for v in t.tolist())

    def one_round():
        for _ in range(8):
            loop.step()

    base, end = soak.run(one_round, lambda: None, rank0_decides, args.warmup)
    ok = soak.report(base, end, {"collectives": loop.iterations})
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


# ---------------------------------------------------------------- driver


def run_single(args) -> int:
    """The single-process worker in a fresh interpreter (its output goes straight to ours)."""
    cmd = [sys.executable, __file__, "--worker", "single", *worker_args(args)]
    return subprocess.run(cmd, timeout=args.seconds * 2 + 600).returncode


def run_collectives(args) -> int:
    from dist_launch import torchrun

    proc = torchrun(Path(__file__).resolve(), 2, "--worker", "collectives", *worker_args(args),
                    timeout=args.seconds * 2 + 600, expect_ok=False)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stdout.write(f"collectives: torchrun exited with {proc.returncode}\n"
                         f"{proc.stderr[-6000:]}\n")
    sys.stdout.flush()
    return proc.returncode


def worker_args(args) -> list[str]:
    return ["--seconds", str(args.seconds), "--seed", str(args.seed),
            "--warmup", str(args.warmup), "--checkpoint", str(args.checkpoint),
            "--phases", ",".join(args.phases)]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60,
                   help="measured time of each worker, after its warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds of random rounds before the baseline "
                        "(default: a tenth of --seconds, 3 to 60)")
    p.add_argument("--checkpoint", type=float, default=None,
                   help="seconds between snapshots (default: a tenth of --seconds, 5 to 60)")
    p.add_argument("--phases", default="alloc,eager,compiled,collectives",
                   type=lambda s: [x for x in s.split(",") if x])
    p.add_argument("--worker", choices=["single", "collectives"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.warmup is None:
        args.warmup = min(60.0, max(3.0, args.seconds / 10))
    if args.checkpoint is None:
        args.checkpoint = min(60.0, max(5.0, args.seconds / 10))
    unknown = set(args.phases) - set(PHASES) - {"collectives"}
    if unknown:
        p.error(f"unknown phases {sorted(unknown)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    # Recordings are kept in memory only: the user's disk cache is left alone.
    os.environ.setdefault("OPENNEURON_DISK_CACHE", "0")
    if args.worker == "single":
        return single_worker(args)
    if args.worker == "collectives":
        return collectives_worker(args)
    jobs = []
    with ThreadPoolExecutor(2) as pool:
        if set(args.phases) & set(PHASES):
            jobs.append(pool.submit(run_single, args))
        if "collectives" in args.phases:
            jobs.append(pool.submit(run_collectives, args))
        codes = [job.result() for job in jobs]
    ok = all(code == 0 for code in codes)
    print("soak ok" if ok else "soak FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
