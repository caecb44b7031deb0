"""Faults in a neuron process group (tests/python/distributed/faults.py): a killed rank and
calls that differ across ranks give every surviving rank a clear error naming the
collective and the rank, within the process group timeout; nothing is left in /dev/shm."""

import os
import re

import pytest

from dist_launch import launch_ranks


def run(mode, nproc=2):
    results = launch_ranks("faults.py", nproc, mode, timeout=120)
    for rc, out, err, pid in results:
        assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"openneuron-{pid}-")], \
            f"shared memory of pid {pid} left behind"
    return results


def error_of(result):
    rc, out, err, _ = result
    assert rc == 0, f"rank exited with {rc}\n{out}\n{err[-4000:]}"
    m = re.search(r"^ERROR: (.*)$", out, re.M)
    assert m, f"no error reported\n{out}\n{err[-4000:]}"
    return m.group(1), re.search(r"^LATER: (.*)$", out, re.M).group(1)


def test_killed_rank_is_named_by_the_survivors():
    results = run("kill", nproc=3)
    assert results[1][0] != 0  # the killed rank
    for r in (0, 2):
        error, later = error_of(results[r])
        assert "all_reduce" in error and "rank 1" in error, error
        assert "exited" in error or "died" in error, error
        assert "failed earlier" in later, later


@pytest.mark.parametrize("mode,words", [
    ("size", ["all_reduce", "100", "101"]),
    ("kind", ["all_reduce", "all_gather"]),
    ("dtype", ["float32", "int32"]),
])
def test_mismatched_calls_fail_on_every_rank(mode, words):
    for result in run(mode):
        error, _ = error_of(result)
        for w in words:
            assert w in error, (w, error)


def test_cpu_tensor_on_a_neuron_group_is_rejected():
    for result in run("device"):
        error, _ = error_of(result)
        assert "cpu" in error.lower(), error


def test_destroy_and_init_again_in_one_process():
    for rc, out, err, _ in run("reinit"):
        assert rc == 0 and "OK" in out, f"{out}\n{err[-4000:]}"
