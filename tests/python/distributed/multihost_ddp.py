"""DDP across two "hosts" (network namespaces, tests/python/test_distributed_multihost.py)
trains exactly like one process on the full batch, and the backend took the right path.

Started by `torchrun --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d ...` inside each
namespace. Checks (each prints "PASS <name>" or "FAIL <name>: ..."):
  hosts       the ranks see exactly 2 host keys, LOCAL_WORLD_SIZE ranks on each
  transport   the default (cross-host) group's backend goes through Gloo, a group of the
              ranks of one host uses shared memory (neuron backend only)
  same_host   all_reduce on the one-host group (shared memory) is exact
  ddp         10 SGD steps of a small MLP under DDP: every rank's losses (the mean over
              ranks) and final parameters equal one process on the full batch within 1e-5

Usage (under torchrun): multihost_ddp.py [--device neuron|cpu] [--backend neuron|gloo]
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from common import finish, RANK, WORLD_SIZE, add_backend_args, assert_close, init_training, run_checks, say

STEPS = 10
GLOBAL_BATCH = 16  # 4 ranks x 4 samples
TOL = dict(rtol=1e-5, atol=1e-5)


def model(dev):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 4)).to(dev)


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(GLOBAL_BATCH, 8, generator=g), torch.randn(GLOBAL_BATCH, 4, generator=g)


def reference(dev):
    net = model(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        x, y = (t.to(dev) for t in batch(step))
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    return losses, {k: v.detach().cpu() for k, v in net.state_dict().items()}


def check_ddp(dev):
    ref_losses, ref_params = reference(dev)
    net = model(dev)
    ddp = DDP(net, device_ids=[dev.index] if dev.type != "cpu" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        x, y = (t.chunk(WORLD_SIZE)[RANK].to(dev) for t in batch(step))
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        loss = loss.detach().clone()
        dist.all_reduce(loss)  # equal shards: the full batch's loss is the ranks' mean
        losses.append((loss / WORLD_SIZE).cpu())
    for step, (got, ref) in enumerate(zip(losses, ref_losses)):
        assert_close(got, ref, f"loss at step {step}", **TOL)
    for k, v in net.state_dict().items():
        assert_close(v, ref_params[k], f"final {k}", **TOL)
    say(f"rank {RANK}: ddp: losses {float(losses[0]):.6f} -> {float(losses[-1]):.6f} "
        f"(reference {float(ref_losses[0]):.6f} -> {float(ref_losses[-1]):.6f})")


def main():
    parser = add_backend_args(argparse.ArgumentParser())
    args = parser.parse_args()
    dev = init_training(args)
    from openneuron.distributed import host_key

    keys = [None] * WORLD_SIZE
    dist.all_gather_object(keys, host_key())
    hosts = sorted(set(keys))
    # Every rank creates every group (new_group is collective), then uses its own host's.
    groups = {h: dist.new_group([r for r, k in enumerate(keys) if k == h]) for h in hosts}
    mine = groups[host_key()]
    local = [r for r, k in enumerate(keys) if k == host_key()]
    say(f"rank {RANK}: host {host_key()} ranks {local} GLOO_SOCKET_IFNAME="
        f"{os.environ.get('GLOO_SOCKET_IFNAME')}")

    def check_hosts():
        assert len(hosts) == 2, f"rank {RANK}: expected 2 host keys, got {keys}"
        lws = int(os.environ["LOCAL_WORLD_SIZE"])
        assert all(keys.count(h) == lws for h in hosts), f"rank {RANK}: host keys {keys}"

    def check_transport():
        if dev.type != "neuron":
            raise RuntimeError("--device cpu: no neuron backend to inspect")
        world = dist.distributed_c10d._get_default_group()._get_backend(dev)
        assert world.uses_shared_memory is False, (
            f"rank {RANK}: the cross-host group uses shared memory, not Gloo")
        same = mine._get_backend(dev)
        assert same.uses_shared_memory is True, (
            f"rank {RANK}: the one-host group {local} does not use shared memory")

    def check_same_host():
        t = torch.full((1000,), float(RANK + 1), device=dev)
        dist.all_reduce(t, group=mine)
        assert_close(t, torch.full((1000,), float(sum(r + 1 for r in local))), "same-host all_reduce")

    ok = run_checks([("hosts", check_hosts), ("transport", check_transport),
                     ("same_host", check_same_host), ("ddp", lambda: check_ddp(dev))])
    finish()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
