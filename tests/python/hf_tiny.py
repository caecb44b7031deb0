"""Shared pieces of the Hugging Face "works unchanged" tests (tests/python/test_hf_*.py):
tiny configs, a character-level tokenizer built offline, and a fixture that records which
ops fell back to the CPU during each test."""

from __future__ import annotations

import string
import warnings

import pytest
import torch

import openneuron

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
CHARS = string.ascii_letters + string.digits + " .,;:!?'-\n"


def tiny_llama_config(**overrides):
    from transformers import LlamaConfig

    kw = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(overrides)
    return LlamaConfig(**kw)


def tiny_llama(seed: int = 0, **overrides):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_llama_config(**overrides)).eval()


def char_tokenizer():
    """A character-level fast tokenizer (ids < 128), built with no download."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + list(CHARS))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>", unk_token="<unk>")


@pytest.fixture(autouse=True)
def record_fallbacks(request, monkeypatch):
    """Counts the ops that ran on the CPU fallback (and, where the build has them, through
    host-library kernels) during the test and reports them: printed (see `pytest -rP`), and
    in the test's user_properties as 'fallbacks' / 'host_library'."""
    monkeypatch.setenv("OPENNEURON_FALLBACK", "warn")
    has_library = hasattr(openneuron, "library_stats")
    openneuron.reset_fallback_stats()
    if has_library:
        openneuron.reset_library_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    stats = dict(sorted(openneuron.fallback_stats().items()))
    library = dict(sorted(openneuron.library_stats().items())) if has_library else {}
    warned = sorted({str(w.message).split(" ")[0] for w in caught
                     if "has no native neuron kernel" in str(w.message)})
    request.node.user_properties.append(("fallbacks", stats))
    request.node.user_properties.append(("host_library", library))
    print(f"\n[fallbacks] {request.node.name}: {stats or 'none'}"
          + (f" (warned: {warned})" if warned else "")
          + (f"; host-library kernels: {library}" if library else ""))
