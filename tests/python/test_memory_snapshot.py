"""Memory history (torch.neuron.memory._record_memory_history / _snapshot / _dump_snapshot):
the snapshot describes the live tensors and the recorded events with their Python stacks,
in the structure torch.cuda.memory._snapshot() has, so PyTorch's _memory_viz tools (and
the pytorch.org/memory_viz viewer, whose rules check_viewer_rules restates) accept it."""

import copy
import importlib
import inspect
import os
import pickle
import pickletools
import subprocess
import sys

import pytest
import torch
from torch.cuda import _memory_viz

from openneuron import memory

# The opcodes the viewer's JavaScript unpickler (torch/utils/viz/MemoryViz.js) reads: a
# snapshot may hold dicts, lists, tuples, str, int, float, bool and None, nothing else.
VIEWER_OPCODES = {
    "PROTO", "FRAME", "STOP", "MARK", "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET",
    "LONG_BINGET", "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS", "EMPTY_LIST", "LIST",
    "APPEND", "APPENDS", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "NONE",
    "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT",
    "SHORT_BINUNICODE", "BINUNICODE",
}


def here() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def names_line(frames, line) -> bool:
    """The stack `frames` passes through this file at `line`."""
    return any(os.path.basename(f["filename"]) == os.path.basename(__file__) and f["line"] == line
               for f in frames)


def active_block_of(snapshot, t):
    """The active_allocated block holding tensor t's storage, or None."""
    base = t.untyped_storage().data_ptr()
    for seg in snapshot["segments"]:
        if seg["device"] != t.device.index:
            continue
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and b["address"] <= base < b["address"] + b["size"]:
                return b
    return None


def check_viewer_rules(snapshot):
    """What _memory_viz and MemoryViz.js assume of a snapshot beyond its keys."""
    for seg in snapshot["segments"]:
        # The viewer places blocks at the segment address plus the sizes before them.
        addr = seg["address"]
        for b in seg["blocks"]:
            assert b["address"] == addr, (seg["address"], [x["address"] for x in seg["blocks"]])
            assert b["requested_size"] <= b["size"]
            addr += b["size"]
        assert addr - seg["address"] == seg["total_size"]  # _memory_viz.segsum asserts this
        assert seg["allocated_size"] == sum(
            b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
    for trace in snapshot["device_traces"]:
        # Replayed backwards, a free_requested needs the free_completed after it.
        pending = set()
        for e in trace:
            assert {"action", "addr", "size", "stream", "frames"} <= e.keys(), e
            if e["action"] == "free_requested":
                pending.add(e["addr"])
            elif e["action"] == "free_completed":
                assert e["addr"] in pending, e
                pending.discard(e["addr"])
        assert not pending, f"free_requested without free_completed: {pending}"
    ops = {op.name for op, _, _ in pickletools.genops(pickle.dumps(snapshot))}
    assert ops <= VIEWER_OPCODES, ops - VIEWER_OPCODES


@pytest.fixture
def recording(neuron):
    memory._record_memory_history(max_entries=100_000)
    yield
    memory._record_memory_history(enabled=None)


def test_torch_neuron_memory_is_this_module():
    assert torch.neuron.memory is memory
    assert importlib.import_module("torch.neuron.memory") is memory  # as torch.cuda.memory
    assert torch.neuron.memory.memory_allocated() == torch.neuron.memory_allocated()


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="enabled"):
        memory._record_memory_history(enabled="some")
    with pytest.raises(ValueError, match="stacks"):
        memory._record_memory_history(stacks="cpp")


def test_snapshot_covers_a_training_step(recording, neuron):
    model = torch.nn.Linear(64, 32).to(neuron)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, x_line = torch.randn(16, 64, device=neuron), here()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    keep, keep_line = torch.empty(256 * 1024, device=neuron), here()  # 1 MiB: large pool
    gone = torch.empty(1000, device=neuron)
    gone_ptr = gone.data_ptr()
    del gone
    torch.neuron.synchronize()
    snap = memory._snapshot()

    assert set(snap) >= {"segments", "device_traces", "allocator_settings"}
    assert len(snap["device_traces"]) == torch.neuron.device_count()
    for t in (x, keep, model.weight, model.bias, model.weight.grad, model.bias.grad, loss):
        b = active_block_of(snap, t)
        assert b is not None, f"no active block holds a tensor of {tuple(t.shape)}"
        assert b["size"] >= b["requested_size"] >= t.untyped_storage().nbytes()
    assert active_block_of(snap, keep)["requested_size"] == keep.nbytes
    assert names_line(active_block_of(snap, keep)["frames"], keep_line)
    reserved = sum(s["total_size"] for s in snap["segments"] if s["device"] == 0)
    assert reserved == torch.neuron.memory_reserved(0)

    trace = snap["device_traces"][0]
    allocs = {e["addr"]: e for e in trace if e["action"] == "alloc"}  # the last per address
    assert names_line(allocs[x.data_ptr()]["frames"], x_line)
    assert names_line(allocs[keep.data_ptr()]["frames"], keep_line)
    actions = [e["action"] for e in trace if e["addr"] == gone_ptr]
    assert actions[-3:] == ["alloc", "free_requested", "free_completed"], actions
    check_viewer_rules(snap)


def test_pytorch_memory_viz_reads_it(recording, neuron, tmp_path):
    a = torch.randn(300, 300, device=neuron)
    b = (a @ a).relu()
    del a
    before = memory._snapshot()
    c = torch.ones(2048, 1024, device=neuron)  # 8 MiB: a new large segment
    path = tmp_path / "snap.pickle"
    memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snap = pickle.load(f)
    check_viewer_rules(snap)

    for html in (_memory_viz.trace_plot(snap), _memory_viz.segment_plot(snap),
                 _memory_viz.trace_plot(copy.deepcopy(snap), plot_segments=True, filter_freed=True)):
        assert isinstance(html, str) and "add_local_files" in html
    text = lambda lines: lines  # flamegraph input as text: flamegraph.pl needs a download
    assert "active_allocated" in _memory_viz.segments(snap, format_flamegraph=text)
    assert "active_allocated" in _memory_viz.memory(snap, format_flamegraph=text)
    _memory_viz.compare(before["segments"], snap["segments"], format_flamegraph=text)
    assert "total_reserved" in _memory_viz.segsum(snap)
    assert "TOTAL MEM" in _memory_viz.trace(snap)

    out = tmp_path / "trace.html"
    for args in (["trace_plot", str(path), "-o", str(out)], ["stats", str(path)],
                 ["trace", str(path)]):
        r = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", *args],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (args, r.stderr)
    assert out.read_text().startswith("\n<!DOCTYPE html>")
    del b, c


def test_stopping_discards_the_history(neuron):
    memory._record_memory_history()
    x = torch.empty(100, device=neuron)
    assert memory._snapshot()["device_traces"][0]
    memory._record_memory_history(enabled=None)
    assert not any(memory._snapshot()["device_traces"])
    y = torch.empty(100, device=neuron)
    assert not any(memory._snapshot()["device_traces"])
    del x, y


def test_max_entries_keeps_the_last_events(neuron):
    memory._record_memory_history(max_entries=4)
    try:
        xs = [torch.empty(100 + i, device=neuron) for i in range(10)]
        trace = memory._snapshot()["device_traces"][0]
        assert len(trace) == 4
        assert trace[-1]["addr"] == xs[-1].data_ptr()
    finally:
        memory._record_memory_history(enabled=None)
