"""Logging: OPENNEURON_LOG_LEVEL / OPENNEURON_LOG_FILE and TorchNeuron's TORCH_NEURONX_LOG_*
configure the `openneuron` logger at import, and the backend's warnings (the C++ CPU
fallback's among them) reach it. Each case runs in a fresh interpreter: the variables are
read when the backend loads."""

import logging
import sys
import types

import pytest

from conftest import run_python
from openneuron import _logging

VARIABLES = ("OPENNEURON_LOG_LEVEL", "OPENNEURON_LOG_FILE",
             "TORCH_NEURONX_LOG_LEVEL", "TORCH_NEURONX_LOG_FILE")

# A fallback op: OPENNEURON_HOST_LIBRARY=0 sends logcumsumexp to the copying CPU fallback.
FALLBACK = """
import torch, openneuron
x = torch.randn(8, device="neuron")
torch.logcumsumexp(x, 0).cpu()
assert "aten::_logcumsumexp" in openneuron.fallback_stats(), openneuron.fallback_stats()
"""
FALLBACK_TEXT = "aten::_logcumsumexp has no native neuron kernel; running it on the CPU"


def run(code, **env):
    """`code` in a fresh interpreter with only the logging variables in `env` set."""
    settings = {v: "" for v in VARIABLES}  # empty = unset, whatever this process has
    r = run_python(code, OPENNEURON_HOST_LIBRARY="0", **{**settings, **env})
    assert r.returncode == 0, r.stderr
    return r


def test_nothing_set_leaves_logging_to_the_application():
    run("""
import logging, warnings, torch, openneuron
log = logging.getLogger("openneuron")
assert [type(h) for h in log.handlers] == [logging.NullHandler], log.handlers
assert log.propagate and log.level == logging.NOTSET
assert warnings.showwarning is warnings._showwarning_orig
""")


@pytest.mark.parametrize("prefix", ["OPENNEURON", "TORCH_NEURONX"])
def test_log_file_gets_the_fallback_warning(prefix, tmp_path):
    log = tmp_path / "neuron.log"
    r = run(FALLBACK, **{f"{prefix}_LOG_FILE": log})
    text = log.read_text()
    assert "openneuron WARNING: " + FALLBACK_TEXT in text
    assert "(<string>:4)" in text  # where the user's code ran the op
    assert FALLBACK_TEXT in r.stderr  # still a warning too


def test_level_names_any_case(tmp_path):
    log = tmp_path / "neuron.log"
    run(FALLBACK, TORCH_NEURONX_LOG_LEVEL="debug", TORCH_NEURONX_LOG_FILE=log)
    text = log.read_text()
    assert "openneuron DEBUG: logging at DEBUG to " in text and FALLBACK_TEXT in text


def test_level_filters_records(tmp_path):
    log = tmp_path / "neuron.log"
    run(FALLBACK + "openneuron._logging.logger.error('an error')\n",
        OPENNEURON_LOG_LEVEL="Error", OPENNEURON_LOG_FILE=log)
    text = log.read_text()
    assert FALLBACK_TEXT not in text and "openneuron ERROR: an error" in text


def test_level_without_file_logs_to_stderr_without_repeating_warnings():
    r = run(FALLBACK + "openneuron._logging.logger.warning('a record')\n",
            OPENNEURON_LOG_LEVEL="INFO")
    assert "openneuron WARNING: a record" in r.stderr
    assert r.stderr.count(FALLBACK_TEXT) == 1  # the warning, not also its record


def test_only_openneuron_warnings_are_routed(tmp_path):
    log = tmp_path / "neuron.log"
    run("""
import warnings, torch
warnings.warn("OpenNeuron: one of ours")
warnings.warn("someone else's")
x = torch.ones(2, dtype=torch.float64, device="neuron")
""", OPENNEURON_LOG_FILE=log)
    text = log.read_text()
    assert "OpenNeuron: one of ours" in text and "someone else's" not in text
    assert "neuron: float64 is not a device type" in text  # a C++ TORCH_WARN


def test_invalid_level_warns_and_keeps_the_default():
    r = run("""
import logging, openneuron
assert logging.getLogger("openneuron").level == logging.WARNING
""", OPENNEURON_LOG_LEVEL="verbose")
    assert "OPENNEURON_LOG_LEVEL='verbose' is not a log level" in r.stderr
    assert "DEBUG, INFO, WARNING, WARN, ERROR, CRITICAL, FATAL" in r.stderr


def test_openneuron_variables_win(tmp_path):
    ours, theirs = tmp_path / "ours.log", tmp_path / "theirs.log"
    run(FALLBACK + """
import logging
assert logging.getLogger("openneuron").level == logging.ERROR
openneuron._logging.logger.error('an error')
""", OPENNEURON_LOG_LEVEL="ERROR", TORCH_NEURONX_LOG_LEVEL="DEBUG",
        OPENNEURON_LOG_FILE=ours, TORCH_NEURONX_LOG_FILE=theirs)
    assert "an error" in ours.read_text() and not theirs.exists()


def test_each_setting_falls_back_to_torch_neuronx_on_its_own(tmp_path):
    log = tmp_path / "neuron.log"
    run(FALLBACK, TORCH_NEURONX_LOG_LEVEL="DEBUG", OPENNEURON_LOG_FILE=log)
    assert "openneuron DEBUG: " in log.read_text()


def test_unwritable_file_warns_and_logs_to_stderr(tmp_path):
    missing = tmp_path / "no-such-dir" / "neuron.log"
    r = run("import openneuron; openneuron._logging.logger.error('still shown')\n",
            OPENNEURON_LOG_FILE=missing)
    assert f"cannot open the log file '{missing}'" in r.stderr
    assert "openneuron ERROR: still shown" in r.stderr


def test_runtime_messages_go_to_openneuron_runtime(monkeypatch, caplog):
    # A stand-in for _C: the sink the backend's C++ calls with (level, message).
    sinks = []
    fake = types.SimpleNamespace(_set_log_sink=lambda fn, level: sinks.append(fn))
    monkeypatch.setitem(sys.modules, "openneuron._C", fake)
    monkeypatch.setattr("atexit.register", lambda *a: None)
    _logging._attach_runtime_sink()
    assert len(sinks) == 1
    with caplog.at_level(logging.INFO, logger="openneuron.runtime"):
        sinks[0](logging.INFO, "core 0: program cache warmed")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("openneuron.runtime", logging.INFO, "core 0: program cache warmed")]


def test_cpp_messages_reach_the_openneuron_runtime_logger(tmp_path):
    log = tmp_path / "neuron.log"
    run(FALLBACK + """
big = torch.randn(4_000_000, device="neuron")
x = torch.zeros(3, device="neuron")
(big * 2).sum()  # keeps the stream's worker busy: the failing op below runs there
bad = x.index_select(0, torch.tensor([7], device="neuron"))
try:
    torch.neuron.synchronize()
    raise AssertionError("an out-of-range index was not reported")
except RuntimeError:
    pass
""", OPENNEURON_LOG_LEVEL="DEBUG", OPENNEURON_LOG_FILE=log)
    text = log.read_text()
    assert "openneuron.runtime INFO: runtime ready: " in text
    assert "openneuron.runtime DEBUG: compiled program Mul (1 instruction) in " in text
    assert "openneuron.runtime DEBUG: aten::_logcumsumexp runs on the CPU" in text
    # Logged by the stream's worker thread, delivered when Python synchronized.
    assert ("openneuron.runtime DEBUG: neuron:0 stream 0 failed: IndexSelect/IndexSelect: "
            "index out of range in self") in text


def test_cpp_messages_below_the_level_are_not_sent(tmp_path):
    log = tmp_path / "neuron.log"
    run(FALLBACK, OPENNEURON_LOG_LEVEL="INFO", OPENNEURON_LOG_FILE=log)
    text = log.read_text()
    assert "openneuron.runtime INFO: runtime ready: " in text
    assert "DEBUG" not in text
