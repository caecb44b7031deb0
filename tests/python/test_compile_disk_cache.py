"""The on-disk cache of whole-graph recordings: a fresh process launches the recorded
program at a graph's first call; bad entries, concurrent writers and unwritable
directories are handled; `openneuron cache` looks after the directory."""

import hashlib
import json
import subprocess
import sys
import textwrap

import pytest
import torch

from openneuron.dynamo import disk_cache
from openneuron.tools import cli


@pytest.fixture(autouse=True)
def cache_on(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENNEURON_DISK_CACHE", "1")
    monkeypatch.setenv("OPENNEURON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENNEURON_FALLBACK", "error")
    monkeypatch.delenv("OPENNEURON_WHOLE_GRAPH", raising=False)
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    yield tmp_path / "cache"
    torch._dynamo.reset()


def _f(x, w):
    return torch.tanh(x @ w + 1.0).sum(-1)


def _first_call(neuron):
    """A new Dynamo compilation of _f (as in a fresh process) and its first call."""
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    torch.manual_seed(0)
    x, w = torch.randn(5, 8, device=neuron), torch.randn(8, 3, device=neuron)
    got = torch.compile(_f, backend="neuron")(x, w)
    return got, _f(x, w), torch.neuron.get_dynamo_metrics()


def test_a_new_compilation_loads_the_recording_instead_of_recording(neuron, cache_on):
    got, want, m = _first_call(neuron)
    assert torch.equal(got.cpu(), want.cpu())
    assert m["disk_cache_misses"] == 1 and m["disk_cache_writes"] == 1 and m["op_by_op_calls"] == 1
    assert len(list((cache_on / "recordings").glob("*.rec"))) == 1
    got, want, m = _first_call(neuron)
    assert torch.equal(got.cpu(), want.cpu())
    assert m["disk_cache_hits"] == 1 and m["whole_graph_programs"] == 0, m
    assert m["whole_graph_calls"] == 1 and m["op_by_op_calls"] == 0, m


def test_a_build_with_another_op_table_misses_older_entries(neuron, cache_on, monkeypatch):
    # Recordings name ops by number: another op table must not read them.
    import openneuron
    _first_call(neuron)
    real = openneuron._C.op_table_fingerprint()
    monkeypatch.setattr(openneuron._C, "op_table_fingerprint", lambda: real ^ 1)
    got, want, m = _first_call(neuron)
    assert torch.equal(got.cpu(), want.cpu())
    assert m["disk_cache_hits"] == 0 and m["disk_cache_misses"] == 1, m
    assert len(list((cache_on / "recordings").glob("*.rec"))) == 2


@pytest.mark.parametrize("damage", ["truncate", "flip", "valid checksum, bad recording"])
def test_a_corrupt_entry_is_reported_and_recorded_again(neuron, cache_on, damage):
    _first_call(neuron)
    (path,) = (cache_on / "recordings").glob("*.rec")
    data = path.read_bytes()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data = data[:-9] + bytes([data[-9] ^ 0x40]) + data[-8:]
    else:
        header, _, blob = data[len(disk_cache.MAGIC) + 32:].partition(b"\n")
        rest = header + b"\n" + blob[: len(blob) // 3] + b"\x07" * 24
        data = disk_cache.MAGIC + hashlib.sha256(rest).digest() + rest
    path.write_bytes(data)
    with pytest.warns(UserWarning, match="unusable"):
        got, want, m = _first_call(neuron)
    assert torch.equal(got.cpu(), want.cpu())
    assert m["disk_cache_hits"] == 0 and m["whole_graph_programs"] == 1, m
    _, _, m = _first_call(neuron)  # written again, whole
    assert m["disk_cache_hits"] == 1, m


def test_an_unwritable_directory_keeps_recordings_in_memory(neuron, monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("OPENNEURON_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(UserWarning, match="cannot write the program cache"):
        got, want, m = _first_call(neuron)
    assert torch.equal(got.cpu(), want.cpu()) and m["disk_cache_writes"] == 0
    x = torch.randn(5, 8, device=neuron)
    w = torch.randn(8, 3, device=neuron)
    cf = torch.compile(_f, backend="neuron")
    cf(x, w)
    assert torch.equal(cf(x, w).cpu(), _f(x, w).cpu())  # replayed from memory


_SCRIPT = textwrap.dedent("""
    import json, sys, torch, openneuron
    sys.path.insert(0, {tests!r})
    from test_compile_disk_cache import _f
    torch.manual_seed(0)
    x, w = torch.randn(5, 8, device="neuron"), torch.randn(8, 3, device="neuron")
    got = torch.compile(_f, backend="neuron")(x, w)
    m = torch.neuron.get_dynamo_metrics()
    print(json.dumps({{"equal": torch.equal(got.cpu(), _f(x, w).cpu()),
                      **{{k: m[k] for k in ("disk_cache_hits", "disk_cache_writes")}}}}))
""")


def test_processes_writing_one_entry_at_once_and_a_fresh_process_reading_it(cache_on):
    import os
    from pathlib import Path

    script = _SCRIPT.format(tests=str(Path(__file__).parent))
    env = {**os.environ, "OPENNEURON_CACHE_DIR": str(cache_on), "OPENNEURON_DISK_CACHE": "1"}
    run = [sys.executable, "-c", script]
    both = [subprocess.Popen(run, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [json.loads(p.communicate(timeout=300)[0].splitlines()[-1]) for p in both]
    assert all(o["equal"] for o in outs) and sum(o["disk_cache_writes"] for o in outs) >= 1, outs
    assert len(list((cache_on / "recordings").glob("*"))) == 1  # one entry, no temporaries
    fresh = json.loads(subprocess.run(run, env=env, stdout=subprocess.PIPE, text=True,
                                      timeout=300, check=True).stdout.splitlines()[-1])
    assert fresh == {"equal": True, "disk_cache_hits": 1, "disk_cache_writes": 0}, fresh


def test_openneuron_cache_list_stats_clear(neuron, cache_on, capsys):
    _first_call(neuron)
    assert cli.main(["cache", "stats"]) == 0
    out = capsys.readouterr().out
    assert "1 entries" in out and str(cache_on) in out
    assert cli.main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert "inference" in out and ".rec" in out
    assert cli.main(["cache", "clear"]) == 0
    assert "removed 1" in capsys.readouterr().out
    assert disk_cache.entries() == []
