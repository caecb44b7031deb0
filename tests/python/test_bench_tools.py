"""The benchmark harness and its tools: statistics, the JSON -> markdown report, the cost
computation and projection, the `openneuron cost` CLI, and a tiny model measured end to
end by the model worker (CPU eager against neuron eager)."""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the harness lives in benchmarks/, beside the package
    sys.path.insert(0, str(REPO))

from openneuron.tools import bench_report, bench_results, cost, cli  # noqa: E402
from openneuron.tools.hardware import CHIPS  # noqa: E402


def fake_results() -> dict:
    """A results document as the harness writes it, before summarize()."""
    return {
        "schema": bench_results.SCHEMA_VERSION,
        "profile": "quick",
        "started": "2026-01-01T00:00:00+00:00",
        "duration_s": 12.0,
        "machine": {"cpu": "Test CPU", "logical_cpus": 2, "threads": {"torch_intra_op": 2,
                                                                     "neuron_intra_op": 2}},
        "settings": {"repetitions": "3 interleaved"},
        "columns": [{"name": "cpu_eager", "label": "CPU eager", "reference": None},
                    {"name": "neuron_eager", "label": "neuron eager", "reference": "cpu_eager"},
                    {"name": "inductor_cpu", "label": "Inductor (CPU)", "reference": None},
                    {"name": "neuron_compiled", "label": "neuron compiled",
                     "reference": "inductor_cpu"}],
        "comparisons": [["neuron_eager", "cpu_eager"], ["inductor_cpu", "cpu_eager"],
                        ["neuron_compiled", "inductor_cpu"]],
        "models": [
            {"model": "gpt2", "workload": "forward b1 s128", "kind": "inference", "unit": "tokens",
             "units_per_call": 128, "dtype": "bfloat16",
             "work": {"flops_per_call": 2e10, "bytes_per_call": 1e8},
             "cells": {
                 "cpu_eager": {"status": "ok", "samples_s": [0.5, 0.25, 0.75], "first_call_s": 1.0},
                 # per-repetition ratios 2, 1, 3 -> median 2
                 "neuron_eager": {"status": "ok", "samples_s": [0.25, 0.25, 0.25],
                                  "fallbacks": {"aten::tril.out": 6, "aten::cat.out": 12}},
                 "inductor_cpu": {"status": "error", "error": "CppCompileError: no g++"},
                 "neuron_compiled": {"status": "unavailable",
                                     "reason": "not built yet (backend lands later)"},
             }},
            {"model": "llama", "workload": "train step", "kind": "training",
             "unit": "training samples", "units_per_call": 4, "dtype": "float32",
             "cells": {}, "error": "not measured: worker timed out after 60 s"},
        ],
        "ops": {"rows": [{"family": "matmul", "op": "mm", "dtype": "float32", "cells": {
            "cpu_eager": {"status": "ok", "samples_s": [2e-3, 2e-3, 2e-3]},
            "neuron_eager": {"status": "ok", "samples_s": [1e-3, 1e-3, 1e-3], "fallbacks": []}}}]},
        "dispatch": {"rows": [{"op": "add", "calls": 10, "rounds": 2, "cells": {
            "cpu_eager": {"status": "ok", "samples_s": [1e-6, 1e-6]},
            "neuron_eager": {"status": "ok", "samples_s": [4e-6, 4e-6]}}}]},
        "collectives": {"world_size": 2, "threads_per_rank": 1, "reps": 2, "rows": [
            {"bytes": 1024, "iters": 10, "cells": {
                "gloo": {"status": "ok", "samples_s": [1e-4, 1e-4], "bus_gbps": 0.01},
                "neuron": {"status": "unavailable", "reason": "not built yet (c10d)"}}}]},
        "compile": {"rows": [{"workload": "gpt2/forward b1 s128", "dtype": "float32", "cells": {
            "inductor_cpu": {"status": "ok", "cold": {"first_call_s": 20.0, "steady_call_s": 0.1,
                                      "phases": {"dynamo_s": 1.0, "aot_autograd_s": 2.0,
                                                 "backend_compiler_s": 15.0, "other_s": 1.9}},
                             "warm": {"first_call_s": 5.0, "spawn_to_first_result_s": 9.0}},
            "neuron_compiled": {"status": "unavailable", "reason": "not built yet (compiler)"}}}]},
        "section_errors": {},
    }


# ------------------------------------------------------------------ statistics


def test_stats_median_range_and_spread():
    s = bench_results.stats([3.0, 1.0, 2.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (2.0, 1.0, 3.0, 3)
    assert s["spread_pct"] == pytest.approx(100.0)
    assert bench_results.stats([]) is None


def test_paired_speedup_uses_per_repetition_ratios():
    # The ratio of medians would be 1/2; pairing uses ref[i]/other[i]: 0.5, 2, 4.
    s = bench_results.paired_speedup([1.0, 10.0, 1.0], [2.0, 5.0, 0.25])
    assert (s["median"], s["min"], s["max"]) == (2.0, 0.5, 4.0)
    # A drift that hits both sides alike cancels out in the pairs.
    drift = bench_results.paired_speedup([1.0, 2.0, 4.0], [0.5, 1.0, 2.0])
    assert drift["min"] == drift["max"] == 2.0
    assert bench_results.paired_speedup([], [1.0]) is None


def test_summarize_fills_throughput_and_only_measured_ratios():
    results = bench_results.summarize(fake_results())
    row = results["models"][0]
    assert row["cells"]["cpu_eager"]["throughput"] == pytest.approx(128 / 0.5)
    assert row["speedups"]["neuron_eager"]["median"] == 2.0
    assert row["speedups"]["neuron_eager"]["vs"] == "cpu_eager"
    assert "inductor_cpu" not in row["speedups"]  # errored: no ratio invented
    assert "neuron_compiled" not in row["speedups"]
    assert results["dispatch"]["rows"][0]["speedups"]["neuron_eager"]["median"] == 0.25
    assert results["ops"]["rows"][0]["speedups"]["neuron_eager"]["median"] == 2.0


def test_results_roundtrip_and_schema_check(tmp_path):
    path = tmp_path / "r.json"
    bench_results.save(fake_results(), path)
    assert bench_results.load(path)["profile"] == "quick"
    bad = fake_results()
    bad["schema"] = 999
    bench_results.save(bad, path)
    with pytest.raises(ValueError, match="schema"):
        bench_results.load(path)


# ------------------------------------------------------------------ report


def test_markdown_report_states_ratios_reasons_and_fallbacks():
    md = bench_report.render(bench_results.summarize(fake_results()))
    assert "**2.00×** (1.00–3.00)" in md  # neuron eager vs CPU eager
    assert "not built yet [" in md  # neuron compiled column says why
    assert "CppCompileError: no g++" in md  # an errored cell keeps its message
    assert "2 ops, 18 calls" in md  # fallback summary per call
    assert "`aten::cat.out` 12" in md
    assert "worker timed out" in md  # a row lost to a dead worker is reported, not dropped
    assert "**0.25×**" in md  # dispatch ratio
    # cold first call and its split (Dynamo, AOTAutograd, backend, rest); warm first call;
    # warm start; steady call
    assert "| 20 s | 1 s | 2 s | 15 s | 1.9 s | 5 s | 9 s | 100 ms |" in md
    assert "| 1.0 KiB |" in md  # collectives row
    assert "openneuron cost" in md  # no prices given: tells how to get costs


def test_report_write_creates_page_and_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    docs = tmp_path / "docs" / "BENCHMARKS.md"
    bench_report.write(bench_results.summarize(fake_results()), docs)
    text = docs.read_text()
    assert "![speed-ups](benchmarks/speedups.png)" in text
    for name in ("speedups", "ops", "collectives"):
        png = tmp_path / "docs" / "benchmarks" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ cost


PRICES = """
currency = "EUR"
[[instance]]
name = "host"
price_per_hour = 3.6
columns = ["cpu_eager", "neuron_eager"]
[[instance]]
name = "trn2"
price_per_hour = 36.0
projection = { chip = "trainium2", chips = 2 }
[projection]
achieved_fraction = 0.5
"""


def write_prices(tmp_path, text=PRICES, name="prices.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_cost_per_million_tokens_from_throughput(tmp_path):
    prices = cost.load_prices(write_prices(tmp_path))
    results = bench_results.summarize(fake_results())
    rows = {r.source: r for r in cost.measured_costs(results, prices)}
    # 3.6 EUR/h = 0.001 EUR/s; 256 tokens/s -> 1e6 tokens cost 0.001 / 256 * 1e6
    assert rows["cpu_eager"].cost == pytest.approx(0.001 / 256 * 1e6)
    assert rows["neuron_eager"].cost == pytest.approx(0.001 / 512 * 1e6)
    assert not any(r.projected for r in rows.values())


def test_cost_scales_per_unit():
    assert cost.cost_per_scale(3.6, 2.0, "training samples") == pytest.approx(0.001 / 2 * 1000)
    # 1 audio second per second costs one hour of the instance per audio hour
    assert cost.cost_per_scale(3.6, 1.0, "audio seconds") == pytest.approx(3.6)


def test_projection_is_a_labelled_roofline(tmp_path):
    prices = cost.load_prices(write_prices(tmp_path))
    results = bench_results.summarize(fake_results())
    (row,) = cost.projected_costs(results, prices)
    chip = CHIPS["trainium2"]
    per_core_flops = chip.bf16_tflops * 1e12 / chip.logical_cores * 0.5
    per_core_bw = chip.hbm_tb_per_s * 1e12 / chip.logical_cores * 0.5
    seconds = max(2e10 / per_core_flops, 1e8 / per_core_bw)
    assert row.projected and row.source.startswith("projection")
    assert row.throughput == pytest.approx(128 / seconds * chip.logical_cores * 2)
    assert row.note == ("compute-bound" if 2e10 / per_core_flops > 1e8 / per_core_bw
                        else "memory-bound")
    md = cost.render_markdown(results, prices)
    assert "PROJECTION, not a measurement: 50%" in md
    assert "EUR per million tokens" in md


def test_no_projection_without_an_achieved_fraction(tmp_path):
    text = PRICES.replace("[projection]\nachieved_fraction = 0.5\n", "")
    prices = cost.load_prices(write_prices(tmp_path, text))
    assert cost.projected_costs(bench_results.summarize(fake_results()), prices) == []


@pytest.mark.parametrize("text, message", [
    ('[[instance]]\nname = "x"\n', "price_per_hour"),
    ('[[instance]]\nname = "x"\nprice_per_hour = 1\n', "columns"),
    ('[[instance]]\nname = "x"\nprice_per_hour = 1\nprojection = { chip = "tpu" }\n', "unknown chip"),
    ('[[instance]]\nname = "x"\nprice_per_hour = -1\ncolumns = ["cpu_eager"]\n', "negative"),
    ('currency = "USD"\n', "no \\[\\[instance\\]\\]"),
    (PRICES.replace("0.5", "1.5"), "achieved_fraction"),
])
def test_bad_price_files_are_rejected_with_a_reason(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        cost.load_prices(write_prices(tmp_path, text))


def test_yaml_price_file(tmp_path):
    pytest.importorskip("yaml")
    path = write_prices(tmp_path, "instance:\n  - name: host\n    price_per_hour: 2\n"
                                  "    columns: [cpu_eager]\n", "prices.yaml")
    assert cost.load_prices(path).instances[0].price_per_hour == 2.0


def test_sample_price_file_loads():
    prices = cost.load_prices(REPO / "examples" / "prices.sample.toml")
    assert prices.achieved_fraction is not None
    assert {i.chip for i in prices.instances} >= {"trainium2", "trainium3"}


def test_cli_cost_prints_costs_and_fails_cleanly_without_results(tmp_path, capsys):
    results_path = tmp_path / "latest.json"
    bench_results.save(fake_results(), results_path)
    prices = write_prices(tmp_path)
    assert cli.main(["cost", "--prices", str(prices), "--results", str(results_path)]) == 0
    out = capsys.readouterr().out
    assert "EUR per million tokens" in out and "PROJECTION" in out
    assert cli.main(["cost", "--prices", str(prices), "--results", str(results_path), "--json"]) == 0
    assert '"projected": true' in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no benchmark results"):
        cli.main(["cost", "--prices", str(prices), "--results", str(tmp_path / "missing.json")])


# ------------------------------------------------------------------ harness


def test_interleaved_timing_records_a_failing_contender_and_goes_on():
    from benchmarks.timing import RepetitionPolicy, measure

    order = []

    def ok(name):
        return lambda: order.append(name)

    def broken():
        raise RuntimeError("kernel exploded")

    policy = RepetitionPolicy(warmup=1, min_reps=3, max_reps=3, budget_s=1.0)
    res = measure({"a": ok("a"), "b": ok("b"), "bad": broken},
                  {n: (lambda: None) for n in ("a", "b", "bad")}, policy)
    assert res["bad"].error == "RuntimeError: kernel exploded"
    assert len(res["a"].samples) == len(res["b"].samples) == 3
    timed = order[4:]  # after first call and one warm-up each
    assert timed[:2] == ["a", "b"] and timed[2:4] == ["b", "a"]  # order rotates


def test_a_stall_during_sample_sizing_does_not_shrink_the_samples():
    from benchmarks.timing import RepetitionPolicy, measure

    in_batch, stalls = [0], [0]

    def step():  # fast
        in_batch[0] += 1

    def sync():  # a batch ends: the first two 2-call batches (sizing batches) stall 30 ms
        if in_batch[0] == 2 and stalls[0] < 2:
            stalls[0] += 1
            time.sleep(0.03)
        in_batch[0] = 0

    policy = RepetitionPolicy(warmup=1, min_reps=2, max_reps=2, budget_s=0, min_sample_s=0.02)
    res = measure({"a": step}, {"a": sync}, policy)
    assert stalls[0] == 2  # the stalls this test is about did happen
    # Sized from the stalled batch, a sample would be a couple of calls; a sample of a
    # step this fast must take thousands of calls to last 20 ms.
    assert res["a"].calls_per_sample > 1000
    assert len(res["a"].samples) == 2


def test_model_worker_measures_a_tiny_model_on_cpu_and_neuron(neuron):
    from benchmarks.columns import CPU_EAGER, NEURON_COMPILED, NEURON_EAGER
    from benchmarks.model_worker import measure_workload
    from benchmarks.models.steps import forward_step
    from benchmarks.timing import RepetitionPolicy
    from benchmarks.workloads import Built, Workload

    def build(dtype):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        return Built(copy.deepcopy(model).to(dtype), {"input": torch.randn(8, 16).to(dtype)},
                     forward_step)

    workload = Workload("tiny", "mlp", "inference", "images", 8, build)
    row = measure_workload(workload, torch.float32, RepetitionPolicy(warmup=1, min_reps=2, max_reps=2),
                           deadline=float("inf"), columns=[CPU_EAGER, NEURON_EAGER, NEURON_COMPILED])
    assert row["cells"]["cpu_eager"]["status"] == "ok"
    assert row["cells"]["neuron_eager"]["status"] == "ok"
    assert len(row["cells"]["neuron_eager"]["samples_s"]) == 2
    assert isinstance(row["cells"]["neuron_eager"]["fallbacks"], dict)
    assert row["cells"]["neuron_eager"]["peak_bytes"] >= 0
    if row["cells"]["neuron_compiled"]["status"] == "unavailable":
        assert row["cells"]["neuron_compiled"]["reason"]
    # FLOPs of two linear layers on 8 rows: 2 * 8 * (16*32 + 32*4)
    assert row["work"]["flops_per_call"] == 2 * 8 * (16 * 32 + 32 * 4)
    bench_results.summarize_cells(row, [["neuron_eager", "cpu_eager"]], 8)
    assert row["speedups"]["neuron_eager"]["n"] == 2
