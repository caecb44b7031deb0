"""ResNet-18-shaped classifier (Transformers' ResNet: basic blocks, depths 2-2-2-2),
random weights, batch 8 of 224x224: forward and an SGD-with-momentum training step."""

from __future__ import annotations

import torch

from ..workloads import Built, Workload
from .steps import TRAIN_WEIGHT_PASSES, forward_step, seeded, training_step

BATCH = 8


def _model(dtype: torch.dtype):
    from transformers import ResNetConfig, ResNetForImageClassification

    seeded()
    config = ResNetConfig(embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2],
                          layer_type="basic", num_labels=1000)
    return ResNetForImageClassification(config).to(dtype).eval()


def _pixels(dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(BATCH, 3, 224, 224).to(dtype)


def _forward(dtype: torch.dtype) -> Built:
    return Built(_model(dtype), {"pixel_values": _pixels(dtype)}, forward_step)


def _train(dtype: torch.dtype) -> Built:
    model = _model(dtype)
    inputs = {"pixel_values": _pixels(dtype), "labels": torch.randint(0, 1000, (BATCH,))}
    return Built(model, inputs, training_step("sgd", 1e-3),
                 weight_passes=TRAIN_WEIGHT_PASSES["sgd"])


WORKLOADS = [
    Workload("resnet", f"forward b{BATCH} 224px", "inference", "images", BATCH, _forward),
    Workload("resnet", f"train step b{BATCH} 224px SGD", "training", "training samples", BATCH,
             _train),
]
