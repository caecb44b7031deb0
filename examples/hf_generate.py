"""Transformers on neuron, unchanged: load a checkpoint with device_map="neuron", run a
text-generation pipeline, and generate with greedy search, sampling, beam search and the
dynamic and static caches, comparing the tokens with the CPU's.

No model hub is needed: a tiny random Llama is saved as a safetensors checkpoint first, and a
character-level tokenizer is built in place. Run:  .venv/bin/python examples/hf_generate.py
"""

import string
import tempfile
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast, pipeline)


def char_tokenizer():
    vocab = {t: i for i, t in enumerate(["<pad>", "<s>", "</s>", "<unk>"]
                                        + list(string.ascii_letters + string.digits + " .,;:!?'-\n"))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>", unk_token="<unk>")


def main():
    checkpoint = Path(tempfile.mkdtemp()) / "tiny-llama"
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(checkpoint)
    tokenizer = char_tokenizer()
    tokenizer.save_pretrained(checkpoint)

    # 1. Loading straight onto the device, in float32 and in bfloat16.
    cpu = AutoModelForCausalLM.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, device_map="neuron")
    bf16 = AutoModelForCausalLM.from_pretrained(checkpoint, device_map="neuron", torch_dtype=torch.bfloat16)
    p, q = next(model.parameters()), next(bf16.parameters())
    print(f"device_map='neuron': parameters on {p.device}, {p.dtype}; with torch_dtype: {q.device}, {q.dtype}")

    # 2. A pipeline on the device.
    pipe = pipeline("text-generation", model=str(checkpoint), device="neuron")
    text = pipe("Hello, neuron", max_new_tokens=16, do_sample=False)[0]["generated_text"]
    ref = pipeline("text-generation", model=str(checkpoint), device="cpu")(
        "Hello, neuron", max_new_tokens=16, do_sample=False)[0]["generated_text"]
    print(f"pipeline(device='neuron'): {text!r} (same as the CPU: {text == ref})")

    # 3. generate: each decoding strategy on neuron and on the CPU.
    batch = tokenizer(["Hi", "Once upon a time"], padding=True, padding_side="left", return_tensors="pt")
    strategies = {
        "greedy": dict(do_sample=False),
        "beam search": dict(num_beams=3, do_sample=False),
        "dynamic cache": dict(do_sample=False, cache_implementation="dynamic"),
        # On neuron, generate compiles static-cache decoding with torch.compile(backend="neuron").
        "static cache": dict(do_sample=False, cache_implementation="static"),
        "static, eager": dict(do_sample=False, cache_implementation="static", disable_compile=True),
    }
    for name, kw in strategies.items():
        got = model.generate(**batch.to("neuron"), max_new_tokens=12, **kw)
        want = cpu.generate(**batch.to("cpu"), max_new_tokens=12, **kw)
        print(f"{name:14s} same tokens as the CPU: {torch.equal(got.cpu(), want)}  {got[1].tolist()}")

    runs = []
    for _ in range(2):
        torch.manual_seed(42)
        runs.append(model.generate(**batch.to("neuron"), max_new_tokens=12, do_sample=True, top_k=20).cpu())
    print(f"sampling       same tokens for the same seed: {torch.equal(*runs)}  "
          f"{tokenizer.decode(runs[0][1], skip_special_tokens=True)!r}")


if __name__ == "__main__":
    main()
