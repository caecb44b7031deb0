"""Transformers' Trainer under torchrun with default TrainingArguments (a short run, no
files, no loggers): a tiny Llama built from a config (tests/python/hf_tiny.py), no model
hub. Each rank prints what it ran on; rank 0 prints the logged losses as JSON
("LOSSES [...]") for tests/python/test_distributed_hf.py to compare with one process.

Usage (under torchrun): hf_trainer.py OUTPUT_DIR [--steps N] [--batch B] [--cpu] [--no-find-unused]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # hf_tiny

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import Trainer, TrainingArguments  # noqa: E402

from common import RANK, say  # noqa: E402
from hf_tiny import tiny_llama  # noqa: E402


def lm_dataset(n=32, length=16):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (n, length), generator=g).tolist()
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def training_args(output_dir, steps, batch, **kw):
    return TrainingArguments(output_dir=output_dir, max_steps=steps, per_device_train_batch_size=batch,
                             logging_steps=1, save_strategy="no", report_to="none",
                             learning_rate=1e-3, **kw)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output_dir")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--no-find-unused", action="store_true",
                        help="ddp_find_unused_parameters=False (the default is True for this model)")
    a = parser.parse_args()
    kw = {"use_cpu": True} if a.cpu else {}
    if a.no_find_unused:
        kw["ddp_find_unused_parameters"] = False
    args = training_args(a.output_dir, a.steps, a.batch, **kw)
    trainer = Trainer(model=tiny_llama(seed=0).train(), args=args, train_dataset=lm_dataset())
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    devices = sorted({str(p.device) for p in trainer.model.parameters()})
    wrapped = type(trainer.model_wrapped).__name__
    # One write per line (say): print's text and newline may interleave with the other rank's.
    say(f"rank {RANK}: world {args.world_size} initialized {dist.is_initialized()} "
        f"backend {dist.get_backend() if dist.is_initialized() else None} "
        f"distributed_type {trainer.accelerator.distributed_type} device {args.device} "
        f"parameters {devices} wrapped {wrapped}")
    if RANK == 0:
        say("LOSSES " + json.dumps(losses))


if __name__ == "__main__":
    main()
