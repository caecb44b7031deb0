"""Transformers unchanged on neuron: from_pretrained(device_map="neuron"), pipeline(device=
"neuron"), generate (greedy, sampling, beam search, dynamic and static caches) against the CPU.
A tiny Llama is saved as a safetensors checkpoint in each test; no hub."""

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, pipeline  # noqa: E402

from hf_tiny import char_tokenizer, record_fallbacks, tiny_llama  # noqa: E402,F401

PROMPTS = torch.tensor([[0, 0, 1, 40, 17, 9, 33],      # left-padded
                        [1, 5, 9, 17, 33, 40, 77]])
MASK = (PROMPTS != 0).long()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny_llama")
    tiny_llama(seed=0).save_pretrained(d)  # safetensors by default
    return d


def _gen(model, device, **kw):
    out = model.generate(input_ids=PROMPTS.to(device), attention_mask=MASK.to(device),
                         max_new_tokens=kw.pop("max_new_tokens", 10), pad_token_id=0, **kw)
    assert out.device.type == torch.device(device).type
    return out.cpu()


def test_from_pretrained_device_map_neuron_float32(checkpoint, neuron):
    assert (checkpoint / "model.safetensors").exists()
    cpu = AutoModelForCausalLM.from_pretrained(checkpoint)
    dev = AutoModelForCausalLM.from_pretrained(checkpoint, device_map="neuron")
    params = list(dev.parameters())
    assert {p.device.type for p in params} == {"neuron"} and {p.dtype for p in params} == {torch.float32}
    assert dev.device.type == "neuron"
    with torch.no_grad():
        ref = cpu(PROMPTS, attention_mask=MASK).logits
        got = dev(PROMPTS.to(neuron), attention_mask=MASK.to(neuron)).logits
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-4, atol=1e-4)
    assert torch.equal(_gen(dev, neuron), _gen(cpu, "cpu"))


def test_from_pretrained_device_map_neuron_bfloat16(checkpoint, neuron):
    cpu = AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.bfloat16)
    dev = AutoModelForCausalLM.from_pretrained(checkpoint, device_map="neuron", torch_dtype=torch.bfloat16)
    assert {(p.device.type, p.dtype) for p in dev.parameters()} == {("neuron", torch.bfloat16)}
    # the weights are the checkpoint's, rounded to bf16 exactly as on the CPU
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters()):
        assert torch.equal(p.cpu(), q), name
    with torch.no_grad():
        ref = cpu(PROMPTS, attention_mask=MASK).logits.float()
        got = dev(PROMPTS.to(neuron), attention_mask=MASK.to(neuron)).logits
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float().cpu(), ref, rtol=0, atol=1e-2)  # logits up to ~0.5; 1 bf16 ulp = 0.004
    tokens = _gen(dev, neuron, max_new_tokens=6)
    assert tokens.shape == (2, PROMPTS.shape[1] + 6) and int(tokens.max()) < 128


def test_pipeline_text_generation_device_neuron(checkpoint, neuron):
    tok = char_tokenizer()
    ref = pipeline("text-generation", model=str(checkpoint), tokenizer=tok, device="cpu")
    pipe = pipeline("text-generation", model=str(checkpoint), tokenizer=tok, device="neuron")
    assert pipe.device.type == "neuron" and pipe.model.device.type == "neuron"
    kw = dict(max_new_tokens=12, do_sample=False)
    got = pipe("Hello, neuron", **kw)[0]["generated_text"]
    want = ref("Hello, neuron", **kw)[0]["generated_text"]
    assert got == want and got.startswith("Hello, neuron") and len(got) > len("Hello, neuron")


@pytest.fixture(scope="module")
def models(checkpoint):
    cpu = AutoModelForCausalLM.from_pretrained(checkpoint)
    dev = AutoModelForCausalLM.from_pretrained(checkpoint, device_map="neuron")
    return cpu, dev


def test_greedy_same_tokens_as_cpu(models, neuron):
    cpu, dev = models
    got, want = _gen(dev, neuron, do_sample=False), _gen(cpu, "cpu", do_sample=False)
    assert torch.equal(got, want)
    assert torch.equal(got[:, :PROMPTS.shape[1]], PROMPTS)


def test_beam_search_same_tokens_as_cpu(models, neuron):
    cpu, dev = models
    kw = dict(num_beams=3, num_return_sequences=2, do_sample=False, max_new_tokens=8)
    got, want = _gen(dev, neuron, **kw), _gen(cpu, "cpu", **kw)
    assert got.shape == (4, PROMPTS.shape[1] + 8)
    assert torch.equal(got, want)


def test_dynamic_cache_same_tokens_as_cpu_and_as_no_cache(models, neuron):
    from transformers import DynamicCache

    cpu, dev = models
    cache = DynamicCache(config=dev.config)
    got = _gen(dev, neuron, do_sample=False, past_key_values=cache)
    assert cache.get_seq_length() == PROMPTS.shape[1] + 10 - 1
    assert all(layer.keys.device.type == "neuron" for layer in cache.layers)
    assert torch.equal(got, _gen(cpu, "cpu", do_sample=False))
    assert torch.equal(got, _gen(dev, neuron, do_sample=False, use_cache=False))


def test_static_cache_same_tokens_as_cpu_eager(models, neuron):
    """cache_implementation="static", run eagerly (disable_compile=True) on both devices."""
    cpu, dev = models
    kw = dict(do_sample=False, cache_implementation="static", disable_compile=True)
    assert torch.equal(_gen(dev, neuron, **kw), _gen(cpu, "cpu", do_sample=False))


def test_static_cache_default_autocompile_same_tokens_as_cpu(models, neuron):
    """cache_implementation="static" alone: Transformers compiles the decoding step with
    torch.compile(backend="neuron") (its default CompileConfig for neuron devices)."""
    cpu, dev = models
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    got = _gen(dev, neuron, do_sample=False, cache_implementation="static")
    assert torch.equal(got, _gen(cpu, "cpu", do_sample=False))
    metrics = torch.neuron.get_dynamo_metrics()
    assert metrics["dynamo_graphs"] >= 1 and metrics["inference_graphs"] >= 1
    assert metrics["fallback_graphs"] == 0


def test_compiled_forward_with_dynamic_shapes_generates_from_three_recordings(models, neuron):
    """A growing DynamicCache under torch.compile(dynamic=True): three decode lengths are
    recorded, every later length gets its program from the symbolic recording."""
    cpu, dev = models
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    forward = dev.forward
    dev.forward = torch.compile(forward, backend="neuron", dynamic=True)
    try:
        got = _gen(dev, neuron, do_sample=False, max_new_tokens=24)
    finally:
        dev.forward = forward
    assert torch.equal(got, _gen(cpu, "cpu", do_sample=False, max_new_tokens=24))
    m = torch.neuron.get_dynamo_metrics()
    # the prompt's graph and the decode graph; the decode graph recorded at 3 lengths
    assert m["inference_graphs"] == 2 and m["whole_graph_programs"] == 4, m
    assert m["symbolic_instances"] == 24 - 1 - 3 and m["capture_failures"] == {}, m


def test_sampling_reproducible_with_seed_and_valid(models, neuron):
    _, dev = models
    kw = dict(do_sample=True, top_k=20, temperature=0.8, max_new_tokens=12)
    torch.manual_seed(1234)
    a = _gen(dev, neuron, **kw)
    torch.manual_seed(1234)
    b = _gen(dev, neuron, **kw)
    torch.manual_seed(4321)
    c = _gen(dev, neuron, **kw)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)  # the seed matters: the RNG really drives the choice
    new = a[:, PROMPTS.shape[1]:]
    assert int(new.min()) >= 0 and int(new.max()) < dev.config.vocab_size
    # every sampled token is among the top-20 of the neuron logits at that step
    with torch.no_grad():
        logits = dev(a[:, :-1].to(neuron), attention_mask=torch.ones_like(a[:, :-1]).to(neuron)).logits.cpu()
    # (the left-padded row attends to its padding here, so check the unpadded row)
    top = logits[1, PROMPTS.shape[1] - 1:].topk(20, dim=-1).indices
    row = new[1].tolist()
    row = row[:row.index(2) + 1] if 2 in row else row  # after EOS come pads
    assert len(row) >= 3 and all(t in top[i].tolist() for i, t in enumerate(row))


def test_sampling_top_k_1_equals_greedy(models, neuron):
    _, dev = models
    torch.manual_seed(7)
    sampled = _gen(dev, neuron, do_sample=True, top_k=1)
    assert torch.equal(sampled, _gen(dev, neuron, do_sample=False))
