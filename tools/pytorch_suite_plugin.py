"""pytest plugin for tools/pytorch_suite.py: one JSON line per test event, written as it
happens, so a file stopped by its time limit (or a crash) still reports what ran.

  PYTORCH_SUITE_RECORD=path   where the JSON lines go (appended, line-buffered)
  PYTORCH_SUITE_SELECT=path   optional: run only the node ids listed there, one a line
                              (the CPU twins; ids the file does not have are simply absent)
  PYTORCH_SUITE_DONE=path     optional: leave out these ids (resuming a file after a crash)

Events: {"event": "start", "nodeid"} before each test (the last one without an outcome is
the test that was running when the process stopped), {"event": "selected", "nodeids"} (the
ids PYTORCH_SUITE_SELECT found) and {"nodeid", "outcome", "when", "duration", "msg"} for
outcomes (several per test with subtests; the reader keeps the worst).
"""
import json
import os

_record = None


def _write(entry):
    global _record
    path = os.environ.get("PYTORCH_SUITE_RECORD")
    if not path:
        return
    if _record is None:
        _record = open(path, "a", buffering=1)
    _record.write(json.dumps(entry) + "\n")


def _message(report):
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        return str(longrepr[2])[:1000]
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message[:1000]
    lines = str(longrepr).strip().splitlines()
    return lines[-1][:1000] if lines else ""


def _ids(variable):
    path = os.environ.get(variable)
    if not path:
        return None
    with open(path) as f:
        return {line.strip() for line in f if line.strip()}


def pytest_collection_modifyitems(config, items):
    wanted, done = _ids("PYTORCH_SUITE_SELECT"), _ids("PYTORCH_SUITE_DONE")
    if done:  # a run resumed after a crash: the tests that already have an outcome
        dropped = [item for item in items if item.nodeid in done]
        items[:] = [item for item in items if item.nodeid not in done]
        config.hook.pytest_deselected(items=dropped)
    if wanted is None:
        return
    keep = [item for item in items if item.nodeid in wanted]
    dropped = [item for item in items if item.nodeid not in wanted]
    # A file that failed to collect on neuron has the file as its id: collecting it here
    # without an error is its CPU twin passing.
    for nodeid in wanted:
        if "::" not in nodeid and any(i.nodeid.startswith(nodeid + "::") for i in items):
            _write({"nodeid": nodeid, "outcome": "passed", "when": "collect",
                    "duration": 0.0, "msg": ""})
    _write({"event": "selected", "nodeids": [item.nodeid for item in keep]})
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_runtest_logstart(nodeid, location):
    _write({"event": "start", "nodeid": nodeid})


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and not report.passed) or (
            report.when == "teardown" and report.failed):
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfail" if report.skipped else "xpass"
        elif report.when != "call" and report.failed:
            outcome = "error"
        _write({"nodeid": report.nodeid, "outcome": outcome, "when": report.when,
                "duration": round(report.duration, 3), "msg": _message(report)})


def pytest_collectreport(report):
    if report.failed:
        _write({"nodeid": report.nodeid, "outcome": "error", "when": "collect",
                "duration": 0.0, "msg": _message(report)})
