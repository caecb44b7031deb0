"""Accelerate on neuron, unchanged: the Accelerator picks the device, prepares the model, the
optimizer and the dataloader, and trains; the same loop on the CPU gives the same losses.
Run:  .venv/bin/python examples/hf_accelerate.py
"""

import torch
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState
from torch.utils.data import DataLoader, TensorDataset
from transformers import LlamaConfig, LlamaForCausalLM


def train(cpu: bool, mixed_precision: str = "no", steps: int = 8):
    AcceleratorState._reset_state(reset_partial_state=True)  # a fresh Accelerator per run
    accelerator = Accelerator(cpu=cpu, mixed_precision=mixed_precision)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96,
                                         num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randint(3, 128, (16, 12), generator=torch.Generator().manual_seed(0)))
    loader = DataLoader(data, batch_size=4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    losses = []
    while len(losses) < steps:
        for (ids,) in loader:
            with accelerator.autocast():
                loss = model(input_ids=ids, labels=ids).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
    return accelerator.device, losses[:steps]


def main():
    print(f"PartialState().device: {PartialState().device}")
    for mp in ("no", "bf16"):
        device, got = train(cpu=False, mixed_precision=mp)
        _, ref = train(cpu=True, mixed_precision=mp)
        diff = max(abs(a - b) for a, b in zip(got, ref))
        print(f"mixed_precision={mp!r:6s} on {device}: losses {[round(x, 4) for x in got]}")
        print(f"{'':24s} max |neuron - cpu| = {diff:.2e}")


if __name__ == "__main__":
    main()
