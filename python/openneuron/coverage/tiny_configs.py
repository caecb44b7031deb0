"""Tiny configs for every architecture, from the installed Transformers, with no network.

Most configs share a handful of size fields under a few spellings; shrinking them all
gives a model of a few hundred thousand parameters. Architectures that need more than
that have an entry in OVERRIDES.
"""

from __future__ import annotations

from typing import Any

# Size fields and the tiny value each takes, under every spelling seen in Transformers.
TINY_SIZES: dict[str, Any] = {
    "vocab_size": 128,
    "hidden_size": 64, "n_embd": 64, "d_model": 64, "dim": 64, "embed_dim": 64, "n_embed": 64,
    "num_hidden_layers": 2, "n_layer": 2, "n_layers": 2, "num_layers": 2,
    "encoder_layers": 2, "decoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4,
    "encoder_attention_heads": 4, "decoder_attention_heads": 4,
    "num_key_value_heads": 2, "n_kv_heads": 2, "num_kv_heads": 2, "multi_query_group_num": 2,
    "intermediate_size": 96, "n_inner": 96, "ffn_dim": 96, "encoder_ffn_dim": 96,
    "decoder_ffn_dim": 96, "ffn_hidden_size": 96, "d_ff": 96,
    "head_dim": 16, "d_kv": 16, "kv_channels": 16,
    "max_position_embeddings": 256, "n_positions": 256, "n_ctx": 256, "seq_length": 256,
    "max_sequence_length": 256,
    # mixture of experts
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_topk": 2, "top_k": 2, "moe_k": 2,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "n_shared_experts": 1, "num_shared_experts": 1,
    # low-rank attention (DeepSeek-style)
    "q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
    "v_head_dim": 16,
    # state-space and linear-attention layers
    "state_size": 8, "d_state": 8, "ssm_state_size": 8, "mamba_d_state": 8,
    "conv_kernel": 4, "expand": 2, "mamba_expand": 2, "time_step_rank": 8,
    "mamba_n_heads": 8, "mamba_d_head": 16, "mamba_headdim": 16, "mamba_n_groups": 1,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "sliding_window": 64, "attention_window": 64, "num_buckets": 32,
}

# Per-architecture additions (applied after TINY_SIZES).
OVERRIDES: dict[str, dict[str, Any]] = {
    "reformer": {"axial_pos_shape": [16, 16], "axial_pos_embds_dim": [32, 32],
                 "attn_layers": ["local", "local"], "is_decoder": True},
    "xlnet": {"d_inner": 96, "mem_len": None},
    "transfo-xl": {"d_embed": 64, "d_inner": 96},
    "ctrl": {"dff": 96},
    "bert": {"is_decoder": True},
    "rwkv": {"attention_hidden_size": 64, "intermediate_size": 128},
    "cpmant": {"dim_model": 64, "dim_ff": 96, "dim_head": 16, "num_layers": 2},
    "funnel": {"block_sizes": [1, 1]},
}

# Fields holding one entry per layer: trimmed to the tiny layer count.
PER_LAYER_LISTS = ("layer_types", "layers_block_type", "block_types", "attn_type_list",
                   "mlp_only_layers", "hybrid_override_pattern", "layer_type")


def _shrink(config, sizes: dict[str, Any]) -> None:
    for key, value in sizes.items():
        if hasattr(config, key) and getattr(config, key) is not None:
            try:
                setattr(config, key, value)
            except Exception:  # some configs expose read-only derived properties
                pass


def _trim_layer_lists(config) -> None:
    layers = getattr(config, "num_hidden_layers", None)
    if not isinstance(layers, int):
        return
    for key in PER_LAYER_LISTS:
        value = getattr(config, key, None)
        if isinstance(value, (list, tuple)) and len(value) > layers:
            try:
                setattr(config, key, type(value)(value[:layers]))
            except Exception:
                pass
        elif isinstance(value, str) and len(value) > layers:
            try:
                setattr(config, key, value[:layers])
            except Exception:
                pass


def tiny_config(model_type: str):
    """A tiny config of `model_type`; nested sub-configs (text/vision) shrink too."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    sizes = {**TINY_SIZES, **OVERRIDES.get(model_type, {})}
    for sub in _sub_configs(config):
        _shrink(sub, sizes)
        _trim_layer_lists(sub)
    _shrink(config, sizes)
    _trim_layer_lists(config)
    for sub in (config, *_sub_configs(config)):
        if hasattr(sub, "pad_token_id") and (sub.pad_token_id is None or sub.pad_token_id >= 128):
            sub.pad_token_id = 0
        for key in ("bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id"):
            value = getattr(sub, key, None)
            if isinstance(value, int) and value >= 128:
                setattr(sub, key, 1)
            elif isinstance(value, list):
                setattr(sub, key, [v if v < 128 else 1 for v in value])
    return config


def _sub_configs(config):
    """Every nested config (text, vision, audio, encoder, decoder, patcher, ...)."""
    from transformers import PretrainedConfig

    return [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]
