"""The kinds of step the model workloads share: forward, greedy generation, training.

Each returns a zero-argument callable that does one call of work and returns without
synchronising: the timer synchronises the device, so asynchronous execution counts.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach a model hub


def seeded(seed: int = 0) -> None:
    """Same random weights and inputs for every column and every run."""
    torch.manual_seed(seed)


def forward_step(model: torch.nn.Module, inputs: dict[str, Any]) -> Callable[[], Any]:
    def step():
        with torch.no_grad():
            return model(**inputs)

    return step


def greedy_generate(model: torch.nn.Module, prompt: dict[str, Any], new_tokens: int,
                    next_input: str = "input_ids") -> torch.Tensor:
    """Greedy decoding with the model's KV cache: one prefill call, then one call per token.

    Written out instead of `model.generate` so that the same loop runs eager and under
    torch.compile, and so that no token is copied to the host (no sync per token).
    `next_input` names the argument that carries the newly generated token
    ("decoder_input_ids" for encoder-decoder models).
    """
    with torch.no_grad():
        out = model(**prompt, use_cache=True)
        token = out.logits[:, -1:].argmax(-1)
        carry = {}
        if getattr(out, "encoder_last_hidden_state", None) is not None:
            carry["encoder_outputs"] = (out.encoder_last_hidden_state,)
        for _ in range(new_tokens - 1):
            out = model(**{next_input: token}, **carry, past_key_values=out.past_key_values,
                        use_cache=True)
            token = out.logits[:, -1:].argmax(-1)
    return token


def generate_step(new_tokens: int, next_input: str = "input_ids"):
    def make(model: torch.nn.Module, inputs: dict[str, Any]) -> Callable[[], Any]:
        return lambda: greedy_generate(model, inputs, new_tokens, next_input)

    return make


def training_step(optimizer: str, lr: float):
    """One step: zero grads, forward with labels (the model computes its loss), backward,
    optimizer step. The optimizer is created per column, on that column's parameters."""

    def make(model: torch.nn.Module, inputs: dict[str, Any]) -> Callable[[], Any]:
        model.train()
        params = list(model.parameters())
        if optimizer == "adamw":
            opt = torch.optim.AdamW(params, lr=lr)
        elif optimizer == "sgd":
            opt = torch.optim.SGD(params, lr=lr, momentum=0.9)
        else:
            raise ValueError(f"unknown optimizer {optimizer!r}")

        def step():
            opt.zero_grad(set_to_none=True)
            loss = model(**inputs).loss
            loss.backward()
            opt.step()
            return loss.detach()

        return step

    return make


# Weight traffic per training step, in multiples of the parameter bytes (roofline input):
# forward read, backward read, gradient write, then the optimizer reads parameter,
# gradient and state and writes parameter and state.
TRAIN_WEIGHT_PASSES = {"adamw": 3 + 7, "sgd": 3 + 5}
