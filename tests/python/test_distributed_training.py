"""Training across processes on the neuron backend, under torchrun: DDP, FSDP2, DTensor
tensor parallelism (and FSDP x TP on a 2-D mesh), distributed checkpoints resharded from 2
to 3 ranks, pipeline parallelism, and the PyTorch DDP tutorial run unchanged through
torch.accelerator. Each script (tests/python/distributed/) compares with one process
training on the whole batch, in the same rank on the same device, and prints
"PASS <check>" / "FAIL <check>: ..." per check; a launch runs several checks and each test
here reads its own check's lines."""

import functools
import re

import pytest

from dist_launch import torchrun


@functools.cache
def _launch(script, nproc, *args):
    return torchrun(script, nproc, *args, timeout=180, expect_ok=False)


def _expect_pass(proc, check, nproc):
    # ranks' lines can interleave on one line of the captured stdout: no ^...$ anchors
    passed = len({r for r in re.findall(rf"rank (\d+): PASS {re.escape(check)}(?=\s|rank \d+: |$)", proc.stdout)})
    if passed != nproc:
        fails = re.findall(rf"rank \d+: FAIL {re.escape(check)}:.*", proc.stdout)
        raise AssertionError(
            f"{check}: {passed} of {nproc} ranks passed (exit {proc.returncode})\n"
            + ("\n".join(fails) or "(no FAIL line: the launch itself failed)")
            + f"\n--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-8000:]}")


# ---- DDP: 10 SGD steps, losses and final parameters equal one process on the full batch

@pytest.mark.parametrize("nproc", [2, 3])
def test_ddp_matches_single_process(nproc):
    _expect_pass(_launch("train_ddp.py", nproc), "plain", nproc)


def test_ddp_collects_time_stats_without_a_warning():
    # The "plain" check also asserts DDP's logging data has its phase times.
    proc = _launch("train_ddp.py", 2)
    _expect_pass(proc, "plain", 2)
    assert "Time stats are currently only collected" not in proc.stderr, proc.stderr[-4000:]


@pytest.mark.parametrize("nproc", [2, 3])
def test_ddp_no_sync_gradient_accumulation(nproc):
    _expect_pass(_launch("train_ddp.py", nproc), "no_sync", nproc)


@pytest.mark.parametrize("nproc", [2, 3])
def test_ddp_several_gradient_buckets(nproc):
    _expect_pass(_launch("train_ddp.py", nproc), "buckets", nproc)


# DDP's Reducer copies the used-parameter map through a pinned CPU tensor for PrivateUse1
# devices and asserts it is pinned (reducer.cpp:792); the neuron hooks' isPinnedPtr()
# always returns false (csrc/torch/device.cpp).
@pytest.mark.parametrize("nproc", [2, 3])
def test_ddp_find_unused_parameters(nproc):
    _expect_pass(_launch("train_ddp.py", nproc), "unused", nproc)


# ---- FSDP2: 10 AdamW steps on a small transformer-ish model, 2 ranks

def test_fsdp2_float32_reshard_after_forward():
    _expect_pass(_launch("train_fsdp2.py", 2), "fp32_reshard", 2)


def test_fsdp2_float32_no_reshard_after_forward():
    _expect_pass(_launch("train_fsdp2.py", 2), "fp32_no_reshard", 2)


def test_fsdp2_bf16_params_fp32_reduce_reshard_after_forward():
    _expect_pass(_launch("train_fsdp2.py", 2), "bf16_reshard", 2)


def test_fsdp2_bf16_params_fp32_reduce_no_reshard_after_forward():
    _expect_pass(_launch("train_fsdp2.py", 2), "bf16_no_reshard", 2)


# ---- DTensor tensor parallelism: outputs and gradients equal the dense module's

def test_tp_colwise_rowwise_mlp_1d_mesh():
    _expect_pass(_launch("train_tp.py", 2, "--mesh", "1d"), "1d_mlp", 2)


def test_tp_attention_with_sequence_parallel_norm_1d_mesh():
    _expect_pass(_launch("train_tp.py", 2, "--mesh", "1d"), "1d_attention", 2)


def test_fsdp_x_tp_mlp_2d_mesh():
    _expect_pass(_launch("train_tp.py", 4, "--mesh", "2d"), "2d_mlp", 4)


def test_fsdp_x_tp_attention_2d_mesh():
    _expect_pass(_launch("train_tp.py", 4, "--mesh", "2d"), "2d_attention", 4)


# ---- torch.distributed.checkpoint: FSDP2 model + AdamW state, saved on 2 ranks

@pytest.fixture(scope="module")
def dcp_save_run(tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("dcp") / "checkpoint"
    return ckpt, torchrun("dcp_roundtrip.py", 2, "--phase", "save", "--dir", ckpt, timeout=180, expect_ok=False)


def test_dcp_save_and_load_fsdp2_model_and_optimizer(dcp_save_run):
    _expect_pass(dcp_save_run[1], "dcp_save", 2)


def test_dcp_load_resharded_on_3_ranks(dcp_save_run):
    ckpt = dcp_save_run[0]
    if not (ckpt / "full.pt").exists():
        pytest.skip("needs the checkpoint of test_dcp_save_and_load_fsdp2_model_and_optimizer")
    _expect_pass(torchrun("dcp_roundtrip.py", 3, "--phase", "load", "--dir", ckpt,
                          timeout=180, expect_ok=False), "dcp_load", 3)


# NeuronWork::wait(kNoTimeout) of a blocking Work (barrier) waits with
# condition_variable::wait_for(milliseconds::max()), which overflows and returns at once
# (csrc/torch/process_group_work.cpp:118-123): a rank that reaches dist.barrier() before
# the others fails.
def test_barrier_waits_while_rank0_writes(dcp_save_run):
    _expect_pass(dcp_save_run[1], "barrier_after_save", 2)


# ---- pipelining: two stages on two ranks, GPipe over 4 micro-batches

def test_pipeline_gpipe_two_stages_match_unsplit_model():
    _expect_pass(_launch("pipeline.py", 2), "gpipe", 2)


# ---- the DDP tutorial through torch.accelerator, unchanged

def test_ddp_tutorial_with_torch_accelerator_picks_neuron():
    proc = _launch("tutorial_accelerator.py", 2)
    assert proc.returncode == 0, f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-8000:]}"
    for rank in range(2):
        assert f"rank {rank}: device neuron:{rank} backend neuron process group neuron" in proc.stdout, proc.stdout
        m = re.search(rf"rank {rank}: parameters on \['neuron:{rank}'\] losses (\d+\.\d+) -> (\d+\.\d+) in 8 steps",
                      proc.stdout)
        assert m, proc.stdout
        assert float(m.group(2)) < float(m.group(1)), m.group(0)
