"""The c10d backend "neuron" under torchrun: every collective in every dtype against the
CPU (tests/python/distributed/collectives.py), with 2 and 3 ranks, through both ways of
choosing the backend; and recv from any source on both transports (this file is also
that test's torchrun script)."""

import os
import sys
from pathlib import Path

import pytest

from dist_launch import torchrun

# Small staging buffers: every size beyond a few KiB runs in many rounds.
SMALL_CHUNKS = {"OPENNEURON_SHM_CHUNK_BYTES": 65536}


@pytest.mark.parametrize("nproc", [2, 3])
def test_every_collective_matches_the_cpu(nproc):
    proc = torchrun("collectives.py", nproc, "--init", "backend", env=SMALL_CHUNKS)
    assert proc.stdout.count("all collectives match") == nproc


def test_device_id_selects_the_neuron_backend():
    proc = torchrun("collectives.py", 2, "--init", "device_id")
    assert proc.stdout.count("all collectives match") == 2


# Shared memory with 3 ranks; Gloo (the multi-host path) with 2 ranks that each claim a
# host of their own, over loopback.
@pytest.mark.parametrize("transport,nproc", [("shm", 3), ("gloo", 2)])
def test_recv_from_any_source(transport, nproc):
    proc = torchrun(Path(__file__).resolve(), nproc, transport, timeout=180,
                    env={"GLOO_SOCKET_IFNAME": "lo"})
    assert proc.stdout.count("recv from any source ok") == nproc, proc.stdout


def _recv_from_any_source(transport):
    """dist.recv(t) without src returns the sender's rank; dist.irecv(t) a Work whose
    _source_rank() is the sender after wait(). Every rank but 0 sends to rank 0."""
    import datetime

    import torch
    import torch.distributed as dist

    if transport == "gloo":
        import openneuron.distributed

        rank = os.environ["RANK"]
        openneuron.distributed.host_key = lambda: f"host-of-rank-{rank}"
    dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
    backend = dist.distributed_c10d._get_default_group()._get_backend(dev)
    assert backend.uses_shared_memory is (transport == "shm"), backend.uses_shared_memory

    def payload(src, dtype):
        return torch.arange(6, dtype=dtype) + 100 * src

    if rank == 0:
        seen = set()
        for _ in range(world - 1):
            t = torch.zeros(6, device=dev)
            src = dist.recv(t, tag=3)
            assert src not in seen and 0 < src < world, (src, seen)
            seen.add(src)
            torch.testing.assert_close(t.cpu(), payload(src, torch.float32), rtol=0, atol=0)
        seen = set()
        for _ in range(world - 1):
            t = torch.zeros(6, dtype=torch.int64, device=dev)
            work = dist.irecv(t, tag=4)
            work.wait()
            src = work._source_rank()
            assert src not in seen and 0 < src < world, (src, seen)
            seen.add(src)
            torch.testing.assert_close(t.cpu(), payload(src, torch.int64), rtol=0, atol=0)
    else:
        dist.send(payload(rank, torch.float32).to(dev), dst=0, tag=3)
        dist.send(payload(rank, torch.int64).to(dev), dst=0, tag=4)
    dist.barrier()
    print(f"rank {rank}: recv from any source ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    _recv_from_any_source(sys.argv[1])
