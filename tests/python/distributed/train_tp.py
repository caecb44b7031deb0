"""DTensor tensor parallelism on the neuron backend computes what the dense module does.

Cases (each prints "PASS <name>" or "FAIL <name>: ..."):
  mlp         parallelize_module: up ColwiseParallel -> down RowwiseParallel
  attention   a pre-norm attention block: norm SequenceParallel, q/k/v ColwiseParallel,
              o RowwiseParallel(output_layouts=Shard(1)) (Megatron sequence parallelism:
              each rank passes and gets its slice of the sequence)
With --mesh 1d (2 ranks) the module is parallelized over a 1-D mesh of 2; with --mesh 2d
(4 ranks) over ("dp", "tp") = (2, 2): TP on "tp", then fully_shard on "dp", each dp rank
taking its half of the batch. For 3 SGD steps, outputs, the inputs' gradients and the
parameters' gradients (full_tensor()) equal the dense module's on the same device, which
trains on the whole batch, within 1e-5 (float32).

Usage (under torchrun): train_tp.py [--mesh 1d|2d] [--device neuron|cpu] [--backend neuron|gloo]
"""

import argparse
import sys

import torch
import torch.nn as nn
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, parallelize_module)

from common import finish, RANK, WORLD_SIZE, add_backend_args, assert_close, init_training, run_checks

DIM, HIDDEN, HEADS, SEQ, BATCH = 16, 32, 4, 8, 4
STEPS = 3
TOL = dict(rtol=1e-5, atol=1e-5)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.down(torch.tanh(self.up(x)))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(DIM, DIM) for _ in range(4))

    def forward(self, x):
        b, t, _ = x.shape
        hd = DIM // HEADS
        # -1: under TP each rank holds HEADS / tp of the heads
        q, k, v = (w(x).view(b, t, -1, hd).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        att = torch.softmax((q @ k.transpose(-2, -1)) * hd ** -0.5, dim=-1)
        return self.wo((att @ v).transpose(1, 2).reshape(b, t, -1))


class AttnBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.attn = Attention()

    def forward(self, x):
        return x + self.attn(self.norm(x))


CASES = {
    # name: (module, plan, sequence-parallel input/output)
    "mlp": (MLP, lambda: {"up": ColwiseParallel(), "down": RowwiseParallel()}, False),
    "attention": (AttnBlock, lambda: {
        "norm": SequenceParallel(),
        "attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(), "attn.wv": ColwiseParallel(),
        "attn.wo": RowwiseParallel(output_layouts=Shard(1)),
    }, True),
}


def make(cls, dev):
    torch.manual_seed(0)
    return cls().to(dev)


def data(step):
    g = torch.Generator().manual_seed(300 + step)
    return torch.randn(BATCH, SEQ, DIM, generator=g), torch.randn(BATCH, SEQ, DIM, generator=g)


def check_case(dev, name, mesh):
    cls, plan, seq_parallel = CASES[name]
    tp_mesh = mesh["tp"]
    dp_mesh = mesh["dp"] if "dp" in mesh.mesh_dim_names else None
    tp_rank, tp = tp_mesh.get_local_rank(), tp_mesh.size()
    dp_rank, dp = (dp_mesh.get_local_rank(), dp_mesh.size()) if dp_mesh is not None else (0, 1)

    dense = make(cls, dev)
    model = parallelize_module(make(cls, dev), tp_mesh, plan())
    if dp_mesh is not None:
        fully_shard(model, mesh=dp_mesh)
    for pname, p in model.named_parameters():
        assert isinstance(p, DTensor) and p.device == dev, f"{pname}: {type(p).__name__} on {p.device}"
    opt_dense = torch.optim.SGD(dense.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def mine(t):  # this rank's part of a whole-batch tensor
        t = t.chunk(dp, dim=0)[dp_rank]
        return t.chunk(tp, dim=1)[tp_rank] if seq_parallel else t

    for step in range(STEPS):
        x_full, g_full = (t.to(dev) for t in data(step))
        xd = x_full.clone().requires_grad_()
        out_dense = dense(xd)
        out_dense.backward(g_full)
        for p in dense.parameters():
            p.grad /= dp  # FSDP averages over dp: the dense loss is the sum over dp ranks

        x = mine(x_full).clone().requires_grad_()
        out = model(x)
        assert not isinstance(out, DTensor), f"{name}: the output is a DTensor"
        assert_close(out, mine(out_dense), f"{name} step {step}: output", **TOL)
        out.backward(mine(g_full))
        assert_close(x.grad, mine(xd.grad), f"{name} step {step}: input gradient", **TOL)
        grads = dict(dense.named_parameters())
        for pname, p in model.named_parameters():
            assert p.grad is not None, f"rank {RANK}: {name}: {pname} has no gradient"
            assert_close(p.grad.full_tensor(), grads[pname].grad, f"{name} step {step}: gradient of {pname}",
                         **TOL)
        opt_dense.step()
        opt.step()
        opt_dense.zero_grad()
        opt.zero_grad()
    params = dict(dense.named_parameters())
    for pname, p in model.named_parameters():
        assert_close(p.full_tensor(), params[pname], f"{name}: {pname} after {STEPS} steps", **TOL)


def main():
    parser = add_backend_args(argparse.ArgumentParser())
    parser.add_argument("--mesh", choices=["1d", "2d"], default="1d")
    parser.add_argument("--cases", default="mlp,attention")
    args = parser.parse_args()
    dev = init_training(args)
    if args.mesh == "1d":
        mesh = init_device_mesh(dev.type, (WORLD_SIZE,), mesh_dim_names=("tp",))
    else:
        assert WORLD_SIZE == 4, f"--mesh 2d runs on 4 ranks, not {WORLD_SIZE}"
        mesh = init_device_mesh(dev.type, (2, 2), mesh_dim_names=("dp", "tp"))
    ok = run_checks([(f"{args.mesh}_{c}", lambda c=c: check_case(dev, c, mesh))
                     for c in args.cases.split(",")])
    finish()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
