"""Diffusers unchanged on neuron: pipelines built from tiny configs (no download), moved with
.to("neuron"), a few denoising steps with a fixed generator, images equal to the CPU's."""

import numpy as np
import pytest
import torch

pytest.importorskip("diffusers")

from diffusers import (AutoencoderKL, DDIMPipeline, DDIMScheduler, DDPMPipeline,  # noqa: E402
                       DDPMScheduler, DiTPipeline, DiTTransformer2DModel, PixArtAlphaPipeline,
                       PixArtTransformer2DModel, UNet2DModel)

from hf_tiny import record_fallbacks  # noqa: E402,F401

ATOL = 1e-5  # images are in [0, 1]; measured differences are below 1e-6


# Built from configs, models are in training mode; from_pretrained would give eval mode (DiT
# would otherwise drop class labels at random: its classifier-free-guidance dropout).
def tiny_unet():
    torch.manual_seed(0)
    return UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(16, 32), norm_num_groups=8, attention_head_dim=8,
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D")).eval()


def tiny_vae():
    torch.manual_seed(0)
    return AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16),
                         layers_per_block=1, norm_num_groups=8, sample_size=16,
                         down_block_types=("DownEncoderBlock2D",) * 2,
                         up_block_types=("UpDecoderBlock2D",) * 2).eval()


def _both(make_pipe, neuron, per_device=lambda device: {}, **call):
    """Runs a pipeline on the CPU and on neuron with the same components and seed."""
    out = {}
    for device in ("cpu", neuron):
        pipe = make_pipe().to(device)
        pipe.set_progress_bar_config(disable=True)
        assert pipe.device.type == torch.device(device).type
        images = pipe(generator=torch.Generator("cpu").manual_seed(0), output_type="np", **call,
                      **per_device(device)).images
        out[torch.device(device).type] = images
    ref, got = out["cpu"], out["neuron"]
    assert got.shape == ref.shape and np.isfinite(got).all()
    assert ref.std() > 0.01  # a real image, not a constant
    return ref, got


def test_ddpm_unet2d_pipeline_matches_cpu(neuron):
    ref, got = _both(lambda: DDPMPipeline(unet=tiny_unet(), scheduler=DDPMScheduler(num_train_timesteps=100)),
                     neuron, batch_size=2, num_inference_steps=4)
    assert got.shape == (2, 16, 16, 3)
    np.testing.assert_allclose(got, ref, atol=ATOL, rtol=0)


def test_ddim_unet2d_pipeline_matches_cpu(neuron):
    ref, got = _both(lambda: DDIMPipeline(unet=tiny_unet(), scheduler=DDIMScheduler(num_train_timesteps=100)),
                     neuron, batch_size=1, num_inference_steps=4, eta=0.0)
    np.testing.assert_allclose(got, ref, atol=ATOL, rtol=0)


def test_dit_transformer_pipeline_matches_cpu(neuron):
    def make():
        torch.manual_seed(0)
        dit = DiTTransformer2DModel(sample_size=8, in_channels=4, out_channels=8, num_layers=2,
                                    num_attention_heads=2, attention_head_dim=8, patch_size=2,
                                    num_embeds_ada_norm=1000, norm_type="ada_norm_zero").eval()
        return DiTPipeline(transformer=dit, vae=tiny_vae(), scheduler=DDIMScheduler(num_train_timesteps=100))

    ref, got = _both(make, neuron, class_labels=[1, 3], num_inference_steps=3, guidance_scale=2.0)
    assert got.shape == (2, 16, 16, 3)
    np.testing.assert_allclose(got, ref, atol=ATOL, rtol=0)


def test_pixart_transformer_pipeline_matches_cpu(neuron):
    """PixArt-alpha has a neuron code path of its own (timesteps kept on the CPU). No text
    encoder: the prompt embeddings are given, as a pipeline with precomputed embeddings does."""
    g = torch.Generator().manual_seed(1)
    emb, neg = torch.randn(1, 6, 32, generator=g), torch.randn(1, 6, 32, generator=g)

    def make():
        torch.manual_seed(0)
        tr = PixArtTransformer2DModel(sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8,
                                      num_attention_heads=2, caption_channels=32, in_channels=4,
                                      cross_attention_dim=16, out_channels=8, attention_bias=True,
                                      activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
                                      norm_type="ada_norm_single", norm_elementwise_affine=False,
                                      norm_eps=1e-6).eval()
        return PixArtAlphaPipeline(tokenizer=None, text_encoder=None, vae=tiny_vae(), transformer=tr,
                                   scheduler=DDIMScheduler(num_train_timesteps=100))

    def masks(device):  # given with the embeddings, so on the pipeline's device
        mask = torch.ones(1, 6, dtype=torch.long, device=device)
        return dict(prompt_attention_mask=mask, negative_prompt_attention_mask=mask)

    ref, got = _both(make, neuron, masks, prompt=None, prompt_embeds=emb, negative_prompt=None,
                     negative_prompt_embeds=neg, num_inference_steps=3, guidance_scale=3.0, height=16, width=16,
                     use_resolution_binning=False)
    assert got.shape == (1, 16, 16, 3)
    np.testing.assert_allclose(got, ref, atol=ATOL, rtol=0)
