"""Training unchanged on neuron: Transformers' Trainer with default TrainingArguments, TRL's
SFTTrainer with its defaults, PEFT LoRA and merge_and_unload, against the CPU."""

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("datasets")

from accelerate.state import AcceleratorState  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import Trainer, TrainingArguments  # noqa: E402

import openneuron  # noqa: E402
from hf_tiny import char_tokenizer, record_fallbacks, tiny_llama  # noqa: E402,F401

STEPS = 4


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def _lm_dataset(n=16, length=16):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (n, length), generator=g).tolist()
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def _args(tmp_path, name, **kw):
    # Only what a test run needs (a short run, no files, no loggers); the rest is default.
    return TrainingArguments(output_dir=str(tmp_path / name), max_steps=STEPS, per_device_train_batch_size=4,
                             logging_steps=1, save_strategy="no", report_to="none",
                             learning_rate=1e-3, **kw)


def _run_trainer(tmp_path, name, **kw):
    AcceleratorState._reset_state(reset_partial_state=True)  # before the args: they set it up
    args = _args(tmp_path, name, **kw)
    trainer = Trainer(model=tiny_llama(seed=0).train(), args=args, train_dataset=_lm_dataset())
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == STEPS
    return trainer, losses


def test_training_arguments_pick_neuron_and_fused_adamw(tmp_path, neuron):
    args = TrainingArguments(output_dir=str(tmp_path / "defaults"))
    assert args.device == torch.device("neuron:0") and args.n_gpu == 1
    assert args.optim == "adamw_torch_fused"
    bf16 = TrainingArguments(output_dir=str(tmp_path / "bf16"), bf16=True)  # passes the bf16 check
    assert bf16.bf16 and bf16.device.type == "neuron"


def test_trainer_default_args_trains_like_cpu_with_native_fused_adamw(tmp_path, neuron):
    _, ref = _run_trainer(tmp_path, "cpu", use_cpu=True)
    openneuron.reset_fallback_stats()
    trainer, got = _run_trainer(tmp_path, "neuron")
    assert trainer.args.device.type == "neuron"
    assert {p.device.type for p in trainer.model.parameters()} == {"neuron"}
    opt = trainer.optimizer.optimizer if hasattr(trainer.optimizer, "optimizer") else trainer.optimizer
    assert isinstance(opt, torch.optim.AdamW) and opt.defaults["fused"] is True
    assert not [op for op in openneuron.fallback_stats() if "adam" in op], openneuron.fallback_stats()
    assert max(abs(a - b) for a, b in zip(got, ref)) < 1e-4, (got, ref)
    assert got[-1] < got[0]


def test_trainer_bf16_trains_like_cpu(tmp_path, neuron):
    _, ref = _run_trainer(tmp_path, "cpu", use_cpu=True, bf16=True)
    trainer, got = _run_trainer(tmp_path, "neuron", bf16=True)
    assert trainer.args.bf16 and trainer.accelerator.mixed_precision == "bf16"
    assert max(abs(a - b) for a, b in zip(got, ref)) < 5e-3, (got, ref)


TEXTS = ["the quick brown fox jumps over the lazy dog", "hello neuron, hello world",
         "a small model learns a small text", "sunny days and rainy nights",
         "one two three four five six", "pack my box with five dozen jugs"] * 2


def _run_sft(tmp_path, name, **kw):
    from trl import SFTConfig, SFTTrainer

    AcceleratorState._reset_state(reset_partial_state=True)  # before the config: it sets it up
    cfg = SFTConfig(output_dir=str(tmp_path / name), max_steps=3, per_device_train_batch_size=4,
                    logging_steps=1, save_strategy="no", report_to="none", learning_rate=1e-3,
                    max_length=64, **kw)
    trainer = SFTTrainer(model=tiny_llama(seed=0).train(), args=cfg,
                         train_dataset=Dataset.from_dict({"text": TEXTS}),
                         processing_class=char_tokenizer())
    trainer.train()
    return trainer, [h["loss"] for h in trainer.state.log_history if "loss" in h]


def test_trl_sft_trainer_defaults_bf16_gradient_checkpointing(tmp_path, neuron):
    pytest.importorskip("trl")
    _, ref = _run_sft(tmp_path, "cpu", use_cpu=True)
    trainer, got = _run_sft(tmp_path, "neuron")
    args = trainer.args
    assert args.bf16 and args.gradient_checkpointing and args.device.type == "neuron"
    assert args.pad_to_multiple_of == 128  # TRL's neuron default
    assert trainer.model.is_gradient_checkpointing
    assert {p.device.type for p in trainer.model.parameters()} == {"neuron"}
    assert len(got) == 3 and all(torch.isfinite(torch.tensor(got)))
    assert max(abs(a - b) for a, b in zip(got, ref)) < 5e-3, (got, ref)


def _lora_train(device, steps=4):
    from peft import LoraConfig, get_peft_model

    base = tiny_llama(seed=0)
    torch.manual_seed(1)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                            lora_dropout=0.0)).to(device)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    ids = _lm_dataset(4)["input_ids"]
    ids = torch.tensor(ids, device=device)
    losses = []
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return model.eval(), ids, losses


def test_peft_lora_trains_like_cpu_and_merges(neuron):
    pytest.importorskip("peft")
    _, _, ref = _lora_train("cpu")
    model, ids, got = _lora_train(neuron)
    assert max(abs(a - b) for a, b in zip(got, ref)) < 1e-4, (got, ref)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n]
    assert all(float(p.detach().abs().max().cpu()) > 0 for p in lora_b)  # LoRA learned something
    with torch.no_grad():
        unmerged = model(input_ids=ids).logits.cpu()
        with model.disable_adapter():
            base_only = model(input_ids=ids).logits.cpu()
        merged_model = model.merge_and_unload()
        merged = merged_model(input_ids=ids).logits.cpu()
    assert not any("lora_" in n for n, _ in merged_model.named_parameters())
    assert {p.device.type for p in merged_model.parameters()} == {"neuron"}
    assert (unmerged - base_only).abs().max() > 1e-3  # the adapter changes the output
    torch.testing.assert_close(merged, unmerged, rtol=1e-4, atol=1e-4)
