"""Llama-shaped decoder (4 layers, hidden 512, 8 query / 2 key-value heads, Llama-2's
vocabulary size), random weights: forward, greedy generation and an AdamW training step."""

from __future__ import annotations

import torch

from ..workloads import Built, Workload
from .steps import TRAIN_WEIGHT_PASSES, forward_step, generate_step, seeded, training_step

BATCH = 4
SEQ = 128
PROMPT = 16
NEW_TOKENS = 32


def _model(dtype: torch.dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    seeded()
    config = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=2, vocab_size=32000,
                         max_position_embeddings=2048)
    return LlamaForCausalLM(config).to(dtype).eval(), config


def _forward(dtype: torch.dtype) -> Built:
    model, config = _model(dtype)
    return Built(model, {"input_ids": torch.randint(0, config.vocab_size, (BATCH, SEQ))},
                 forward_step)


def _generate(dtype: torch.dtype) -> Built:
    model, config = _model(dtype)
    ids = torch.randint(0, config.vocab_size, (1, PROMPT))
    return Built(model, {"input_ids": ids}, generate_step(NEW_TOKENS), weight_passes=NEW_TOKENS)


def _train(dtype: torch.dtype) -> Built:
    model, config = _model(dtype)
    ids = torch.randint(0, config.vocab_size, (BATCH, SEQ))
    return Built(model, {"input_ids": ids, "labels": ids}, training_step("adamw", 1e-4),
                 weight_passes=TRAIN_WEIGHT_PASSES["adamw"])


WORKLOADS = [
    Workload("llama", f"forward b{BATCH} s{SEQ}", "inference", "tokens", BATCH * SEQ, _forward),
    Workload("llama", f"generate b1 {NEW_TOKENS} tokens", "inference", "tokens", NEW_TOKENS,
             _generate),
    Workload("llama", f"train step b{BATCH} s{SEQ} AdamW", "training", "training samples",
             BATCH, _train),
]
