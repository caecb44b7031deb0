"""PyTorch's own device-generic test files, run on `neuron` as a measurement.

Each file runs in its own pytest process with PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1
under a time limit; every neuron failure is run again as its CPU twin (same file, same
torch, device cpu) and classified. Writes docs/pytorch-suite.md and build/pytorch-suite/.

    make pytorch-suite                                        # every file in FILES
    .venv/bin/python tools/pytorch_suite.py --files shape_ops view_ops
    .venv/bin/python tools/pytorch_suite.py --report-only     # the page again from results.json

The test files are not in the torch wheel and never go into this tree: --tests names a copy
of PyTorch's test/ folder kept elsewhere (how_to_get_tests() says how to check one out).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import importlib.metadata
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools"
DEFAULT_TESTS = Path("/work/shared/pytorch-suite/torch_tests")
TEST_PACKAGES = ("hypothesis", "expecttest", "parameterized", "sortedcontainers")


@dataclass(frozen=True)
class SuiteFile:
    name: str                     # short name for --files and the report
    path: str                     # relative to the tests folder
    time_limit: int               # seconds for the whole file (CPU twins get the same)
    pytest_args: tuple = ()


# Limits are several times what the files take on a 2-core machine: they only stop a hang.
FILES = (
    SuiteFile("view_ops", "test_view_ops.py", 900),
    SuiteFile("indexing", "test_indexing.py", 900),
    SuiteFile("shape_ops", "test_shape_ops.py", 600),
    SuiteFile("scatter_gather", "test_scatter_gather_ops.py", 600),
    SuiteFile("sort_and_select", "test_sort_and_select.py", 900),
    SuiteFile("type_promotion", "test_type_promotion.py", 900),
    SuiteFile("nn_dropout", "nn/test_dropout.py", 900),
    SuiteFile("nn_embedding", "nn/test_embedding.py", 1800),
    SuiteFile("nn_pooling", "nn/test_pooling.py", 1800),
    SuiteFile("nn_device", "test_nn.py", 3600, ("-k", "TestNNDeviceType")),
    SuiteFile("torch_device", "test_torch.py", 3600, ("-k", "TestTorchDeviceType")),
    SuiteFile("tensor_creation", "test_tensor_creation_ops.py", 1800),
    SuiteFile("binary_ufuncs", "test_binary_ufuncs.py", 3600),
    SuiteFile("reductions", "test_reductions.py", 3600),
)

# CPU twins re-run alone per file, at most (each is a pytest process of a few seconds).
MAX_ALONE_RUNS = 40

CATEGORIES = ("neuron-only", "float64-design", "fails-on-cpu-too", "no-cpu-twin")
FAILED = ("failed", "error")
# Several records per test (subtests, setup + call): the worst one is the test's outcome.
_RANK = {"skipped": 0, "xfail": 1, "passed": 2, "xpass": 3, "failed": 4, "error": 5}
# OpenNeuron stores float64/complex128 as float32/complex64: a failure that names them is
# the documented design, not a bug to chase. (`\bdouble\b` leaves "double_backward" out.)
_FLOAT64 = re.compile(r"float64|complex128|cdouble|ComplexDouble|DoubleTensor|\b[Dd]ouble\b")


# ---- pure logic (tests/python/test_pytorch_suite_tool.py) ----

def select_files(names: list[str] | None) -> list[SuiteFile]:
    """--files accepts the short name, the path, or the path without test_ / .py."""
    if not names:
        return list(FILES)
    chosen = []
    for name in names:
        key = name.removesuffix(".py")
        hits = [f for f in FILES if key in (f.name, f.path[:-3], Path(f.path).stem,
                                             Path(f.path).stem.removeprefix("test_"))]
        if not hits:
            raise SystemExit(f"unknown file {name!r}; known: {', '.join(f.name for f in FILES)}")
        chosen += [f for f in hits if f not in chosen]
    return chosen


def twin_id(nodeid: str) -> str:
    """The CPU twin of a neuron test id: class ...PRIVATEUSE1/...NEURON -> ...CPU and the
    device part of the test name (the last `_neuron` before a dtype suffix or the end)
    -> `_cpu`. A file id (a collection error) is its own twin."""
    parts = nodeid.split("::")
    if len(parts) == 1:
        return nodeid
    classes = [re.sub(r"(PRIVATEUSE1|NEURON)$", "CPU", c) for c in parts[1:-1]]
    name = parts[-1]
    device = list(re.finditer(r"_(neuron|privateuse1)(?=_|\[|$)", name))
    if device:
        name = name[:device[-1].start()] + "_cpu" + name[device[-1].end():]
    return "::".join([parts[0], *classes, name])


# Failures that come from float64 by design although neither the test id nor the message
# names it: the test computes in float64 inside. Pattern (searched in "test id message")
# -> why, shown with the failure.
FLOAT64_INSIDE = {
    r"GradcheckError": "gradcheck compares the analytical Jacobian with finite differences "
                       "taken in float64; on neuron float64 data is float32, too coarse for them",
    r"test_EmbeddingBag_per_sample_weights_failures": "expects a dtype-mismatch error for "
        "float64 per_sample_weights with float32 weights; on neuron both are float32",
    r"test_mode_wrong_dtype": "its last case expects an error for a float64 values out of a "
        "float32 input; on neuron both are float32",
    r"test_randperm_neuron\b": "expects randperm(2**53 + 2) into a float64 out to raise (and "
        "2**25 to fit); float32 holds integers up to 2**24 only",
    r"test_torch_complex_same_dtype_error_neuron_float32": "expects torch.complex(float32, "
        "float64) to raise for mismatched dtypes; on neuron both are float32",
    r"test_random_from_to_neuron_int32": "checks the int32 results after .to(torch.double) on "
        "the device: in float32, values near 2**31 round up past `to`",
    r"test_(tensor_from|set)_storage_neuron_(float32|complex64)": "expects an error for a "
        "storage of float64 (complex128) data; on neuron that data is float32 (complex64)",
    r"test_non_promoting_ops_neuron": "expects lerp(float64, float32) to raise for mixed "
        "dtypes; on neuron both are float32",
    r"test_comparison_ops_with_type_promotion_neuron": "checks that a float64 (complex128) "
        "input keeps that dtype; on neuron it is float32 (complex64)",
    r"test_clip_grad_norm_error_if_nonfinite": "its large gradients (2e200) are finite only "
        "in float64; in float32 they are infinite, so the norms it expects finite are not",
    r"test_logcumsumexp_neuron\b": "its last check expects an error for a float64 input with a "
        "float32 out; on neuron both are float32",
    r"test_memory_format_type_shortcuts": "its last check converts a float64 tensor with "
        ".float(); on neuron the tensor is float32 already and .float() returns it unchanged",
    r"test_gradient_extreme_cases": "its spacing coordinates are a float64 tensor of random "
        "values; in float32 the differences of nearby coordinates lose their digits (the CPU "
        "with float32 coordinates mismatches numpy at the same elements)",
}

# Neuron-only failures whose cause is known and deliberate: pattern (searched in
# "test id message") -> why, shown with the failure in docs/pytorch-suite.md.
KNOWN_REASONS = {
    r"test_fmod_remainder_by_zero_integral": "the test expects CUDA's undefined result for "
        "integer division by zero; neuron raises as the CPU does (ZeroDivisionError)",
    r"test_tensor_storage_type": "the test expects torch.FloatStorage-style CPU classes for "
        "every device but CUDA; Tensor.storage_type() of a neuron tensor is "
        "torch.neuron.FloatStorage etc., as it is torch.cuda.FloatStorage for a CUDA tensor",
    r"test_cauchy_kstest_neuron_bfloat16": "a statistical bound the half type barely meets "
        "with any generator: at median 50 bfloat16's spacing (0.25) is half the scale (0.5), "
        "and the KS statistic lands near the 0.1 bound (the CPU's own, with seed 0: 0.109)",
    r"test_basic_advanced_combined_neuron": "fails only after test_trivial_fancy_out_of_bounds "
        "in the same process (passes alone): that test's out-of-range index is reported at the "
        "next synchronisation, which is in this test",
    r"test_one_hot_neuron": "PyTorch's one_hot leaves the class-range check to the device "
        "for PrivateUse1 (as for CUDA, which the test skips): an out-of-range class is "
        "reported at the next synchronisation",
    r"test_trivial_fancy_out_of_bounds": "an index out of range is found by the device kernel "
        "and raised at the next synchronisation (a RuntimeError naming the op), as CUDA reports a "
        "device-side assert; the test skips CUDA for that reason",
}


def mentions_float64(text: str) -> bool:
    return bool(_FLOAT64.search(text))


def explained(nodeid: str, msg: str, table: dict[str, str]) -> str | None:
    """Why a failure happens, from one of the tables above, or None."""
    text = f"{nodeid} {msg}"
    return next((why for pattern, why in table.items() if re.search(pattern, text)), None)


def classify(nodeid: str, msg: str, cpu_outcome: str | None) -> str:
    """One neuron failure, given its CPU twin's outcome (None: no twin ran)."""
    if cpu_outcome in ("failed", "error", "xfail"):
        return "fails-on-cpu-too"
    if cpu_outcome in ("passed", "xpass"):
        if mentions_float64(nodeid + " " + msg) or explained(nodeid, msg, FLOAT64_INSIDE):
            return "float64-design"
        return "neuron-only"
    return "no-cpu-twin"  # not collected on CPU, skipped there, or its run stopped first


def reason(msg: str) -> str:
    """A failure's first line with numbers and addresses blanked, to group alike ones."""
    first = (msg or "").strip().splitlines()[0] if (msg or "").strip() else "(no message)"
    first = re.sub(r"0x[0-9a-fA-F]+", "0x?", first).replace("`", "'")
    first = re.sub(r"(?<![\w.])-?\d+(\.\d+)?(e[-+]?\d+)?", "N", first)
    return first[:160]


def first_line(msg: str) -> str:
    lines = (msg or "").strip().splitlines()
    return lines[0][:200].replace("`", "'") if lines else "(no message)"


def read_records(path: Path) -> tuple[dict, list[str], list[str] | None]:
    """-> (outcome record per node id, started ids in order, ids a selection found)."""
    outcomes, started, selected = {}, [], None
    if not path.exists():
        return outcomes, started, selected
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a kill
            continue
        if rec.get("event") == "start":
            started.append(rec["nodeid"])
        elif rec.get("event") == "selected":
            selected = rec["nodeids"]
        else:
            old = outcomes.get(rec["nodeid"])
            if old is None or _RANK.get(rec["outcome"], 0) > _RANK.get(old["outcome"], 0):
                outcomes[rec["nodeid"]] = rec
    return outcomes, started, selected


def unfinished(started: list[str], outcomes: dict) -> str | None:
    """The test that was running when the process stopped, if any."""
    return started[-1] if started and started[-1] not in outcomes else None


# ---- running ----

def how_to_get_tests(tests: Path) -> str:
    version = importlib.metadata.version("torch")
    release = re.match(r"\d+\.\d+\.\d+", version).group(0)
    tag, dest = f"v{release}", f"~/pytorch-{release}"
    note = "" if re.fullmatch(r"[\d.]+(\+\w+)?", version) else (
        f"\n  (torch {version} is not a release: check out the commit in torch.version.git_version)")
    return (f"No PyTorch test files at {tests}. They are not in the torch wheel; check out the\n"
            f"test/ folder of PyTorch {tag} (torch {version}) outside this project, never into it:\n"
            f"  git clone --depth 1 --branch {tag} --filter=blob:none --sparse "
            f"https://github.com/pytorch/pytorch {dest}\n"
            f"  git -C {dest} sparse-checkout set test{note}\n"
            f"then: .venv/bin/python tools/pytorch_suite.py --tests {dest}/test")


def ensure_test_packages(deps: Path) -> None:
    """Test-only imports of the files go to `pip --target`, not into the venv."""
    missing = [p for p in TEST_PACKAGES if not (deps / p).is_dir()]
    if missing:
        print(f"installing {' '.join(missing)} into {deps}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(deps), *missing],
                       check=True)


def child_env(device: str, deps: Path, out: Path) -> dict:
    env = dict(os.environ)
    env.pop("CI", None)  # CI=1 switches common_utils to PyTorch-CI behaviour (hypothesis profile, reports)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TOOLS), str(deps), env.get("PYTHONPATH")) if p)
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = device
    env["PYTORCH_PRINT_REPRO_ON_FAILURE"] = "0"  # keeps the "run this to reproduce" text out of messages
    env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(out / "hypothesis")  # not in the tests folder
    return env


def run_pytest(args: list[str], env: dict, log: Path, time_limit: float) -> tuple[int, bool, float]:
    """-> (return code, stopped by the time limit, seconds). Appends to `log`."""
    start = time.monotonic()
    with open(log, "a") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=log.parent, env=env,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        cut = False
        try:
            rc = proc.wait(timeout=max(time_limit, 1))
        except subprocess.TimeoutExpired:
            cut = True
            os.killpg(proc.pid, signal.SIGINT)  # pytest stops at the running test and exits cleanly
            try:
                rc = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
        except KeyboardInterrupt:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    return rc, cut, time.monotonic() - start


MAX_RESUMES = 5


def run_recorded(args: list[str], env: dict, stem: Path, limit: float) -> tuple[dict, list | None, dict]:
    """Runs pytest recording to STEM.jsonl (log STEM.log). A test that kills the process (a
    signal, not our limit) is recorded as an error and the file resumes without the tests
    done, so one crash does not hide the rest. -> (outcomes, ids selected, run info)."""
    record, log, done = (Path(f"{stem}{s}") for s in (".jsonl", ".log", ".done.txt"))
    for path in (record, log, done):
        path.unlink(missing_ok=True)
    env = env | {"PYTORCH_SUITE_RECORD": str(record)}
    wall, crashes = 0.0, []
    while True:
        rc, cut, took = run_pytest(args, env, log, limit - wall)
        wall += took
        outcomes, started, selected = read_records(record)
        running = unfinished(started, outcomes)
        if not (running and rc < 0 and not cut):
            break
        crashes.append(f"crashed in {running.split('::')[-1]} ({signal.Signals(-rc).name})")
        with open(record, "a") as fh:
            fh.write(json.dumps({"nodeid": running, "outcome": "error", "when": "call", "duration": 0.0,
                                 "msg": f"the test process died ({signal.Signals(-rc).name})"}) + "\n")
        if len(crashes) > MAX_RESUMES or wall > limit - 30:
            crashes.append("not resumed")
            break
        done.write_text("".join(n + "\n" for n in [*outcomes, running]))
        env["PYTORCH_SUITE_DONE"] = str(done)
    outcomes, _, _ = read_records(record)
    if cut:
        state = f"stopped at its {limit:.0f} s limit" + (f" in {running.split('::')[-1]}" if running else "")
    elif rc < 0 or rc in (0, 1, 5):  # a crash (listed already), some failed, nothing collected
        state = "ok" if not crashes else ""
    else:
        tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:]
        state = f"pytest exit {rc}: {tail[0][:120] if tail else ''}"
    status = "; ".join(s for s in [*crashes, state] if s)
    return outcomes, selected, {"rc": rc, "wall_s": round(wall, 1), "status": status}


def run_file(f: SuiteFile, tests: Path, out: Path, deps: Path, opts) -> dict:
    limit = opts.time_limit or f.time_limit
    result = {"name": f.name, "path": f.path, "pytest_args": list(f.pytest_args), "time_limit": limit}
    if not (tests / f.path).exists():
        result.update(status=f"not in {tests}", counts={}, failures=[], wall_s=0)
        return result
    common = ["-p", "pytorch_suite_plugin", "-p", "pytorch_suite_compat", "-p", "no:cacheprovider",
              "--rootdir", str(tests), "-q", "-rN", "--tb=short"]
    if opts.test_timeout and importlib.util.find_spec("pytest_timeout"):
        common += ["--timeout", str(opts.test_timeout), "--timeout-method", "signal"]

    outcomes, _, info = run_recorded([*common, str(tests / f.path), *f.pytest_args],
                                     child_env("privateuse1", deps, out), out / f"{f.name}.neuron", limit)
    result.update(info)
    counts = collections.Counter(r["outcome"] for r in outcomes.values())
    result["counts"] = {"passed": counts["passed"] + counts["xpass"], "failed": counts["failed"] + counts["error"],
                        "skipped": counts["skipped"], "xfail": counts["xfail"]}

    failures = [r for n, r in sorted(outcomes.items()) if r["outcome"] in FAILED]
    cpu = {}
    if failures and opts.cpu_twins:
        # The file, not the ids, goes to pytest: an id the CPU does not have (dtype lists
        # differ per device) would stop pytest; the plugin keeps only the listed ids instead.
        ids = out / f"{f.name}.cpu_ids.txt"
        ids.write_text("".join(twin_id(r["nodeid"]) + "\n" for r in failures))
        env = child_env("cpu", deps, out) | {"PYTORCH_SUITE_SELECT": str(ids)}
        cpu, selected, info = run_recorded([*common, str(tests / f.path)], env, out / f"{f.name}.cpu", limit)
        result["cpu"] = info | {"twins_found": len(selected or [])}
    result["failures"] = []
    alone_runs = 0
    for r in failures:
        twin = twin_id(r["nodeid"])
        cpu_outcome = cpu.get(twin, {}).get("outcome")
        category = classify(r["nodeid"], r.get("msg", ""), cpu_outcome)
        if category == "neuron-only" and alone_runs < MAX_ALONE_RUNS:
            # A twin that passed among the other twins may pass only because of what ran
            # before it (a warning already shown once, global state): it runs again alone,
            # as the neuron test's outcome does not depend on the twins.
            alone_runs += 1
            ids = out / f"{f.name}.cpu_alone_ids.txt"
            ids.write_text(twin + "\n")
            env = child_env("cpu", deps, out) | {"PYTORCH_SUITE_SELECT": str(ids)}
            alone, _, _ = run_recorded([*common, str(tests / f.path)], env, out / f"{f.name}.cpu_alone",
                                       limit)
            if alone.get(twin, {}).get("outcome") in FAILED:
                cpu_outcome = "failed alone"
                category = "fails-on-cpu-too"
        result["failures"].append({"nodeid": r["nodeid"], "outcome": r["outcome"], "msg": r.get("msg", ""),
                                   "cpu_twin": twin, "cpu_outcome": cpu_outcome, "category": category})
    return result


# ---- report ----

def git(*args: str, cwd: Path = REPO) -> str:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return ""


def metadata(tests: Path, opts) -> dict:
    commit = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    source = git("describe", "--tags", "--always", cwd=tests) if (tests / ".git").exists() or git(
        "rev-parse", "--is-inside-work-tree", cwd=tests) == "true" else ""
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "torch": importlib.metadata.version("torch"), "commit": commit, "uncommitted_changes": dirty,
            "tests": str(tests), "tests_source": source or "a local copy, not a git checkout",
            "python": sys.version.split()[0], "cores": os.cpu_count(),
            "test_timeout": opts.test_timeout if importlib.util.find_spec("pytest_timeout") else None}


def table(results: list[dict]) -> list[str]:
    cols = ("pass", "fail", "skip", "xfail", *CATEGORIES)
    lines = ["| file | " + " | ".join(cols) + " | time | status |", "|---|" + "---:|" * (len(cols) + 1) + "---|"]
    total = collections.Counter()
    for r in results:
        c = r.get("counts", {})
        cats = collections.Counter(x["category"] for x in r.get("failures", []))
        row = [c.get("passed", 0), c.get("failed", 0), c.get("skipped", 0), c.get("xfail", 0),
               *(cats[k] for k in CATEGORIES)]
        total.update(dict(zip(cols, row)))
        args = " " + " ".join(r["pytest_args"]) if r["pytest_args"] else ""
        lines.append(f"| `{r['path']}{args}` | " + " | ".join(map(str, row)) +
                     f" | {r.get('wall_s', 0):.0f} s | {r['status'].replace('|', '/')} |")
    lines.append("| **total** | " + " | ".join(f"**{total[k]}**" for k in cols) + " | | |")
    return lines


def by_reason(failures: list[dict]) -> list[tuple[str, list[dict]]]:
    groups = collections.defaultdict(list)
    for x in failures:
        groups[reason(x["msg"])].append(x)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def render(meta: dict, results: list[dict]) -> str:
    release = re.match(r"\d+\.\d+\.\d+", meta["torch"]).group(0)
    fails = [dict(x, file=r["path"]) for r in results for x in r.get("failures", [])]
    of = {k: [x for x in fails if x["category"] == k] for k in CATEGORIES}
    timeout = f"{meta['test_timeout']} s per test (pytest-timeout)" if meta["test_timeout"] else "no per-test limit"
    out = [
        "# PyTorch's device-generic test suite on neuron", "",
        "Generated by `tools/pytorch_suite.py` (`make pytorch-suite`); do not edit by hand. Raw results:",
        "`build/pytorch-suite/results.json` and per-file `*.neuron.jsonl` / `*.cpu.jsonl` / logs.", "",
        f"- Run: {meta['date']}, torch {meta['torch']}, OpenNeuron commit `{meta['commit']}`"
        f"{' with uncommitted changes' if meta.get('uncommitted_changes') else ''}, "
        f"Python {meta['python']}, {meta['cores']} cores.",
        f"- Test files: `{meta['tests']}`, {meta['tests_source']}; {timeout}.", "",
        "## How to run", "",
        "```",
        "make pytorch-suite                                          # every file below (builds first)",
        f"make pytorch-suite FILES='shape_ops view_ops' TESTS=~/pytorch-{release}/test",
        ".venv/bin/python tools/pytorch_suite.py --files shape_ops  # a subset, by short name",
        ".venv/bin/python tools/pytorch_suite.py --report-only      # this page again from results.json",
        "```", "",
        "PyTorch's test files are not in the torch wheel and never go into this tree. Without",
        f"`--tests` the script uses `{DEFAULT_TESTS}` when it exists (a PyTorch 2.1-era copy;",
        "`tools/pytorch_suite_compat.py` puts back the few helper names torch 2.13 renamed); without",
        "any, it prints how to check out the `test/` folder of the installed release, e.g.",
        f"`git clone --depth 1 --branch v{release} --filter=blob:none --sparse https://github.com/pytorch/pytorch`",
        "then `git sparse-checkout set test`. The files' test-only imports (hypothesis, expecttest,",
        "parameterized, sortedcontainers) are installed with `pip --target build/pytorch-suite-deps`,",
        "not into the venv. A run of a subset rewrites this page with that subset only.", "",
        "## How it is measured", "",
        "Each file runs in its own pytest process with `PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1`",
        "under a time limit (the *status* column says when one stopped a file; the tests that ran",
        "before are still counted: `tools/pytorch_suite_plugin.py` records each outcome as it",
        "happens; a test that crashes the process counts as an error and the file resumes after it).",
        "Every neuron failure (fail or error) is then run again as its CPU twin: the same",
        "test id with the device class and name suffix mapped to `CPU` / `_cpu`, same file, same torch,",
        "`PYTORCH_TESTING_DEVICE_ONLY_FOR=cpu`. Each failure is then:", "",
        "- **neuron-only**: the CPU twin passes: OpenNeuron's to fix;",
        "- **float64-design**: the CPU twin passes, but the test or its message involves float64,",
        "  complex128 or double: OpenNeuron stores float64 as float32 by design;",
        "- **fails-on-cpu-too**: the CPU twin fails as well (the test file against this torch, not the device),",
        "  among the other twins or run again alone (a twin that passed among the others runs alone before",
        "  a failure counts as neuron-only: some tests pass only after others, e.g. when a warning was shown already);",
        "- **no-cpu-twin**: no CPU result to compare (no such test on the CPU, skipped there, or not reached).", "",
        "## Results per file", "", *table(results), "",
        f"## neuron-only failures ({len(of['neuron-only'])})", "",
    ]
    if not of["neuron-only"]:
        out += ["None.", ""]
    for path in sorted({x["file"] for x in of["neuron-only"]}):
        out += [f"### `{path}`", ""]
        for x in of["neuron-only"]:
            if x["file"] != path:
                continue
            why = explained(x["nodeid"], x["msg"], KNOWN_REASONS)
            out.append(f"- `{x['nodeid'].split('::', 1)[-1]}`: {first_line(x['msg'])}"
                       + (f" — **why**: {why}" if why else ""))
        out.append("")
    out += [f"## float64-design failures ({len(of['float64-design'])}), by reason", ""]
    for key, xs in by_reason(of["float64-design"]):
        why = explained(xs[0]["nodeid"], xs[0]["msg"], FLOAT64_INSIDE)
        out += [f"- **{len(xs)}** `{key}`" + (f" — **why**: {why}" if why else "")]
        out += [f"  - `{x['nodeid']}`" for x in xs]
    if not of["float64-design"]:
        out.append("None.")
    out += ["", "## Other failures, by reason", "",
            "Failing on the CPU too, or without a CPU result: counts and one example each.", ""]
    for cat in ("fails-on-cpu-too", "no-cpu-twin"):
        out += [f"### {cat} ({len(of[cat])})", ""]
        out += [f"- **{len(xs)}** `{key}` (e.g. `{xs[0]['nodeid']}`)" for key, xs in by_reason(of[cat])]
        out.append("" if of[cat] else "None.\n")
    return "\n".join(out).rstrip() + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=Path, default=None,
                    help=f"PyTorch's test/ folder (default: {DEFAULT_TESTS} if it exists)")
    ap.add_argument("--files", nargs="+", metavar="NAME",
                    help="subset by short name: " + " ".join(f.name for f in FILES))
    ap.add_argument("--time-limit", type=int, default=0, help="seconds per file, for every file (default: per file)")
    ap.add_argument("--test-timeout", type=int, default=300,
                    help="seconds per test if pytest-timeout is installed; 0: none")
    ap.add_argument("--no-cpu-twins", dest="cpu_twins", action="store_false", help="skip the CPU re-runs")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "pytorch-suite")
    ap.add_argument("--deps", type=Path, default=REPO / "build" / "pytorch-suite-deps")
    ap.add_argument("--doc", type=Path, default=REPO / "docs" / "pytorch-suite.md")
    ap.add_argument("--report-only", action="store_true", help="rewrite --doc from --out/results.json")
    opts = ap.parse_args(argv)
    out, results_json = opts.out.resolve(), opts.out.resolve() / "results.json"

    if opts.report_only:
        data = json.loads(results_json.read_text())
        for f in data["files"]:  # the tables above may have changed since the run
            for x in f.get("failures", []):
                if x.get("cpu_outcome") != "failed alone":
                    x["category"] = classify(x["nodeid"], x.get("msg", ""), x.get("cpu_outcome"))
        opts.doc.write_text(render(data["meta"], data["files"]))
        print(f"wrote {opts.doc}")
        return 0

    tests = (opts.tests or DEFAULT_TESTS).expanduser().resolve()
    if not tests.is_dir():
        print(how_to_get_tests(tests), file=sys.stderr)
        return 2
    if tests == REPO or REPO in tests.parents:
        print(f"{tests} is inside this project: keep PyTorch's test files outside it.", file=sys.stderr)
        return 2
    files = select_files(opts.files)
    out.mkdir(parents=True, exist_ok=True)
    ensure_test_packages(opts.deps.resolve())

    meta, results = metadata(tests, opts), []
    for f in files:
        print(f"{f.name}: running {f.path} {' '.join(f.pytest_args)}".rstrip(), flush=True)
        r = run_file(f, tests, out, opts.deps.resolve(), opts)
        results.append(r)
        cats = collections.Counter(x["category"] for x in r["failures"])
        print(f"{f.name}: {r['counts']} in {r['wall_s']:.0f} s, {r['status']}"
              + (f"; CPU twins: {dict(cats)}" if cats else ""), flush=True)
        # Written after every file so an interrupted run keeps what it measured.
        results_json.write_text(json.dumps({"meta": meta, "files": results}, indent=1))
    opts.doc.write_text(render(meta, results))
    print("\n".join(table(results)))
    print(f"wrote {opts.doc} and {results_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
