"""The c10d backend "neuron" under torchrun: every collective in every dtype against the
CPU (tests/python/distributed/collectives.py), with 2 and 3 ranks, through both ways of
choosing the backend."""

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
