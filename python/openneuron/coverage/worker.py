"""Runs architectures one by one and prints one JSON result per line.

Invoked by the driver in a subprocess (`python -m openneuron.coverage.worker MAPPING ARCH...`)
so that a crash or hang costs one architecture, not the sweep.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
import traceback
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

import openneuron  # noqa: E402  (for its statistics; the device itself autoloads)

from .mappings import MAPPINGS, Mapping  # noqa: E402
from .tiny_configs import KNOWN_CPU_ERRORS, tiny_config  # noqa: E402

NEW_TOKENS = 8
ATOL = RTOL = 1e-3


def _inputs(model, config, mapping: Mapping) -> dict:
    g = torch.Generator().manual_seed(0)
    name = getattr(model, "main_input_name", "input_ids")
    if name == "pixel_values":
        cfg = getattr(config, "vision_config", config)
        size = getattr(cfg, "image_size", 32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        channels = getattr(cfg, "num_channels", 3)
        return {"pixel_values": torch.randn(1, channels, size, size, generator=g)}
    if name == "input_features":
        bins = getattr(config, "num_mel_bins", 80)
        frames = 2 * getattr(config, "max_source_positions", 1500)
        return {"input_features": torch.randn(1, bins, frames, generator=g)}
    if name == "input_values":
        return {"input_values": torch.randn(1, 16000, generator=g)}
    vocab = getattr(config, "vocab_size", None) or getattr(
        getattr(config, "text_config", None), "vocab_size", 128)
    # audio decoders (MusicGen) take one row of ids per codebook
    rows = getattr(config, "num_codebooks", None) or 1
    ids = torch.randint(3, min(vocab, 128), (rows, 6), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _build_model(auto, config):
    """The model `auto` builds for `config`, and the config it took: a composite's part when
    the model class takes only that (MusicgenForCausalLM takes the decoder config)."""
    from transformers.models.auto.auto_factory import _get_model_class

    from .tiny_configs import _sub_configs

    if config.architectures is None:  # Auto classes mapping a type to several classes
        config.architectures = []     # iterate it to choose one, and fail on None
    model_class = _get_model_class(config, auto._model_mapping)
    wanted = getattr(model_class, "config_class", None)
    if wanted is None or isinstance(config, wanted):
        return auto.from_config(config), config
    part = next((sub for sub in _sub_configs(config) if isinstance(sub, wanted)), config)
    return model_class._from_config(part), part


def _redraw_zero_linear_weights(model, config) -> None:
    """Draws random values for Linear weights initialised to all zeros.

    Some architectures zero-initialise their MoE router (afmoe): then every routing score
    ties exactly, and which of the tied experts topk returns is unspecified, so the CPU and
    neuron may pick different ones with both right. Trained checkpoints never tie like that.
    """
    std = getattr(config, "initializer_range", None) or 0.02
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and not module.weight.any():
                module.weight.copy_(torch.randn(module.weight.shape, generator=g) * std)


def _to(inputs: dict, device) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def _run(model, inputs: dict, mapping: Mapping, pad_id: int):
    with torch.no_grad():
        if mapping.generates:
            out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False,
                                 num_beams=1, output_logits=True, return_dict_in_generate=True,
                                 pad_token_id=pad_id, **_generation_defaults(model, pad_id))
            logits = torch.stack([l.float().cpu() for l in out.logits]) if out.logits else None
            return out.sequences.cpu(), logits
        out = model(**inputs)
        logits = out.logits if hasattr(out, "logits") else out[0]
        return None, logits.float().cpu()


def _generation_defaults(model, pad_id: int) -> dict:
    """generate arguments real checkpoints carry in generation_config.json and a model built
    from a default config can lack: where the decoder starts (T5 and MusicGen start from the
    pad token) and, for MusicGen's own generate, num_return_sequences."""
    gen = model.generation_config
    if getattr(model.config, "num_codebooks", None):
        return {"decoder_start_token_id": pad_id, "num_return_sequences": 1}
    if model.config.is_encoder_decoder and gen.decoder_start_token_id is None \
            and gen.bos_token_id is None:
        return {"decoder_start_token_id": pad_id}
    return {}


def _first_op(message: str) -> str | None:
    for token in message.replace("'", " ").replace('"', " ").split():
        if token.startswith("aten::"):
            return token.rstrip(".,;:")
    return None


def run_one(mapping: Mapping, arch: str, compiled: bool) -> dict:
    from transformers import AutoModelForCausalLM  # noqa: F401  (imports the auto classes)
    import transformers

    result: dict = {"arch": arch, "mapping": mapping.name}
    start = time.perf_counter()
    try:
        config = tiny_config(arch)
        auto = getattr(transformers, mapping.auto_class)
        torch.manual_seed(0)
        model, config = _build_model(auto, config)
        model = model.eval()
        _redraw_zero_linear_weights(model, config)
        result["params"] = sum(p.numel() for p in model.parameters())
        pad_id = getattr(config, "pad_token_id", None) or 0
        inputs = _inputs(model, config, mapping)
        cpu_tokens, cpu_logits = _run(model, inputs, mapping, pad_id)
    except Exception as exc:  # the tiny model does not even run on the CPU: a harness gap
        result.update(status="cpu-error", message=_short(exc))
        if arch in KNOWN_CPU_ERRORS:
            result["reason"] = KNOWN_CPU_ERRORS[arch]
        return result
    try:
        dev_model = copy.deepcopy(model).to("neuron")
        if compiled:
            dev_model.forward = torch.compile(dev_model.forward, backend="neuron")
        openneuron.reset_fallback_stats()
        dev_tokens, dev_logits = _run(dev_model, _to(inputs, "neuron"), mapping, pad_id)
        result["fallbacks"] = openneuron.fallback_stats()
    except Exception as exc:
        if os.environ.get("OPENNEURON_COVERAGE_DEBUG"):
            traceback.print_exc()
        msg = _short(exc)
        result.update(status="error", message=msg, first_op=_first_op(msg),
                      where=_user_frame(exc), fallbacks=openneuron.fallback_stats())
        return result
    finally:
        result["seconds"] = round(time.perf_counter() - start, 2)
    same_tokens = cpu_tokens is None or torch.equal(cpu_tokens, dev_tokens)
    if cpu_logits is not None and dev_logits is not None and cpu_logits.shape == dev_logits.shape:
        diff = (cpu_logits - dev_logits).abs().max().item() if cpu_logits.numel() else 0.0
        close = torch.allclose(dev_logits, cpu_logits, atol=ATOL, rtol=RTOL)
    else:
        diff, close = float("inf"), cpu_logits is None and dev_logits is None
    result["max_logit_diff"] = diff
    result["same_tokens"] = same_tokens
    if not (same_tokens and close):
        result["status"] = "mismatch"
    elif result["fallbacks"]:
        result["status"] = "pass-with-fallback"
    else:
        result["status"] = "pass"
    return result


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:400] if text else type(exc).__name__


def _user_frame(exc: BaseException) -> str | None:
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if "transformers" in frame.filename:
            return f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno} {frame.name}"
    return None


def main(argv: list[str]) -> None:
    warnings.simplefilter("ignore")
    mapping = MAPPINGS[argv[0]]
    compiled = argv[1] == "compiled"
    for arch in argv[2:]:
        print(json.dumps(run_one(mapping, arch, compiled)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
