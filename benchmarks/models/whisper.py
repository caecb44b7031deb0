"""Whisper-tiny-shaped encoder-decoder (4+4 layers, d_model 384, 6 heads, 80 mel bins),
random weights: batch 4 of 30 s log-mel inputs, greedy generation of 16 tokens."""

from __future__ import annotations

import torch

from ..workloads import Built, Workload
from .steps import generate_step, seeded

BATCH = 4
AUDIO_SECONDS = 30
NEW_TOKENS = 16
FRAMES = 3000  # 30 s at Whisper's 10 ms hop


def _build(dtype: torch.dtype) -> Built:
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    seeded()
    config = WhisperConfig(d_model=384, encoder_layers=4, decoder_layers=4,
                           encoder_attention_heads=6, decoder_attention_heads=6,
                           encoder_ffn_dim=1536, decoder_ffn_dim=1536, num_mel_bins=80,
                           vocab_size=51865, max_source_positions=1500, max_target_positions=448)
    model = WhisperForConditionalGeneration(config).to(dtype).eval()
    features = torch.randn(BATCH, 80, FRAMES).to(dtype)
    start = torch.full((BATCH, 1), config.decoder_start_token_id, dtype=torch.long)
    return Built(model, {"input_features": features, "decoder_input_ids": start},
                 generate_step(NEW_TOKENS, next_input="decoder_input_ids"),
                 weight_passes=NEW_TOKENS)


WORKLOADS = [
    Workload("whisper", f"generate b{BATCH} 30s audio {NEW_TOKENS} tokens", "inference",
             "audio seconds", BATCH * AUDIO_SECONDS, _build),
]
