"""Streams and events on neuron, through torch.neuron and torch.Stream/torch.Event."""

import pytest
import torch


def test_default_and_current_stream(neuron):
    s = torch.neuron.current_stream()
    assert s.device.type == "neuron" and s.stream_id == 0
    assert torch.neuron.default_stream() == s


def test_work_on_a_side_stream_is_ordered_by_events(neuron):
    s = torch.neuron.Stream()
    assert s.stream_id != 0
    x = torch.randn(256, 256, device=neuron)
    done = torch.neuron.Event()
    ready = torch.neuron.Event()
    ready.record()
    with torch.neuron.stream(s):
        s.wait_event(ready)
        assert torch.neuron.current_stream() == s
        y = x @ x
        done.record(s)
    torch.neuron.current_stream().wait_event(done)
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-4, atol=1e-4)
    assert torch.neuron.current_stream().stream_id == 0
    done.synchronize()
    assert done.query() and s.query()


def test_event_timing(neuron):
    start = torch.Event(device="neuron", enable_timing=True)
    end = torch.Event(device="neuron", enable_timing=True)
    start.record()
    x = torch.randn(512, 512, device=neuron)
    for _ in range(3):
        x = x @ x / 512
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0


def test_torch_neuron_events_time_each_other(neuron):
    """As torch.cuda.Event: timing between two torch.neuron.Event, in both directions, and
    with torch.Event on the same device."""
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    plain = torch.Event(device="neuron", enable_timing=True)
    assert isinstance(start, torch.neuron.Event) and isinstance(start, torch.Event)
    assert not isinstance(torch.Event(device="cpu"), torch.neuron.Event)
    start.record()
    x = torch.randn(256, 256, device=neuron)
    y = x @ x
    end.record()
    plain.record()
    plain.synchronize()
    assert end.elapsed_time(plain) >= 0.0 and start.elapsed_time(end) >= 0.0
    assert start.elapsed_time(plain) >= start.elapsed_time(end)
    torch.neuron.current_stream().record_event(end)
    torch.neuron.Stream().wait_event(end)
    del y


def test_synchronize_waits_for_results(neuron):
    x = torch.ones(1000, device=neuron)
    for _ in range(50):
        x = x + 1
    torch.neuron.synchronize()
    assert torch.neuron.current_stream().query()
    assert x.sum().item() == 51000.0


def test_accelerator_stream_functions(neuron):
    s = torch.Stream(device="neuron")
    prev = torch.accelerator.current_stream()
    torch.accelerator.set_stream(s)
    try:
        assert torch.accelerator.current_stream() == s
    finally:
        torch.accelerator.set_stream(prev)


def test_record_stream_keeps_a_block_until_the_stream_passed_it(neuron):
    """As torch.cuda: a tensor used on a side stream and recorded there is not handed out
    again while that stream's queued work may still read it; an unrecorded one is."""
    s = torch.neuron.Stream()
    a = torch.randn(1024, 1024, device=neuron)
    x = torch.empty(1 << 20, device=neuron)
    ptr = x.data_ptr()
    del x
    assert torch.empty(1 << 20, device=neuron).data_ptr() == ptr  # reused at once

    x = torch.ones(1 << 20, device=neuron)
    assert x.data_ptr() == ptr
    s.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(s):
        for _ in range(30):  # keeps s busy for a while
            a = a @ a / 1024
        total = x.sum()
    x.record_stream(s)
    del x
    y = torch.empty(1 << 20, device=neuron)
    assert not s.query(), "the side stream finished too soon for the check"
    assert y.data_ptr() != ptr
    s.synchronize()
    assert total.item() == 1 << 20


def test_record_stream_rejects_a_foreign_stream(neuron):
    x = torch.ones(4, device=neuron)
    try:
        x.record_stream(torch.Stream(device="cpu"))
    except RuntimeError as e:
        assert "neuron stream" in str(e)
    else:
        raise AssertionError("record_stream took a CPU stream")


STREAM_ERROR = """
import pytest
import torch
x = torch.randn(3, 4, device="neuron")
bad = torch.full((3, 4), 9, device="neuron")
y = torch.gather(x, 1, bad)  # THE BAD LINE
z = y * 2
torch.neuron.synchronize()
"""


def test_a_device_error_is_raised_at_the_next_synchronisation_and_the_device_goes_on(neuron):
    x = torch.randn(3, 4, device=neuron)
    y = torch.gather(x, 1, torch.full((3, 4), 9, device=neuron))  # returns: the error is queued
    with pytest.raises(RuntimeError, match=r"(?s)Gather.*out of bounds.*NEURON_LAUNCH_BLOCKING=1"):
        torch.neuron.synchronize()
    del y
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)  # the device stays usable


def test_launch_blocking_raises_a_device_error_at_its_python_line(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "stream_error.py"
    script.write_text(STREAM_ERROR)
    env = dict(os.environ, NEURON_LAUNCH_BLOCKING="1")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert "out of bounds" in proc.stderr
    # The traceback ends at the op's own line, not at the synchronisation.
    tail = proc.stderr[proc.stderr.rindex('  File "'):]
    assert "THE BAD LINE" in tail and "synchronize" not in tail, proc.stderr
