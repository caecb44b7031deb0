"""`openneuron report SCRIPT`: a script with a known CPU fallback, host-library op, float64
downcast, recompilations and graph break runs under the report in a fresh process, and the
JSON, the printed text and the HTML page (rendered by headless Chromium) name each of
them with its count, reason and the user's source line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openneuron.report import build, categories, command

# Every line the tests look for ends in a marker comment; line numbers are found from it.
SCRIPT = textwrap.dedent('''\
    import torch

    noise = torch.empty(1000, device="neuron")
    noise.uniform_(generator=torch.Generator().manual_seed(0))  # FALLBACK
    for _ in range(3):
        d = torch.cdist(torch.randn(5, 3, device="neuron"), torch.randn(4, 3, device="neuron"))  # LIBRARY
    w = torch.ones(3, dtype=torch.float64).to("neuron")  # DOWNCAST
    big = torch.zeros(1024, 1024, device="neuron")  # BIG_ALLOCATION
    m = torch.randn(64, 64, device="neuron") @ torch.randn(64, 64, device="neuron")
    e = (m + 1).relu().sum().item()


    def f(x):  # COMPILED
        y = x * 2
        torch._dynamo.graph_break()  # BREAK
        return y + 1


    g = torch.compile(f, backend="neuron", dynamic=False)
    for n in (2, 3, 4):
        g(torch.ones(n, device="neuron"))
    print("script done")
''')


def line_of(marker: str, text: str = SCRIPT) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if ln.endswith(f"# {marker}"))


def run_report(cwd: Path, *args: str, console_script: bool = False) -> subprocess.CompletedProcess:
    cmd = ([str(Path(sys.executable).with_name("openneuron"))] if console_script
           else [sys.executable, "-m", "openneuron"])
    env = {**os.environ, "OPENNEURON_FALLBACK": "warn"}
    return subprocess.run(cmd + ["report", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One run of the script under `python -m openneuron report`: (process, JSON, dir)."""
    where = tmp_path_factory.mktemp("report")
    (where / "script.py").write_text(SCRIPT)
    proc = run_report(where, "script.py", "--json", "out.json", "--html", "out.html")
    assert proc.returncode == 0, proc.stderr
    assert "script done" in proc.stdout
    return proc, json.loads((where / "out.json").read_text()), where


def source_line(entry: dict) -> tuple[str, int]:
    src = entry["source"]
    assert src is not None, entry
    return Path(src["filename"]).name, src["line"]


# ------------------------------------------------------- compilations, counts, memory


def test_recompilations_carry_dynamos_guard_failure_text(report):
    _, doc, _ = report
    c = doc["compile"]
    # f and the resume function after its graph break, each compiled for 3 shapes.
    assert c["frames_compiled"] == 6 and c["recompiles"] == 4
    of_f = [x for x in c["compiles"] if x["function"] == "f"]
    assert [x["line"] for x in of_f] == [line_of("COMPILED")] * 3
    assert all(Path(x["filename"]).name == "script.py" for x in of_f)
    assert [x["recompile_reason"] for x in of_f] == [
        None,
        "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3",
        "0/1: tensor 'x' size mismatch at index 0. expected 3, actual 4",
    ]
    assert c["backend"]["dynamo_graphs"] == 6


def test_graph_break_has_its_source_line_and_reason(report):
    _, doc, _ = report
    (gb,) = doc["compile"]["graph_breaks"]
    assert Path(gb["filename"]).name == "script.py" and gb["line"] == line_of("BREAK")
    assert gb["count"] == 3  # traced once per shape
    assert gb["summary"].startswith("Call to `torch._dynamo.graph_break()`")
    assert "User-inserted graph break" in gb["reason"]


def test_fallback_and_library_ops_are_counted(report):
    _, doc, _ = report
    assert [(o["op"], o["calls"]) for o in doc["fallback_ops"]["ops"]] == [("aten::uniform_", 1)]
    assert [(o["op"], o["calls"]) for o in doc["library_ops"]["ops"]] == [
        ("aten::_cdist_forward", 3)]


def test_memory_peak_timeline_and_top_allocation_site(report):
    _, doc, where = report
    mem = doc["memory"]
    assert mem["peak_allocated_bytes"][0] >= 4 * 2**20  # the 1024 x 1024 float32 zeros
    timeline = mem["timeline"]
    assert len(timeline["t"]) == len(timeline["allocated_bytes"][0]) >= 2
    assert max(timeline["allocated_bytes"][0]) >= 4 * 2**20
    top = mem["top_sites"]["sites"][0]
    assert (Path(top["filename"]).name, top["line"]) == ("script.py", line_of("BIG_ALLOCATION"))
    assert top["peak_live_bytes"] == 4 * 2**20 and top["allocations"] == 1


def test_text_report_names_recompiles_and_graph_break(report):
    proc, _, _ = report
    text = proc.stdout
    assert "== openneuron report: script.py (exit status 0," in text
    assert "6 frames compiled, 4 recompilations, 3 graph breaks" in text
    assert "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3" in text
    assert f"graph break x3 at script.py:{line_of('BREAK')}: Call to `torch._dynamo.graph_break()`" in text
    assert re.search(r"^  aten::uniform_ +1 ", text, re.MULTILINE)
    assert re.search(rf"^    script\.py:{line_of('BIG_ALLOCATION')} +1 +4\.0 MiB +4\.0 MiB", text,
                     re.MULTILINE)


def test_html_is_self_contained(report):
    _, _, where = report
    page = (where / "out.html").read_text()
    assert "<script" not in page and not re.search(r"\b(src|href)\s*=", page)
    assert "url(" not in page and "@import" not in page


# ------------------------------------- time, bytes and source lines counted in C++


def test_fallback_op_time_bytes_and_source_line(report):
    _, doc, where = report
    (op,) = doc["fallback_ops"]["ops"]
    assert op["op"] == "aten::uniform_" and op["calls"] == 1 and op["seconds"] > 0
    # A CPU generator: the 1000 floats go to the host, are drawn there and come back.
    assert op["bytes_to_host"] == op["bytes_to_device"] == 4000
    assert source_line(op) == ("script.py", line_of("FALLBACK"))
    assert 0 <= op["first_call_s"] <= doc["wall_seconds"]


def test_library_op_time_and_source_line(report):
    _, doc, where = report
    (op,) = doc["library_ops"]["ops"]
    assert op["op"] == "aten::_cdist_forward" and op["calls"] == 3 and op["seconds"] > 0
    assert source_line(op) == ("script.py", line_of("LIBRARY"))


def test_float64_downcast_count_and_source_line(report):
    _, doc, where = report
    (d,) = doc["downcasts"]["items"]
    assert (d["dtype"], d["stored_as"], d["count"]) == ("float64", "float32", 1)
    assert source_line(d) == ("script.py", line_of("DOWNCAST"))


def test_device_time_by_op_and_category(report):
    _, doc, _ = report
    t = doc["device_time"]
    cats = {c["category"] for c in t["by_category"]}
    assert {"matmul", "elementwise"} <= cats
    assert any(r["category"] == "matmul" and r["count"] >= 1 for r in t["top_ops"])
    assert t["total_seconds"] == pytest.approx(sum(c["seconds"] for c in t["by_category"]))


def test_text_report_names_the_fallback_line(report):
    proc, _, _ = report
    assert re.search(rf"^  aten::uniform_ +1 .* script\.py:{line_of('FALLBACK')}$", proc.stdout,
                     re.MULTILINE)
    assert f"float64 -> float32      1  script.py:{line_of('DOWNCAST')}" in proc.stdout


# ---------------------------------------------------------- exit status, argv, CLI


def test_memory_history_turned_off_says_so(tmp_path):
    (tmp_path / "s.py").write_text('import torch\ntorch.zeros(256, device="neuron")\n')
    proc = run_report(tmp_path, "--history-entries", "0", "--json", "a.json", "--html", "a.html",
                      "s.py")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "a.json").read_text())
    assert "missing" not in doc
    assert doc["memory"]["top_sites"] == {
        "available": False, "note": "turned off (--history-entries 0)", "sites": []}
    assert "  top allocation sites: turned off (--history-entries 0)" in proc.stdout
    assert "turned off (--history-entries 0)" in (tmp_path / "a.html").read_text()


def test_exit_status_and_argv_pass_through_console_script(tmp_path):
    (tmp_path / "s.py").write_text("import sys\nprint('argv', sys.argv[1:])\nsys.exit(3)\n")
    proc = run_report(tmp_path, "--json", "a.json", "s.py", "one", "--flag", "--html", "a.html",
                      "--", "--json", "x", console_script=True)
    assert proc.returncode == 3, proc.stderr
    assert "argv ['one', '--flag', '--json', 'x']" in proc.stdout
    assert "== openneuron report: s.py (exit status 3," in proc.stdout
    assert json.loads((tmp_path / "a.json").read_text())["exit_status"] == 3
    assert (tmp_path / "a.html").exists()


def test_script_exception_still_reports(tmp_path):
    (tmp_path / "s.py").write_text(textwrap.dedent('''\
        import torch
        torch.randn(3, 3).to_sparse().to("neuron").to_dense()
        raise ValueError("boom")
    '''))
    proc = subprocess.run([sys.executable, "-m", "openneuron.report", "s.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert 'File "' in proc.stderr and "s.py\", line 3" in proc.stderr
    assert "ValueError: boom" in proc.stderr and "runpy" not in proc.stderr
    assert "(exit status 1, ValueError: boom," in proc.stdout
    assert "aten::_to_dense" in proc.stdout


def test_split_argv():
    assert command.split_argv(["s.py", "--json", "o.json", "a", "--", "--html", "b"]) == (
        {"--html": None, "--json": Path("o.json"), "--history-entries": None}, "s.py",
        ["a", "--html", "b"])
    opts, script, args = command.split_argv(["--html=p.html", "--history-entries", "0", "s.py"])
    assert (opts["--html"], opts["--history-entries"], script, args) == (Path("p.html"), 0, "s.py", [])
    with pytest.raises(SystemExit):
        command.split_argv(["--json", "o.json"])  # no script


def test_categories():
    cat = categories.category
    assert [cat(n) for n in ("Addmm", "Bmm", "AttentionBackward", "LayerNormBackward", "Sum",
                             "Add+Mul+Relu", "memcpy host-to-device", "graph[Mm,Add]", "Sort",
                             "Gather")] == [
        "matmul", "matmul", "attention", "norm", "reduction", "elementwise", "copy",
        "compiled graph", "reduction", "other"]


def test_top_allocation_sites_peak_live_bytes():
    here = [{"filename": "/u/train.py", "line": 7, "name": "step"}]
    there = [{"filename": "/u/train.py", "line": 9, "name": "step"}]
    core0 = [
        {"action": "alloc", "addr": 1, "size": 100, "time_us": 1, "frames": here},
        {"action": "alloc", "addr": 2, "size": 100, "time_us": 2, "frames": here},
        {"action": "free_requested", "addr": 1, "size": 100, "time_us": 3, "frames": []},
        {"action": "alloc", "addr": 3, "size": 100, "time_us": 4, "frames": here},
        {"action": "free_requested", "addr": 99, "size": 5, "time_us": 5, "frames": []},
    ]
    core1 = [{"action": "alloc", "addr": 1, "size": 50, "time_us": 2, "frames": there}]
    rows = build.top_allocation_sites([core0, core1])
    assert [(r["line"], r["allocations"], r["bytes"], r["peak_live_bytes"]) for r in rows] == [
        (7, 3, 300, 200), (9, 1, 50, 50)]


# ---------------------------------------------------------------- HTML in Chromium


def rendered_dom(page: Path) -> str:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed: `make chromium` installs it")
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                           page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def dom(report):
    return rendered_dom(report[2] / "out.html")


def test_html_renders_memory_and_event_plots(dom):
    assert "<title>Memory allocated per core over time</title>" in dom
    assert "<title>CPU fallbacks and recompilations over time</title>" in dom
    assert dom.count('class="marker"') == 2 + 4 + 3  # compilations, recompilations, breaks
    assert "recompilations (4)" in dom and "graph breaks (3)" in dom
    assert "<code>aten::uniform_</code>" in dom
    assert "tensor 'x' size mismatch at index 0. expected 2, actual 3" in dom


def test_html_renders_device_time_plot(dom):
    assert "<title>Device time by op category</title>" in dom
    assert re.search(r"<title>matmul: [0-9.]+ (s|ms|us)</title>", dom)
