"""A small training script with the problems `openneuron report` finds (the script for the
README's screenshot: `make report-screenshot`). Run it under the report:

    openneuron report examples/report_demo.py --html report.html

It trains a 2-layer transformer on neuron, eagerly and then under
`torch.compile(backend="neuron", dynamic=False)` on batches of three sequence lengths
(recompilations), with a NaN check inside the compiled step (a graph break), float64
class weights (stored as float32 on neuron) and random data drawn from a CPU generator
into device tensors (a CPU fallback).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, HEADS = 256, 128, 4


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        layer = nn.TransformerEncoderLayer(DIM, HEADS, 4 * DIM, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        return self.head(self.blocks(self.embed(tokens), is_causal=True,
                                     mask=nn.Transformer.generate_square_subsequent_mask(
                                         tokens.shape[1], device=tokens.device)))


def batches(steps: int, seq_lens: list[int], device: str):
    gen = torch.Generator().manual_seed(0)  # a CPU generator: device RNG ops fall back
    for i in range(steps):
        seq = seq_lens[i % len(seq_lens)]
        data = torch.empty(8, seq + 1, device=device).uniform_(0, VOCAB, generator=gen).long()
        yield data[:, :-1], data[:, 1:]


def train(model, step_fn, steps: int, seq_lens: list[int], device: str) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    weights = torch.ones(VOCAB, dtype=torch.float64).to(device)  # float64: float32 on neuron
    loss = torch.zeros(())
    for tokens, targets in batches(steps, seq_lens, device):
        opt.zero_grad()
        loss = step_fn(model, tokens, targets, weights.float())
        loss.backward()
        opt.step()
    return loss.item()


def step(model, tokens, targets, weights):
    logits = model(tokens)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), weight=weights)
    if loss.isnan():  # a check on a device value: Dynamo breaks the graph here
        raise FloatingPointError("the loss is NaN")
    return loss


def main() -> None:
    torch.manual_seed(0)
    model = TinyLM().to("neuron")
    eager = train(model, step, steps=6, seq_lens=[32], device="neuron")
    compiled = torch.compile(step, backend="neuron", dynamic=False)
    final = train(model, compiled, steps=9, seq_lens=[16, 32, 64], device="neuron")
    print(f"eager loss {eager:.3f}, compiled loss {final:.3f}")


if __name__ == "__main__":
    main()
