"""DDP on the neuron backend trains exactly like one process on the full batch.

Each rank trains a small MLP under DistributedDataParallel on its shard of a fixed global
batch (10 steps of SGD, float32) and, in the same process without DDP, the same model on
the whole batch (the reference, on the same device). The mean of the ranks' losses on
every step and the final parameters must equal the reference's within 1e-5.

Checks (each prints "PASS <name>" or "FAIL <name>: ..."):
  plain       one bucket, one backward per step
  no_sync     gradient accumulation over 2 micro-batches, the first under no_sync()
  buckets     bucket_cap_mb tiny: a bucket per layer, several all_reduces per step
  unused      find_unused_parameters=True, a branch used by all ranks, one rank or none

Usage (under torchrun): train_ddp.py [--device neuron|cpu] [--backend neuron|gloo]
"""

import argparse
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from common import finish, RANK, WORLD_SIZE, add_backend_args, assert_close, init_training, run_checks, say

STEPS = 10
GLOBAL_BATCH = 12  # divisible by 2 and 3 (and by 2 micro-batches per rank)
TOL = dict(rtol=1e-5, atol=1e-5)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)
        self.branch = nn.Linear(16, 16)  # used only when forward(use_branch=True)

    def forward(self, x, use_branch=True):
        h = torch.tanh(self.fc1(x))
        h = torch.tanh(self.fc2(h))
        if use_branch:
            h = h + torch.tanh(self.branch(h))
        return self.head(h)


def global_batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(GLOBAL_BATCH, 8, generator=g), torch.randn(GLOBAL_BATCH, 4, generator=g)


def shard(t, r):
    return t.chunk(WORLD_SIZE)[r]


def branch_used(step, r):
    """unused: all ranks use the branch on steps 0, 4, 8; only rank 0 on 1, 5, 9; none on
    the others (then its parameters get no gradient anywhere)."""
    return step % 4 == 0 or (step % 4 == 1 and r == 0)


def initial_model(dev):
    torch.manual_seed(0)
    return Net().to(dev)


def forward_kw(mode, step, r):
    return {"use_branch": branch_used(step, r)} if mode == "unused" else {}


def reference(dev, mode):
    """Single process, no DDP, on the same device: the full batch (for "unused" the mean of
    the shards' losses, each with its own use of the branch)."""
    model = initial_model(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        x, y = global_batch(step)
        x, y = x.to(dev), y.to(dev)
        opt.zero_grad(set_to_none=True)
        if mode == "unused":
            loss = sum(F.mse_loss(model(shard(x, r), **forward_kw(mode, step, r)), shard(y, r))
                       for r in range(WORLD_SIZE)) / WORLD_SIZE
        else:
            loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


def distributed(dev, mode):
    model = initial_model(dev)
    kw = {}
    if dev.type != "cpu":
        kw["device_ids"] = [dev.index]
    if mode == "buckets":
        kw["bucket_cap_mb"] = 0.0004  # 400 bytes: each layer (weight + bias) gets a bucket
    if mode == "unused":
        kw["find_unused_parameters"] = True
    ddp = DDP(model, **kw)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        x, y = global_batch(step)
        x, y = shard(x, RANK).to(dev), shard(y, RANK).to(dev)
        opt.zero_grad(set_to_none=True)
        if mode == "no_sync":
            (x0, x1), (y0, y1) = x.chunk(2), y.chunk(2)
            with ddp.no_sync():
                l0 = F.mse_loss(ddp(x0), y0) / 2
                l0.backward()
            if step == 0:  # nothing was reduced: the gradient is this rank's alone
                g = model.head.weight.grad.detach().clone()
                others = [torch.empty_like(g) for _ in range(WORLD_SIZE)]
                dist.all_gather(others, g)
                if WORLD_SIZE > 1 and all(torch.equal(others[0], o) for o in others[1:]):
                    raise AssertionError(f"rank {RANK}: no_sync() gradients are equal on every rank")
            l1 = F.mse_loss(ddp(x1), y1) / 2
            l1.backward()
            loss = (l0 + l1).detach()
        else:
            loss = F.mse_loss(ddp(x, **forward_kw(mode, step, RANK)), y)
            loss.backward()
            loss = loss.detach()
        opt.step()
        loss = loss.clone()
        dist.all_reduce(loss)  # equal shards: the full batch's loss is the mean of the ranks'
        losses.append((loss / WORLD_SIZE).cpu())
    if mode == "buckets":
        data = ddp._get_ddp_logging_data()
        sizes = str(data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes"))
        if len(sizes.split(",")) < 3:
            raise AssertionError(f"rank {RANK}: expected several buckets, got bucket sizes {sizes}")
    if mode == "plain" and dev.type != "cpu":
        # DDP times its phases with the device's timer (c10d's TimerRegistry) on the
        # first 10 iterations; without one it warns and leaves these unset.
        data = ddp._get_ddp_logging_data()
        times = {k: data.get(k, 0) for k in ("avg_forward_compute_time", "avg_backward_compute_time",
                                             "avg_backward_comm_time")}
        if not all(v > 0 for v in times.values()):
            raise AssertionError(f"rank {RANK}: DDP's time stats not collected: {times}")
    if mode == "unused":
        data = ddp._get_ddp_logging_data()
        if not data.get("find_unused_parameters"):
            raise AssertionError(f"rank {RANK}: find_unused_parameters not in effect: {data}")
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}, model


def check(dev, mode):
    ref_losses, ref_params = reference(dev, mode)
    losses, params, model = distributed(dev, mode)
    assert {p.device for p in model.parameters()} == {dev}, "parameters left the device"
    for step, (got, ref) in enumerate(zip(losses, ref_losses)):
        assert_close(got, ref, f"{mode}: loss at step {step}", **TOL)
    for k in ref_params:
        assert_close(params[k], ref_params[k], f"{mode}: final {k}", **TOL)
    # every rank ends with the same parameters, bit for bit
    for k, v in params.items():
        v0 = v.to(dev).clone()
        dist.broadcast(v0, 0)
        assert_close(v0, v, f"{mode}: {k} differs from rank 0's")
    say(f"rank {RANK}: {mode}: losses {float(losses[0]):.6f} -> {float(losses[-1]):.6f}")


def main():
    parser = add_backend_args(argparse.ArgumentParser())
    parser.add_argument("--modes", default="plain,no_sync,buckets,unused")
    args = parser.parse_args()
    dev = init_training(args)
    if dev.type == "neuron":
        backend = dist.get_backend()
        assert "neuron" in backend, f"rank {RANK}: backend {backend!r}"
    ok = run_checks([(m, lambda m=m: check(dev, m)) for m in args.modes.split(",")])
    finish()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
