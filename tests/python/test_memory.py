"""Device memory: caching allocator statistics, out-of-memory and recovery."""

import pytest
import torch


def test_allocation_is_counted_and_released(neuron):
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    x = torch.empty(1024, 1024, device=neuron)  # 4 MiB
    assert torch.neuron.memory_allocated() - base >= x.nbytes
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    assert stats["allocated_bytes.large_pool.current"] >= x.nbytes
    del x
    assert torch.neuron.memory_allocated() == base


def test_peak_and_reset(neuron):
    torch.neuron.reset_peak_memory_stats()
    x = torch.empty(2 * 1024 * 1024, device=neuron)
    peak = torch.neuron.max_memory_allocated()
    assert peak >= x.nbytes
    del x
    assert torch.neuron.max_memory_allocated() == peak
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() < peak


def test_small_allocations_come_from_small_pool(neuron):
    before = torch.neuron.memory_stats()["allocation.small_pool.current"]
    x = torch.empty(10, device=neuron)
    assert torch.neuron.memory_stats()["allocation.small_pool.current"] == before + 1
    del x


def test_empty_cache_returns_reserved_memory(neuron):
    x = torch.empty(8 * 1024 * 1024, device=neuron)
    del x
    reserved = torch.neuron.memory_reserved()
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() < reserved


def test_out_of_memory_raises_and_recovers(neuron):
    capacity = torch.neuron.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(capacity // 4 + 1024, dtype=torch.float32, device=neuron)
    msg = str(info.value)
    assert "out of memory" in msg and "capacity" in msg and "allocated" in msg
    assert torch.neuron.memory_stats()["num_ooms"] >= 1
    y = torch.ones(1000, device=neuron)  # the allocator is still usable
    assert y.sum().item() == 1000.0


def test_memory_summary_mentions_device(neuron):
    s = torch.neuron.memory_summary()
    assert "neuron:0" in s and "Allocated memory" in s


def test_mem_get_info(neuron):
    free, total = torch.neuron.mem_get_info()
    assert total == torch.neuron.get_device_properties(0).total_memory
    assert 0 <= free <= total


OOM_MID_STEP = r"""
import copy
import traceback

import torch
from torch import nn

torch.manual_seed(0)
cpu = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(),
                    nn.Linear(2048, 512))
model = copy.deepcopy(cpu).to("neuron")
opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=1e-3)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randn(8192, 512)
target = torch.randn(8192, 512)


def step(m, o, x, y):
    o.zero_grad(set_to_none=True)
    loss = nn.functional.mse_loss(m(x), y)
    loss.backward()
    o.step()
    return loss.detach()


step(model, opt, data[:64].to("neuron"), target[:64].to("neuron"))  # optimizer state exists
step(cpu, opt_cpu, data[:64], target[:64])
opt.zero_grad(set_to_none=True)
torch.neuron.synchronize()
before = torch.neuron.memory_allocated()  # parameters and optimizer state
batch, ooms, in_backward = 8192, 0, False
while True:
    failed = False
    try:
        loss = step(model, opt, data[:batch].to("neuron"), target[:batch].to("neuron"))
        torch.neuron.synchronize()
        break
    except torch.OutOfMemoryError as e:
        failed, msg = True, str(e)
        in_backward |= "backward" in traceback.format_exc()
    if failed:  # outside the handler: its traceback no longer holds the step's tensors
        ooms += 1
        assert "out of memory" in msg, msg
        opt.zero_grad(set_to_none=True)
        torch.neuron.empty_cache()
        assert torch.neuron.memory_allocated() == before, (torch.neuron.memory_allocated(), before)
        batch //= 4
loss_cpu = step(cpu, opt_cpu, data[:batch], target[:batch])
torch.testing.assert_close(loss.cpu(), loss_cpu, rtol=1e-4, atol=1e-5)
for p, q in zip(model.parameters(), cpu.parameters()):
    torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)
print("ooms", ooms, "batch", batch, "in_backward", in_backward)
"""


def test_out_of_memory_mid_training_step_then_a_smaller_batch_trains():
    """The recipe users know from CUDA: a step runs out of memory part-way (after the forward
    allocated its activations), the handler drops the step, and the step retried at a
    smaller batch gives the CPU's parameters; nothing of the failed step stays allocated."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, OPENNEURON_HBM_BYTES="160MiB")
    proc = subprocess.run([sys.executable, "-c", OOM_MID_STEP], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    words = proc.stdout.split()
    ooms, batch = int(words[words.index("ooms") + 1]), int(words[words.index("batch") + 1])
    assert ooms >= 1 and batch < 8192, proc.stdout
    assert "in_backward True" in proc.stdout, proc.stdout  # the forward's activations were live
