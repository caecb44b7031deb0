"""A tiny Accelerate training script, for `accelerate launch --num_processes 2`: a tiny
Llama (tests/python/hf_tiny.py) trained for 4 steps with AdamW on a sharded dataloader.
Every rank prints its state (distributed type, backend, device, world size); then each
rank checks that the ranks' parameters are equal after training (gathered through
Accelerate) and that the losses are finite, and prints "PASS accelerate"; then
"PASS wait_for_everyone" once past Accelerate's barrier.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # hf_tiny

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from common import say  # noqa: E402
from hf_tiny import tiny_llama  # noqa: E402

STEPS = 4


def main():
    acc = Accelerator()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (32, 12), generator=g)
    model = tiny_llama(seed=0).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(ids), batch_size=4, shuffle=False)
    model, opt, loader = acc.prepare(model, opt, loader)
    losses, batch_devices = [], set()
    for (x,) in loader:
        batch_devices.add(str(x.device))
        out = model(input_ids=x, labels=x)
        acc.backward(out.loss)
        opt.step()
        opt.zero_grad()
        losses.append(acc.gather(out.loss.detach()).mean().item())
        if len(losses) == STEPS:
            break
    r = acc.process_index
    say(f"rank {r}: distributed_type {acc.distributed_type} backend "
        f"{dist.get_backend() if dist.is_initialized() else None} num_processes {acc.num_processes} "
        f"device {acc.device} batches on {sorted(batch_devices)} "
        f"model {type(model).__name__}")
    assert len(losses) == STEPS and all(math.isfinite(v) for v in losses), losses
    assert losses[-1] < losses[0], losses
    flat = torch.cat([p.detach().reshape(-1) for p in acc.unwrap_model(model).parameters()])
    gathered = acc.gather(flat.unsqueeze(0))
    for i in range(1, gathered.shape[0]):
        assert torch.equal(gathered[i].cpu(), gathered[0].cpu()), f"rank {r}: parameters of rank {i} differ from rank 0's"
    say(f"rank {r}: losses {losses}")
    say(f"rank {r}: PASS accelerate")
    acc.wait_for_everyone()  # as scripts do before rank 0 saves
    say(f"rank {r}: PASS wait_for_everyone")
    acc.end_training()


if __name__ == "__main__":
    main()
