"""Differential fuzzing of neuron against the CPU (diff_fuzz.py): a bounded run of random
programs from a fixed seed, and the regression corpus (diff_fuzz_corpus.jsonl) replayed case
by case. Real neuron bugs are strict xfails naming the op and the values; their differences
are counted apart in the bounded run (diff_fuzz.KNOWN_BUGS), which fails on any other.
Longer runs: `python tests/python/diff_fuzz.py --seconds 600 --seed N`."""

import json
import pathlib

import pytest
import torch

import diff_fuzz

CORPUS = pathlib.Path(__file__).with_name("diff_fuzz_corpus.jsonl")
SEED = 20260101
PROGRAMS = 15000         # the budget, cut by time on a slow machine
SECONDS = 40


def corpus_cases():
    cases = []
    for line in CORPUS.read_text().splitlines():
        case = json.loads(line)
        bug = case.get("bug")
        # raises=AssertionError: a case that fails otherwise than as its bug is a failure
        reason = f"{diff_fuzz.KNOWN_BUGS[bug].reason}. Here: {case['failure']}" if bug else ""
        marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] if bug else []
        cases.append(pytest.param(case, id=case["id"], marks=marks))
    return cases


@pytest.mark.parametrize("case", corpus_cases())
def test_corpus_case(neuron, case):
    outcome = diff_fuzz.run(case["spec"])
    if outcome.failure and case.get("bug") and diff_fuzz.known_bug(outcome) != case["bug"]:
        pytest.fail(f"fails, but not as bug {case['bug']}: {outcome.failure}")
    assert outcome.failure is None, outcome.failure


def test_bounded_run(neuron):
    report = diff_fuzz.fuzz(SEED, programs=PROGRAMS, seconds=SECONDS)
    known = sorted({key for key, _, _ in report.known})
    print(f"\n{report.programs} programs ({report.programs / report.seconds:.0f}/s), {report.executions} ops "
          f"on both sides in {report.seconds:.1f} s; {report.raised} ended by an error both raise; "
          f"known bugs hit: {', '.join(known) or 'none'}")
    assert report.programs >= 500, "the bounded run ran too few programs to mean anything"
    assert not report.failures, "\n".join(
        f"{outcome.failure}\n  replay: {diff_fuzz.case_line(spec, outcome)}" for spec, outcome in report.failures)


def test_a_wrong_result_is_caught(neuron, monkeypatch):
    # The comparison can fail: "+" off by 1e-3 on neuron only is a mismatch.
    def add(a, b):
        out = a + b
        on_neuron = any(isinstance(t, torch.Tensor) and t.device.type == "neuron" for t in (a, b))
        return out + 1e-3 if on_neuron else out
    monkeypatch.setitem(diff_fuzz.OPS, "+", diff_fuzz.Op(add, None, "ew"))
    spec = {"inputs": [{"dtype": "float32", "shape": [3], "seed": 1, "fill": "auto"}],
            "ops": [{"op": "+", "args": [{"ref": 0}, 1.0], "kw": {}, "out": [1]}]}
    assert "values differ" in diff_fuzz.run(spec).failure
