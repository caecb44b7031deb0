"""GPT-2-shaped decoder (6 layers, hidden 384, 6 heads, GPT-2's vocabulary), random weights."""

from __future__ import annotations

import torch

from ..workloads import Built, Workload
from .steps import forward_step, generate_step, seeded

SEQ = 128
PROMPT = 16
NEW_TOKENS = 32


def _model(dtype: torch.dtype):
    from transformers import GPT2Config, GPT2LMHeadModel

    seeded()
    config = GPT2Config(n_layer=6, n_embd=384, n_head=6, n_positions=1024)
    return GPT2LMHeadModel(config).to(dtype).eval(), config


def _forward(batch: int):
    def build(dtype: torch.dtype) -> Built:
        model, config = _model(dtype)
        ids = torch.randint(0, config.vocab_size, (batch, SEQ))
        return Built(model, {"input_ids": ids}, forward_step)

    return build


def _generate(dtype: torch.dtype) -> Built:
    model, config = _model(dtype)
    ids = torch.randint(0, config.vocab_size, (1, PROMPT))
    return Built(model, {"input_ids": ids}, generate_step(NEW_TOKENS), weight_passes=NEW_TOKENS)


WORKLOADS = [
    Workload("gpt2", f"forward b1 s{SEQ}", "inference", "tokens", SEQ, _forward(1)),
    Workload("gpt2", f"forward b8 s{SEQ}", "inference", "tokens", 8 * SEQ, _forward(8)),
    Workload("gpt2", f"generate b1 {NEW_TOKENS} tokens", "inference", "tokens", NEW_TOKENS,
             _generate),
]
