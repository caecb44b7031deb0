"""Training on neuron, unchanged: Transformers' Trainer with default TrainingArguments (it picks
neuron:0 and fused AdamW), TRL's SFTTrainer with its defaults (bf16, gradient checkpointing),
and PEFT LoRA with merge_and_unload. Tiny models from configs, data built in place.
Run:  .venv/bin/python examples/hf_trainer.py
"""

import string
import tempfile

import datasets
import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Trainer,
                          TrainingArguments)
from trl import SFTConfig, SFTTrainer


def tiny_llama():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96,
                                        num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=2, pad_token_id=0, bos_token_id=1,
                                        eos_token_id=2))


def char_tokenizer():
    vocab = {t: i for i, t in enumerate(["<pad>", "<s>", "</s>", "<unk>"]
                                        + list(string.ascii_letters + string.digits + " .,;:!?'-\n"))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>", unk_token="<unk>")


def losses(trainer):
    return [round(h["loss"], 4) for h in trainer.state.log_history if "loss" in h]


def main():
    datasets.disable_progress_bars()
    out = tempfile.mkdtemp()
    short = dict(max_steps=6, per_device_train_batch_size=4, logging_steps=1, save_strategy="no",
                 report_to="none", learning_rate=1e-3)

    # 1. Trainer: TrainingArguments chooses the device and the optimizer.
    ids = torch.randint(3, 128, (16, 16), generator=torch.Generator().manual_seed(0)).tolist()
    data = Dataset.from_dict({"input_ids": ids, "labels": ids})
    args = TrainingArguments(output_dir=out, bf16=True, **short)
    trainer = Trainer(model=tiny_llama(), args=args, train_dataset=data)
    trainer.train()
    print(f"Trainer: device {args.device}, optim {args.optim.value}, bf16 {args.bf16}, "
          f"fused AdamW {trainer.optimizer.optimizer.defaults['fused']}; losses {losses(trainer)}")

    # 2. TRL SFTTrainer with its defaults (bf16=True, gradient checkpointing).
    texts = ["the quick brown fox jumps over the lazy dog", "hello neuron, hello world",
             "a small model learns a small text", "pack my box with five dozen jugs"] * 4
    sft = SFTTrainer(model=tiny_llama(), train_dataset=Dataset.from_dict({"text": texts}),
                     processing_class=char_tokenizer(),
                     args=SFTConfig(output_dir=out, max_length=64, **short))
    sft.train()
    print(f"SFTTrainer: device {sft.args.device}, bf16 {sft.args.bf16}, gradient checkpointing "
          f"{sft.model.is_gradient_checkpointing}; losses {losses(sft)}")

    # 3. PEFT LoRA: train the adapters, then merge them into the weights.
    model = get_peft_model(tiny_llama(), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    model.to("neuron")
    model.print_trainable_parameters()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    batch = torch.tensor(ids[:4], device="neuron")
    for step in range(6):
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    with torch.no_grad():
        before = model(input_ids=batch).logits
        merged = model.merge_and_unload()
        after = merged(input_ids=batch).logits
    print(f"LoRA: final loss {loss.item():.4f}; merged vs unmerged max |diff| "
          f"{(after - before).abs().max().item():.2e} on {after.device}")


if __name__ == "__main__":
    main()
