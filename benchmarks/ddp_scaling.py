"""DDP scaling on this host: the suite's Llama-shaped model (benchmarks/models/llama.py,
AdamW training step, sequence 128) on 2 ranks under torchrun against one process with all
host cores, at the same global batch.

Each rank of `torchrun --standalone --nproc_per_node=2` trains its half of the global batch
on neuron:LOCAL_RANK under DistributedDataParallel (backend "neuron"); its share of the
host threads comes from LOCAL_WORLD_SIZE (docs/distributed.md), so OPENNEURON_INTRAOP_THREADS
is removed from the environment. The single process trains the whole global batch on
neuron:0 with all threads. The two alternate (--rounds); each run times --steps steps after
--warmup, a step ending in torch.neuron.synchronize(). Reported: samples/s of each (median
over rounds) and the ratio 2-rank / 1-process.

    python -m benchmarks.ddp_scaling [--global-batch 8] [--steps 5] [--rounds 2] [--out r.json]
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEQ = 128
WORLD = 2


def worker(args) -> None:
    import torch

    from benchmarks.models.llama import _model

    distributed = "LOCAL_RANK" in os.environ
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    dev = torch.device("neuron", local_rank)
    torch.neuron.set_device(local_rank)
    if distributed:
        import torch.distributed as dist

        dist.init_process_group("neuron", device_id=dev)
    model, config = _model(torch.float32)
    model = model.to(dev).train()
    net = model
    if distributed:
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, device_ids=[local_rank])
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (args.global_batch, SEQ), generator=g)
    ids = ids.chunk(world)[rank].to(dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = net(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        torch.neuron.synchronize()
        return loss

    for _ in range(args.warmup):
        step()
    if distributed:  # start together (an all_reduce: barrier() is not needed for this)
        dist.all_reduce(torch.zeros(1, device=dev))
        torch.neuron.synchronize()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    if rank == 0:
        with open(args.raw, "w") as f:
            json.dump({"world_size": world, "step_s": times,
                       "intraop_threads": torch.get_num_threads()}, f)
    if distributed:
        dist.destroy_process_group()


def _run(args, distributed: bool) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENNEURON_NUM_CORES", "NEURON_RT_VISIBLE_CORES",
                                "OPENNEURON_INTRAOP_THREADS", "LOCAL_", "RANK", "WORLD_SIZE"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = str(max(1, args.threads // (WORLD if distributed else 1)))
    env.setdefault("OPENNEURON_FALLBACK", "silent")
    env.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        raw = f.name
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone",
                 f"--nproc_per_node={WORLD}"] if distributed else [sys.executable])
    cmd = [*launcher, "-m", "benchmarks.ddp_scaling", "--worker", "--raw", raw,
           "--global-batch", str(args.global_batch), "--steps", str(args.steps),
           "--warmup", str(args.warmup)]
    try:
        subprocess.run(cmd, cwd=REPO, env=env, check=True)
        with open(raw) as f:
            result = json.load(f)
    finally:
        os.unlink(raw)
    step_s = statistics.median(result["step_s"])
    result.update(median_step_s=step_s, samples_per_s=args.global_batch / step_s)
    print(f"[ddp_scaling] {'2 ranks (DDP)' if distributed else '1 process'}: "
          f"{result['samples_per_s']:.2f} samples/s (median step {step_s * 1e3:.0f} ms)", flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="host threads (default: all)")
    ap.add_argument("--out")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--raw", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.threads = args.threads or os.cpu_count() or 1
    if args.worker:
        worker(args)
        return
    if args.global_batch % WORLD:
        ap.error(f"--global-batch must be divisible by {WORLD}")
    runs = {"single": [], "ddp": []}
    for r in range(args.rounds):  # alternate, starting side swapped each round
        order = ("single", "ddp") if r % 2 == 0 else ("ddp", "single")
        for kind in order:
            runs[kind].append(_run(args, kind == "ddp"))
    single = statistics.median(x["samples_per_s"] for x in runs["single"])
    ddp = statistics.median(x["samples_per_s"] for x in runs["ddp"])
    summary = {"model": "llama (benchmarks/models/llama.py) train step AdamW, float32",
               "seq": SEQ, "global_batch": args.global_batch, "world_size": WORLD,
               "host_threads": args.threads, "steps": args.steps, "warmup": args.warmup,
               "single_samples_per_s": single, "ddp_samples_per_s": ddp,
               "ratio_ddp_over_single": ddp / single, "runs": runs}
    print(f"[ddp_scaling] global batch {args.global_batch} x {SEQ}: 1 process {single:.2f} "
          f"samples/s, 2 ranks {ddp:.2f} samples/s, ratio {ddp / single:.2f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
