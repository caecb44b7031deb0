"""torch.distributed.pipelining on the neuron backend: two stages, one per rank.

An MLP of 4 linear layers is split in two (manual PipelineStage, layers 0-1 on rank 0 and
2-3 on rank 1) and trained for 3 SGD steps with ScheduleGPipe over 4 micro-batches. Every
step the last stage's loss (the mean of the micro-batches' losses) and each stage's
gradients equal the unsplit model's on the whole batch (computed in the same process on
the same device) within 1e-5, and so do the parameters after the last step.

Prints "PASS gpipe" or "FAIL gpipe: ...".

Usage (under torchrun with 2 ranks): pipeline.py [--device neuron|cpu] [--backend neuron|gloo]
"""

import argparse
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from common import finish, RANK, WORLD_SIZE, add_backend_args, assert_close, init_training, run_checks

DIM, BATCH, MICRO, STEPS = 16, 8, 4, 3
TOL = dict(rtol=1e-5, atol=1e-5)


def make(dev):
    torch.manual_seed(0)
    layers = []
    for i in range(4):
        layers += [nn.Linear(DIM, DIM), nn.Tanh()] if i < 3 else [nn.Linear(DIM, DIM)]
    return nn.Sequential(*layers).to(dev)


def data(step):
    g = torch.Generator().manual_seed(400 + step)
    return torch.randn(BATCH, DIM, generator=g), torch.randn(BATCH, DIM, generator=g)


def check(dev):
    assert WORLD_SIZE == 2, "two stages, two ranks"
    dense = make(dev)
    full = make(dev)
    # stage 0: Linear, Tanh, Linear, Tanh (modules 0-3); stage 1: Linear, Tanh, Linear (4-6)
    cut = 4
    names = [str(i) for i in range(len(full))]
    mine = names[:cut] if RANK == 0 else names[cut:]
    submod = nn.Sequential(*[full[int(n)] for n in mine])
    stage = PipelineStage(submod, RANK, WORLD_SIZE, dev)
    schedule = ScheduleGPipe(stage, n_microbatches=MICRO, loss_fn=F.mse_loss)
    opt = torch.optim.SGD(submod.parameters(), lr=0.1)
    opt_dense = torch.optim.SGD(dense.parameters(), lr=0.1)
    for step in range(STEPS):
        x, y = (t.to(dev) for t in data(step))
        ref_loss = F.mse_loss(dense(x), y)
        ref_loss.backward()
        opt.zero_grad()
        if RANK == 0:
            schedule.step(x)
        else:
            losses = []
            out = schedule.step(target=y, losses=losses)
            assert len(losses) == MICRO, f"{len(losses)} micro-batch losses"
            assert_close(torch.stack([l.detach() for l in losses]).mean(), ref_loss,
                         f"step {step}: loss", **TOL)
            assert_close(out, dense(x), f"step {step}: pipeline output", **TOL)
        for i, n in enumerate(mine):
            for pn, p in submod[i].named_parameters():
                assert_close(p.grad, dict(dense[int(n)].named_parameters())[pn].grad,
                             f"step {step}: gradient of layer {n}.{pn}", **TOL)
        opt.step()
        opt_dense.step()
        opt_dense.zero_grad()
    for i, n in enumerate(mine):
        for pn, p in submod[i].named_parameters():
            assert_close(p, dict(dense[int(n)].named_parameters())[pn], f"final {n}.{pn}", **TOL)


def main():
    parser = add_backend_args(argparse.ArgumentParser())
    args = parser.parse_args()
    dev = init_training(args)
    ok = run_checks([("gpipe", lambda: check(dev))])
    finish()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
