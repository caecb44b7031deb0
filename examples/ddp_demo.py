"""The distributed part of `make demo`: the demo's transformer trained with DDP on 2 ranks
(`torchrun --standalone --nproc_per_node=2 examples/ddp_demo.py`, started by demo.py).

Each rank takes half of every global batch; rank 0 also trains the same model alone on the
whole batch and reports whether the losses agree, the time per step of both, and
all_reduce's bandwidth on neuron against Gloo on CPU tensors in the same processes.
"""

from __future__ import annotations

import copy
import gc
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class TinyLM(nn.Module):
    def __init__(self, vocab=256, dim=128, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device)
        return self.head(self.blocks(self.emb(tokens), mask=mask, is_causal=True))


def train(model, batches, device):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for i, tokens in enumerate(batches):
        if i == 1:
            torch.neuron.synchronize()
            start = time.perf_counter()
        tokens = tokens.to(device)
        loss = F.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    losses = [float(l) for l in losses]
    return losses, (time.perf_counter() - start) / (len(batches) - 1)


def bus_bandwidth(tensor, repeats=5):
    """all_reduce bus bandwidth in GB/s (NCCL-tests' definition), median of repeats."""
    n = dist.get_world_size()
    times = []
    for _ in range(repeats + 1):
        if tensor.device.type == "neuron":
            torch.neuron.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(tensor)
        if tensor.device.type == "neuron":
            torch.neuron.synchronize()
        times.append(time.perf_counter() - t0)
    t = sorted(times[1:])[len(times[1:]) // 2]
    return tensor.numel() * tensor.element_size() * 2 * (n - 1) / n / t / 1e9


def main():
    dist.init_process_group("cpu:gloo,neuron:neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron", torch.neuron.current_device())
    torch.manual_seed(0)
    model = TinyLM()
    batches = [torch.randint(0, 256, (8, 65), generator=torch.Generator().manual_seed(i))
               for i in range(8)]
    shard = [b.chunk(world)[rank] for b in batches]

    ddp = DDP(copy.deepcopy(model).to(device))
    ddp_losses, ddp_s = train(ddp, shard, device)
    # DDP's loss is each rank's shard mean: average over ranks for the global loss.
    global_losses = torch.tensor(ddp_losses, device=device)
    dist.all_reduce(global_losses, op=dist.ReduceOp.AVG)

    big = 32 << 20
    neuron_bw = bus_bandwidth(torch.ones(big // 4, device=device))
    gloo_bw = bus_bandwidth(torch.ones(big // 4))

    if rank == 0:
        single_losses, single_s = train(copy.deepcopy(model).to(device), batches, device)
        diff = max(abs(a - b) for a, b in zip(global_losses.cpu().tolist(), single_losses))
        print(f"\nDDP on {world} ranks (torchrun, backend 'neuron', each rank on its own core): "
              f"max |loss_ddp - loss_single| = {diff:.2e} over {len(batches)} AdamW steps")
        print(f"  time per step: {1e3 * ddp_s:.1f} ms on {world} ranks (half the batch each), "
              f"{1e3 * single_s:.1f} ms in one process (whole batch, inside the same job)")
        print(f"  all_reduce of 32 MiB, bus bandwidth: neuron {neuron_bw:.2f} GB/s, "
              f"Gloo on CPU tensors {gloo_bw:.2f} GB/s ({neuron_bw / gloo_bw:.1f}x)")
    # DDP holds the process group (in reference cycles): free it so that
    # destroy_process_group stops Gloo's threads while Python is still up. A Gloo
    # thread that outlives it drops its last tensor reference during interpreter
    # shutdown and aborts the process (pytorch/pytorch#190489).
    del ddp
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
