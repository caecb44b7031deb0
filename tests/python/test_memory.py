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
