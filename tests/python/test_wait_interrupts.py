"""Waiting for the device never traps the user: Ctrl-C during a long device op raises
KeyboardInterrupt within a fraction of a second (the queued work goes on, and the device
stays usable), and the watchdog turns a stream that completes nothing for
OPENNEURON_WATCHDOG_SECONDS into an error naming the program, instead of a hang. Each case
runs in a fresh interpreter: signals and the watchdog setting are process-wide."""

from conftest import run_python

# About 3 device seconds of matmuls on a 2-core machine, queued without waiting.
LONG_WORK = """
import os, signal, threading, time, torch
a = torch.randn(2048, 2048, device="neuron")
torch.neuron.synchronize()
queued = time.monotonic()
b = a
for _ in range(16):
    b = (b @ a) / 2048
def interrupt_soon():
    time.sleep(0.3)
    global sent
    sent = time.monotonic()
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupt_soon).start()
"""


def check(code, **env):
    r = run_python(code, **env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_ctrl_c_interrupts_synchronize_and_the_device_stays_usable():
    out = check(LONG_WORK + """
try:
    torch.neuron.synchronize()
    raise AssertionError(f"synchronize finished {time.monotonic() - queued:.2f} s after the "
                         "work was queued, before the interrupt")
except KeyboardInterrupt:
    print(f"raised after {time.monotonic() - sent:.3f}")
torch.neuron.synchronize()  # the queued work went on and finishes
assert torch.isfinite(b).all()
x = torch.arange(4.0, device="neuron")
print("after", (x * 2).cpu().tolist())
""")
    late = float(out.split("raised after ")[1].split()[0])
    assert late < 0.5, out
    assert "after [0.0, 2.0, 4.0, 6.0]" in out


def test_ctrl_c_interrupts_a_copy_to_the_host():
    out = check(LONG_WORK + """
try:
    b.cpu()
    raise AssertionError(f"the copy finished {time.monotonic() - queued:.2f} s after the "
                         "work was queued, before the interrupt")
except KeyboardInterrupt:
    print(f"raised after {time.monotonic() - sent:.3f}")
print("copy", b.cpu().shape == (2048, 2048))
""")
    assert float(out.split("raised after ")[1].split()[0]) < 0.5, out
    assert "copy True" in out


def test_watchdog_reports_a_stream_that_completes_nothing():
    out = check("""
import time, torch
a = torch.ones(6144, 6144, device="neuron")  # quick: well within the limit
torch.neuron.synchronize()
start = time.monotonic()
b = a @ a  # one kernel of 464 GFLOP: seconds on a few host cores, past the 1 s limit
try:
    torch.neuron.synchronize()
    raise AssertionError("no watchdog")
except RuntimeError as e:
    print("error:", e)
    print(f"after {time.monotonic() - start:.2f}")
""", OPENNEURON_WATCHDOG_SECONDS="1")
    assert "neuron:0 stream 0 completed no work for 1 s while running program 'Mm'" in out, out
    assert "OPENNEURON_WATCHDOG_SECONDS" in out


def test_a_bad_watchdog_setting_names_the_variable():
    r = run_python("import torch; torch.zeros(1, device='neuron')",
                   OPENNEURON_WATCHDOG_SECONDS="soon")
    assert r.returncode != 0
    assert "OPENNEURON_WATCHDOG_SECONDS='soon' is invalid" in r.stderr, r.stderr
