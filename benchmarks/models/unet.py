"""A small Diffusers UNet2DModel (4 resolutions, 32-128 channels, self-attention at 8x8 and
16x16), random weights: one denoising step (UNet forward + DDIM scheduler update) on a
batch of 2 64x64 images."""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..workloads import Built, Workload
from .steps import seeded

BATCH = 2
SIZE = 64


def _denoise_step(model: torch.nn.Module, inputs: dict[str, Any]) -> Callable[[], Any]:
    from diffusers import DDIMScheduler

    scheduler = DDIMScheduler(num_train_timesteps=1000)
    scheduler.set_timesteps(50)
    t = int(scheduler.timesteps[0])

    def step():
        with torch.no_grad():
            noise = model(inputs["sample"], inputs["timestep"]).sample
            return scheduler.step(noise, t, inputs["sample"]).prev_sample

    return step


def _build(dtype: torch.dtype) -> Built:
    from diffusers import UNet2DModel

    seeded()
    model = UNet2DModel(
        sample_size=SIZE, in_channels=3, out_channels=3, layers_per_block=1,
        block_out_channels=(32, 64, 128, 128),
        down_block_types=("DownBlock2D", "DownBlock2D", "AttnDownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "AttnUpBlock2D", "UpBlock2D", "UpBlock2D"),
    ).to(dtype).eval()
    inputs = {"sample": torch.randn(BATCH, 3, SIZE, SIZE).to(dtype),
              "timestep": torch.tensor([980] * BATCH)}
    return Built(model, inputs, _denoise_step)


WORKLOADS = [
    Workload("unet", f"denoise step b{BATCH} {SIZE}px", "inference", "denoising steps", BATCH,
             _build),
]
