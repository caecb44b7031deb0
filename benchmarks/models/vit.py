"""ViT-small-shaped image classifier (ViT-S/16: 12 layers, hidden 384, 6 heads), random
weights, batch 8 of 224x224 images."""

from __future__ import annotations

import torch

from ..workloads import Built, Workload
from .steps import forward_step, seeded

BATCH = 8


def _build(dtype: torch.dtype) -> Built:
    from transformers import ViTConfig, ViTForImageClassification

    seeded()
    config = ViTConfig(hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                       intermediate_size=1536, image_size=224, patch_size=16, num_labels=1000)
    model = ViTForImageClassification(config).to(dtype).eval()
    pixels = torch.randn(BATCH, 3, 224, 224).to(dtype)
    return Built(model, {"pixel_values": pixels}, forward_step)


WORKLOADS = [
    Workload("vit", f"forward b{BATCH} 224px", "inference", "images", BATCH, _build),
]
