"""Diffusers on neuron, unchanged: a UNet2D pipeline (DDPM) and two transformer pipelines (DiT
and PixArt-alpha) built from tiny configs, moved with .to("neuron"), a few denoising steps
with a fixed generator, images compared with the CPU's. No download: PixArt is given prompt
embeddings instead of a text encoder.  Run:  .venv/bin/python examples/hf_diffusers.py
"""

import numpy as np
import torch
from diffusers import (AutoencoderKL, DDIMScheduler, DDPMPipeline, DDPMScheduler, DiTPipeline,
                       DiTTransformer2DModel, PixArtAlphaPipeline, PixArtTransformer2DModel,
                       UNet2DModel)


def tiny_vae():
    torch.manual_seed(0)
    return AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16),
                         layers_per_block=1, norm_num_groups=8, sample_size=16,
                         down_block_types=("DownEncoderBlock2D",) * 2,
                         up_block_types=("UpDecoderBlock2D",) * 2).eval()


def ddpm():
    torch.manual_seed(0)
    unet = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(16, 32), norm_num_groups=8, attention_head_dim=8,
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D")).eval()
    return DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=100)), dict(batch_size=2)


def dit():
    torch.manual_seed(0)
    tr = DiTTransformer2DModel(sample_size=8, in_channels=4, out_channels=8, num_layers=2,
                               num_attention_heads=2, attention_head_dim=8, patch_size=2,
                               num_embeds_ada_norm=1000, norm_type="ada_norm_zero").eval()
    pipe = DiTPipeline(transformer=tr, vae=tiny_vae(), scheduler=DDIMScheduler(num_train_timesteps=100))
    return pipe, dict(class_labels=[1, 3], guidance_scale=2.0)


def pixart():
    torch.manual_seed(0)
    tr = PixArtTransformer2DModel(sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8,
                                  num_attention_heads=2, caption_channels=32, in_channels=4,
                                  cross_attention_dim=16, out_channels=8, attention_bias=True,
                                  activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
                                  norm_type="ada_norm_single", norm_elementwise_affine=False,
                                  norm_eps=1e-6).eval()
    pipe = PixArtAlphaPipeline(tokenizer=None, text_encoder=None, vae=tiny_vae(), transformer=tr,
                               scheduler=DDIMScheduler(num_train_timesteps=100))
    g = torch.Generator().manual_seed(1)
    emb, neg = torch.randn(1, 6, 32, generator=g), torch.randn(1, 6, 32, generator=g)
    return pipe, dict(prompt_embeds=emb, negative_prompt=None, negative_prompt_embeds=neg, guidance_scale=3.0,
                      height=16, width=16, use_resolution_binning=False)


def run(make, device):
    pipe, kw = make()
    pipe = pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    if make is pixart:  # the attention masks go with the embeddings, on the pipeline's device
        kw.update(prompt_attention_mask=torch.ones(1, 6, dtype=torch.long, device=device),
                  negative_prompt_attention_mask=torch.ones(1, 6, dtype=torch.long, device=device))
    return pipe(generator=torch.Generator("cpu").manual_seed(0), num_inference_steps=4,
                output_type="np", **kw).images


def main():
    for make in (ddpm, dit, pixart):
        got, ref = run(make, "neuron"), run(make, "cpu")
        print(f"{make.__name__:7s} images {got.shape}: max |neuron - cpu| = {np.abs(got - ref).max():.2e}")


if __name__ == "__main__":
    main()
