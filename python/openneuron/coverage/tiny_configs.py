"""Tiny configs for every architecture, from the installed Transformers, with no network.

Most configs share a handful of size fields under a few spellings; shrinking them all
gives a model of a few hundred thousand parameters. General rules keep each architecture's
character: per-layer patterns keep one layer of every kind (a hybrid keeps its attention
layers), MHA/MQA stay so, heterogeneous per-layer overrides shrink in proportion, and the
config is rebuilt from its fields at the end so that __post_init__ re-derives what depends
on the sizes. Architectures that need more have an entry in OVERRIDES; those that cannot
run at all, with the reason, in KNOWN_CPU_ERRORS.
"""

from __future__ import annotations

import copy
from typing import Any

# Size fields and the tiny value each takes, under every spelling seen in Transformers.
TINY_SIZES: dict[str, Any] = {
    "vocab_size": 128,
    "hidden_size": 64, "n_embd": 64, "d_model": 64, "dim": 64, "embed_dim": 64, "n_embed": 64,
    "num_hidden_layers": 2, "n_layer": 2, "n_layers": 2, "num_layers": 2,
    "encoder_layers": 2, "decoder_layers": 2, "num_decoder_layers": 2,
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
    "v_head_dim": 16, "qk_head_dim": 16, "rotary_dim": 8,
    # grouped expert routing (DeepSeek-V3-style): 2 groups of 2 experts, the best group wins
    "n_group": 2, "topk_group": 1,
    # state-space and linear-attention layers
    "state_size": 8, "d_state": 8, "ssm_state_size": 8, "mamba_d_state": 8,
    "conv_kernel": 4, "expand": 2, "mamba_expand": 2, "time_step_rank": 8,
    "mamba_n_heads": 8, "mamba_d_head": 16, "mamba_d_ssm": 128, "mamba_headdim": 16,
    "mamba_n_groups": 1,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "sliding_window": 64, "attention_window": 64, "attention_window_size": 64, "num_buckets": 32,
    "lru_width": 64, "encoder_hash_byte_group_vocab": 128,
    # per-layer input embeddings (Gemma 3n / 4)
    "vocab_size_per_layer_input": 128, "hidden_size_per_layer_input": 16,
}

# Fields some default configs leave None although the modeling code reads them as numbers
# (real checkpoints always set them): filled with the tiny value, consistent with TINY_SIZES.
FILL_WHEN_NONE: dict[str, Any] = {
    "head_dim": 16, "num_key_value_heads": 4, "num_experts_per_tok": 2, "n_group": 2,
    "topk_group": 1, "n_routed_experts": 4, "n_shared_experts": 1,
    "vocab_size": 128,  # ESM's vocabulary comes from its tokenizer
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
    # Hybrids whose default config has no attention layer at all (all Mamba), or whose
    # pattern is a period longer than the tiny model: one Mamba and one attention layer.
    "bamba": {"attn_layer_indices": [1]},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1},
    # layer_types defaults to None, which the model indexes: one conv and one attention layer
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    # num_heads * head_dim must equal expand * hidden_size (2 * 64)
    "mamba2": {"num_heads": 8, "n_groups": 1},
    # Zamba's shared transformer block is tied across hybrid layers: it needs two of them
    "zamba": {"attention_hidden_size": 128, "attention_head_dim": 32, "mamba_dt_rank": 8,
              "num_hidden_layers": 3,
              "layers_block_type": ["linear_attention", "hybrid", "hybrid"]},
    # MLA: the rotary embedding reads head_dim, which must be the rope part of the head
    "longcat_flash": {"head_dim": 8},
    "xmod": {"default_language": "en_XX"},
    # the cache rounds hidden_size * qk_dim_factor up to a multiple of 64 and the layer does
    # not: at hidden size 64 only a factor of 1.0 makes the two agree
    "xlstm": {"embedding_dim": 64, "num_blocks": 2, "qk_dim_factor": 1.0},
    # num_hidden_layers counts cache slots: per-stack layers * H_cycles * (L_cycles + 1)
    "hrm_text": {"num_layers_per_stack": 1, "num_hidden_layers": 8},
    # the default layer pattern has indexed-attention layers but no indexer sizes (None)
    "qwen4_exp_text": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16,
                       "indexer_budget": 8, "indexer_compress_ratio": 4},
    # the last num_kv_shared_layers reuse the caches of earlier layers of the same type:
    # two producing layers (sliding, full), then two sharing ones
    "gemma3n_text": {"num_hidden_layers": 4, "num_kv_shared_layers": 2,
                     "layer_types": ["sliding_attention", "full_attention"] * 2,
                     "activation_sparsity_pattern": [0.95, 0.95, 0.0, 0.0]},
    # DbrxAttention reads attn_config.rope_theta, which DbrxAttentionConfig no longer
    # declares (Hub configs still carry it), and clamps q/k/v by clip_qkv, default None
    "dbrx": {"attn_config.rope_theta": 10000.0, "attn_config.clip_qkv": 8.0},
    # factorised embeddings: the embedding width must fit the tiny hidden size
    "squeezebert": {"embedding_size": 64},
    "mobilebert": {"embedding_size": 32, "intra_bottleneck_size": 32},
    # per-stage lists (one entry per stage, not per layer): two small stages
    "swin": {"embed_dim": 32, "depths": [1, 1], "num_heads": [2, 4]},
    "swinv2": {"embed_dim": 32, "depths": [1, 1], "num_heads": [2, 4]},
    "donut-swin": {"embed_dim": 32, "depths": [1, 1], "num_heads": [2, 4]},
    "convnext": {"hidden_sizes": [16, 32], "depths": [1, 1]},
    "convnextv2": {"hidden_sizes": [16, 32], "depths": [1, 1]},
    # the default rope_parameters is {}, but the model looks them up per layer type
    "cohere_compass_text": {"rope_parameters": {"full_attention": {"rope_type": "default",
                                                                    "rope_theta": 10000.0}}},
}

# Architectures whose tiny model cannot run generate on the CPU for a reason no config
# override can fix, and that reason (shown in the report next to the error).
KNOWN_CPU_ERRORS: dict[str, str] = {
    "blt": "Transformers bug: generate builds a DynamicCache from BltConfig, which has no "
           "num_hidden_layers (the layer counts live in its encoder/global/decoder parts), "
           "so the cache cannot be sized; the model itself never gets to run",
    "gemma3n": "Gemma3nForConditionalGeneration's vision tower is a TimmWrapperModel and "
               "timm is not in the pinned environment (gemma3n_text covers the text model)",
    "dinat": "DiNAT's neighbourhood attention needs the natten library, not in the pinned "
             "environment",
    "timm_wrapper": "wraps a timm model, and timm is not in the pinned environment",
    "gemma4_assistant": "a drafter for assisted generation: every layer reads the target "
                        "model's KV cache (num_kv_shared_layers == num_hidden_layers, enforced), "
                        "so no layer produces a cache and it cannot generate alone; its "
                        "default config also fails its own validation "
                        "(hidden_size_per_layer_input 256, must be 0)",
    "gemma4_unified_assistant": "a drafter for assisted generation: every layer reads the "
                                "target model's KV cache, so no layer produces one and it "
                                "cannot generate alone",
}

# Fields holding one entry per layer (or a repeating pattern of layer kinds). The tiny
# model keeps the first layer of every kind they name, so a hybrid keeps its attention
# layers next to its linear/recurrent ones and a MoE keeps a dense and a sparse layer.
PER_LAYER_LISTS = ("layer_types", "layers_block_type", "block_types", "attn_type_list",
                   "hybrid_override_pattern", "layer_type", "mlp_layer_types", "indexer_types",
                   "attention_layers", "attn_layers", "no_rope_layers", "layer_rope_theta",
                   "num_attention_heads_per_layer", "activation_sparsity_pattern")
# Fields listing layer indices: remapped onto the layers the tiny model keeps.
LAYER_INDEX_LISTS = ("mlp_only_layers", "moe_layers", "full_attn_idxs", "attn_layer_indices",
                     "cross_attention_layers")


def _shrink(config, sizes: dict[str, Any]) -> None:
    for key, value in sizes.items():
        if hasattr(config, key) and getattr(config, key) is not None:
            try:
                setattr(config, key, value)
            except Exception:  # some configs expose read-only derived properties
                pass


def _override(config, values: dict[str, Any]) -> None:
    """Sets every field the config has, even one left None (unlike _shrink)."""
    for key, value in values.items():
        if key in _field_names(config) or hasattr(config, key):
            _set(config, key, value)


def _fill_none(config) -> None:
    for key, value in FILL_WHEN_NONE.items():
        if key in _field_names(config) and getattr(config, key, None) is None:
            setattr(config, key, value)


def _field_names(config) -> set[str]:
    import dataclasses

    return {f.name for f in dataclasses.fields(config)} if dataclasses.is_dataclass(config) else set()


def _attention_kind(config) -> str | None:
    """'mha' (one key/value head per query head), 'mqa' (one key/value head) or None (GQA)."""
    heads = getattr(config, "num_attention_heads", None)
    kv_heads = getattr(config, "num_key_value_heads", None)
    if not isinstance(heads, int) or not isinstance(kv_heads, int):
        return None
    return "mha" if kv_heads == heads else "mqa" if kv_heads == 1 else None


def _keep_attention_kind(config, kind: str | None) -> None:
    """MHA and MQA stay so: latent attention (DeepSeek MLA) expands its keys to one head per
    query head and breaks when told there are fewer key/value heads."""
    if kind == "mha":
        _set(config, "num_key_value_heads", getattr(config, "num_attention_heads"))
    elif kind == "mqa":
        _set(config, "num_key_value_heads", 1)


def _kept_layers(config, original: int, tiny: int) -> list[int]:
    """Indices of the original layers the tiny model keeps: the first of every kind, then
    the first layers until there are `tiny`."""
    keep = set()
    for key in PER_LAYER_LISTS:
        value = getattr(config, key, None)
        if isinstance(value, (list, tuple, str)) and len(value) == original:
            first_of_kind = {}
            for index, kind in enumerate(value):
                first_of_kind.setdefault(repr(kind), index)
            keep |= set(first_of_kind.values())
    for key in LAYER_INDEX_LISTS:
        listed = set(getattr(config, key, None) or ())
        if listed and isinstance(next(iter(listed)), int):
            # one listed layer and one unlisted, as both kinds exist in the full model
            unlisted = [i for i in range(original) if i not in listed]
            keep.update([min(listed), *unlisted[:1]])
    for index in range(original):
        if len(keep) >= tiny:
            break
        keep.add(index)
    return sorted(keep)


def _keep_layer_kinds(config, original) -> list[int] | None:
    """Cuts every per-layer field down to the kept layers and sets the layer count to match;
    returns the kept layers' original indices."""
    tiny = getattr(config, "num_hidden_layers", None)
    if not isinstance(original, int) or not isinstance(tiny, int):
        return None
    if original <= tiny:
        return list(range(original))
    keep = _kept_layers(config, original, tiny)
    for key in PER_LAYER_LISTS:
        value = getattr(config, key, None)
        if isinstance(value, (list, tuple, str)) and len(value) == original:
            kept = [value[i] for i in keep]
            _set(config, key, "".join(kept) if isinstance(value, str) else type(value)(kept))
        elif isinstance(value, (list, tuple, str)) and len(value) > len(keep):
            _set(config, key, _first_of_each_kind(value, len(keep)))
    for key in LAYER_INDEX_LISTS:
        listed = getattr(config, key, None)
        if isinstance(listed, (list, tuple)) and listed and isinstance(listed[0], int):
            _set(config, key, type(listed)(new for new, old in enumerate(keep) if old in listed))
    _set(config, "num_hidden_layers", len(keep))
    return keep


def _take_per_layer_overrides(config) -> tuple[dict, dict]:
    """Removes a heterogeneous config's per-layer overrides (Gemma 4's wider global layers),
    so its global fields can be read and shrunk; returns them with the full-size globals."""
    spec = config.__dict__.pop("_heterogeneity_spec", None)
    if spec is None:
        return {}, {}
    attributes = {k for layer in spec.per_layer_overrides.values() for k in layer}
    return spec.per_layer_overrides, {k: getattr(config, k, None) for k in attributes}


def _restore_per_layer_overrides(config, overrides: dict, globals_before: dict,
                                 keep: list[int] | None) -> None:
    """Puts the per-layer overrides back on the kept layers, each size scaled as its global
    one was (a global head_dim twice the local one stays twice as large)."""
    if not overrides:
        return
    keep = keep if keep is not None else sorted(overrides)
    tiny = {}
    for new_index, old_index in enumerate(keep):
        if old_index in overrides:
            tiny[new_index] = {k: _scaled(v, globals_before.get(k), getattr(config, k, None))
                               for k, v in overrides[old_index].items()}
    config.per_layer_config = tiny


def _scaled(value, full_global, tiny_global):
    if isinstance(value, int) and isinstance(full_global, int) and isinstance(tiny_global, int) \
            and full_global and not isinstance(value, bool):
        return max(1, round(value * tiny_global / full_global))
    return value


def _first_of_each_kind(pattern, length: int):
    """A repeating pattern (recurrent, recurrent, attention) cut to `length`, every kind kept."""
    firsts = sorted({repr(k): i for i, k in reversed(list(enumerate(pattern)))}.values())
    fill = [i for i in range(len(pattern)) if i not in firsts]
    kept = [pattern[i] for i in sorted(firsts + fill[: max(0, length - len(firsts))])]
    return "".join(kept) if isinstance(pattern, str) else type(pattern)(kept)


def _set_dotted(config, values: dict[str, Any]) -> None:
    """Override keys "part.field" set a field of a sub-config, even one it does not declare."""
    for key, value in values.items():
        if "." in key:
            part, field = key.split(".", 1)
            config.__dict__[part].__dict__[field] = value


def _set(config, key: str, value) -> None:
    try:
        setattr(config, key, value)
    except Exception:  # a read-only property derived from other fields
        pass


def tiny_config(model_type: str):
    """A tiny config of `model_type`; nested sub-configs (text/vision) shrink too."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    for sub in (*_sub_configs(config), config):
        per_layer_overrides, full_globals = _take_per_layer_overrides(sub)
        original_layers = getattr(sub, "num_hidden_layers", None)
        attention_kind = _attention_kind(sub)
        _shrink(sub, TINY_SIZES)
        # a composite's entry applies to its parts; a part's own entry (qwen4_exp_text) too
        _override(sub, {**OVERRIDES.get(model_type, {}),
                        **OVERRIDES.get(getattr(sub, "model_type", None), {})})
        _fill_none(sub)
        _keep_attention_kind(sub, attention_kind)
        keep = _keep_layer_kinds(sub, original_layers)
        _restore_per_layer_overrides(sub, per_layer_overrides, full_globals, keep)
    _set_dotted(config, OVERRIDES.get(model_type, {}))
    for sub in (config, *_sub_configs(config)):
        if hasattr(sub, "pad_token_id") and (sub.pad_token_id is None or sub.pad_token_id >= 128):
            sub.pad_token_id = 0
        for key in ("bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id"):
            value = getattr(sub, key, None)
            if isinstance(value, int) and value >= 128:
                setattr(sub, key, 1)
            elif isinstance(value, list):
                setattr(sub, key, [v if v < 128 else 1 for v in value])
    return _rebuilt(config)


def _rebuilt(config):
    """The config rebuilt from its own fields, as from_pretrained would build it.

    Setting fields one by one skips __post_init__, so what it derives (DeepSeek's head_dim
    from qk_rope_head_dim, rotary sizes, layer patterns) keeps its full-size value; building
    anew from the dataclass fields alone recomputes those and runs the config's validation.
    """
    import dataclasses

    from transformers import PretrainedConfig

    if not dataclasses.is_dataclass(config):
        return config
    kwargs = {}
    for field in dataclasses.fields(config):
        # stored under its attribute_map name; read from vars, as getattr refuses per-layer
        # fields of a heterogeneous config
        stored = config.attribute_map.get(field.name, field.name)
        if field.init and stored in vars(config):
            value = vars(config)[stored]
            kwargs[field.name] = _rebuilt(value) if isinstance(value, PretrainedConfig) else value
    spec = config.__dict__.get("_heterogeneity_spec")
    if spec is not None:  # per_layer_config is not a field but must survive the rebuild
        kwargs["per_layer_config"] = copy.deepcopy(spec.per_layer_overrides)
    try:
        rebuilt = type(config)(**kwargs)
    except Exception:  # a config that does not rebuild from its fields: keep it as set
        return config
    for key, value in vars(config).items():  # extras a Hub config.json would carry too
        if key not in vars(rebuilt):
            rebuilt.__dict__[key] = value
    return rebuilt


def _sub_configs(config):
    """Every nested config (text, vision, audio, encoder, decoder, patcher, ...)."""
    from transformers import PretrainedConfig

    return [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]
