"""Which Transformers auto-mappings the harness covers, and how each is exercised."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mapping:
    name: str           # CLI name
    mapping_attr: str   # attribute of transformers.models.auto.modeling_auto
    auto_class: str     # transformers Auto class used to build the model
    generates: bool     # greedy generate (else one forward pass)
    tier: int


MAPPINGS = {
    m.name: m
    for m in (
        Mapping("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "AutoModelForCausalLM", True, 1),
        Mapping("seq2seq", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
                "AutoModelForSeq2SeqLM", True, 2),
        Mapping("speech", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
                "AutoModelForSpeechSeq2Seq", True, 2),
        Mapping("vision", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
                "AutoModelForImageClassification", False, 2),
        Mapping("masked-lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES", "AutoModelForMaskedLM", False, 2),
    )
}


def architectures(mapping: Mapping) -> list[str]:
    from transformers.models.auto import modeling_auto

    return sorted(getattr(modeling_auto, mapping.mapping_attr).keys())
