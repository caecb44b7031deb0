"""Hugging Face training across 2 processes on neuron, unchanged: Transformers' Trainer
under torchrun with default TrainingArguments, and `accelerate launch --num_processes 2`
on a tiny Accelerate script (tests/python/distributed/hf_trainer.py, hf_accelerate.py).
Tiny Llama from a config (hf_tiny.py); no model hub."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("datasets")
pytest.importorskip("accelerate")

from dist_launch import SCRIPTS, torchrun  # noqa: E402

# Two ranks with batch 4 each see, step for step, the same 8 samples as one process with
# batch 8 (Accelerate hands rank r the r-th batch of the seeded sampler), and the loss is a
# mean over the same tokens; DDP's averaged gradient differs from the one process's only in
# float32 summation order (~1e-6 relative; measured 5e-7 on the loss with Gloo on the CPU).
# 1e-4 leaves 100x margin for AdamW's normalisation of those differences over 4 steps and
# is still 50x smaller than the loss moves in one step (~5e-3), so a missing or doubled
# gradient reduction would not pass.
TRAINER_LOSS_TOL = 1e-4


def _env(tmp_path):
    # No user Accelerate config (HF_HOME/accelerate/default_config.yaml) or hub access.
    return {"HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false"}


def _losses(stdout):
    m = re.search(r"^LOSSES (.*)$", stdout, re.M)
    assert m, stdout
    return json.loads(m.group(1))


def _single_env(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENNEURON_NUM_CORES", "NEURON_RT_VISIBLE_CORES"))
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(_env(tmp_path), PYTHONPATH=os.pathsep.join([str(SCRIPTS), *filter(None, [env.get("PYTHONPATH")])]))
    return env


@pytest.fixture(scope="module")
def single_process_losses(tmp_path_factory):
    """hf_trainer.py as one plain process with batch 8 (the 2 ranks' 2 x 4), on neuron:0."""
    tmp = tmp_path_factory.mktemp("trainer_single")
    proc = subprocess.run([sys.executable, str(SCRIPTS / "hf_trainer.py"), str(tmp / "out"), "--batch", "8"],
                          capture_output=True, text=True, env=_single_env(tmp), timeout=240)
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert "world 1 initialized False" in proc.stdout and "device neuron" in proc.stdout, proc.stdout
    return _losses(proc.stdout)


def _check_trainer_on_2_ranks(tmp_path, ref, *args):
    proc = torchrun("hf_trainer.py", 2, tmp_path / "ddp", *args, timeout=240, env=_env(tmp_path))
    for rank in range(2):
        line = re.search(rf"^rank {rank}: .*$", proc.stdout, re.M)
        assert line, proc.stdout
        line = line.group(0)
        assert "world 2 initialized True backend neuron" in line, line
        assert "distributed_type DistributedType.MULTI_NEURON" in line, line
        assert f"device neuron:{rank} parameters ['neuron:{rank}'] wrapped DistributedDataParallel" in line, line
    got = _losses(proc.stdout)
    assert len(got) == len(ref) == 4 and all(math.isfinite(v) for v in got), (got, ref)
    assert max(abs(a - b) for a, b in zip(got, ref)) < TRAINER_LOSS_TOL, (got, ref)


# Trainer's default for a PreTrainedModel without gradient checkpointing is
# ddp_find_unused_parameters=True; DDP's Reducer then copies the used-parameter map through
# a pinned CPU tensor for PrivateUse1 devices and asserts it is pinned (reducer.cpp:792),
# but the neuron hooks' isPinnedPtr() always returns false (csrc/torch/device.cpp).
def test_trainer_default_args_on_2_ranks_matches_single_process(tmp_path, single_process_losses):
    _check_trainer_on_2_ranks(tmp_path, single_process_losses)


def test_trainer_on_2_ranks_without_find_unused_parameters_matches_single_process(tmp_path, single_process_losses):
    """The default arguments but ddp_find_unused_parameters=False (see the test above)."""
    _check_trainer_on_2_ranks(tmp_path, single_process_losses, "--no-find-unused")


@pytest.fixture(scope="module")
def accelerate_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("accelerate")
    accelerate = Path(sys.executable).with_name("accelerate")
    cmd = [str(accelerate), "launch", "--num_processes", "2", str(SCRIPTS / "hf_accelerate.py")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_single_env(tmp), timeout=240)
    return proc, f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-8000:]}"


def test_accelerate_launch_2_processes_trains_on_neuron(accelerate_run):
    proc, out = accelerate_run
    for rank in range(2):
        assert (f"rank {rank}: distributed_type DistributedType.MULTI_NEURON backend neuron num_processes 2 "
                f"device neuron:{rank} batches on ['neuron:{rank}'] model DistributedDataParallel") in proc.stdout, out
        assert f"rank {rank}: PASS accelerate" in proc.stdout, out


# NeuronWork::wait(kNoTimeout) of a blocking Work (barrier) waits with
# condition_variable::wait_for(milliseconds::max()), which overflows and returns at once
# (csrc/torch/process_group_work.cpp:118-123).
def test_accelerate_wait_for_everyone(accelerate_run):
    proc, out = accelerate_run
    assert proc.returncode == 0, out
    for rank in range(2):
        assert f"rank {rank}: PASS wait_for_everyone" in proc.stdout, out
