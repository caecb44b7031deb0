"""The conformance sweep: every OpInfo x every CPU dtype, on neuron against the CPU.

    python -m tests.conformance.sweep                     # every OpInfo (`make conformance`)
    python -m tests.conformance.sweep --modules           # every ModuleInfo (`make conformance`)
    python -m tests.conformance.sweep --op softmax --op 'nn.functional.*norm*'
    python -m tests.conformance.sweep --op add --dtype bfloat16 --sample 3 -v   # one sample
    python -m tests.conformance.sweep --modules --op nn.LSTM --dtype float32 --sample 5

Cases run in worker processes (spawned, so each has a fresh device), one (op, dtype) at a
time, with a per-case time limit: a case that hangs is killed and recorded as
"error: timeout"; a case that kills its worker is recorded as "error: crashed" and the
worker is replaced. Results: tests/conformance/results/op_coverage.json (everything),
results/summary.json (one status per case, committed) and docs/op-coverage.md; with
--modules (PyTorch's module_db, through modules.py), results/module_coverage.json,
results/module_summary.json and the ModuleInfo section of docs/op-coverage.md.

This module imports no torch at the top so that a worker's environment (thread counts,
platform profile) is set before torch loads.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
from multiprocessing.connection import wait
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RESULTS = HERE / "results"
DEFAULT_JSON = RESULTS / "op_coverage.json"
DEFAULT_SUMMARY = RESULTS / "summary.json"
DEFAULT_REPORT = REPO / "docs" / "op-coverage.md"
MODULES_JSON = RESULTS / "module_coverage.json"
MODULES_SUMMARY = RESULTS / "module_summary.json"
HANGS = RESULTS / "hangs"  # stacks of workers that timed out (not committed)

# Per worker: one intra-op thread for the device's kernels and for PyTorch's CPU kernels
# (the reference and the fallback), so N workers use N cores and never oversubscribe.
WORKER_ENV = {
    "OPENNEURON_INTRAOP_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "OPENNEURON_FALLBACK": "silent",   # still counted; the harness reads the counts
}
FP8_ENV = {"OPENNEURON_PLATFORM": "trn3"}  # FP8 exists on the trn3 profile only
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")

# Samples per (op, dtype) in the full sweep: the first N of op.sample_inputs (most ops
# have fewer; the cap bounds the few with hundreds, e.g. sort, __getitem__, einsum).
DEFAULT_MAX_SAMPLES = 48
# Ops whose samples are slow on the CPU itself (reference and fallback), capped lower.
SLOW_OPS_MAX_SAMPLES = {"grid_sampler_3d": 8, "nn.functional.grid_sample": 16}
DEFAULT_TIMEOUT = 120.0
CASES_PER_WORKER = 400  # then the worker is replaced (bounds leaks across cases)


def database(name: str) -> dict:
    """key -> (OpInfo, source) of what a sweep runs: "opinfo" (opinfos.py) or "module"
    (module_db, as OpInfos: modules.py)."""
    if name == "module":
        from tests.conformance import modules

        return modules.all_moduleinfos()
    from tests.conformance import opinfos

    return opinfos.all_opinfos()


# ---------------------------------------------------------------------------------------
# Worker side.


def _worker_main(conn, record: bool, db: str) -> None:
    import faulthandler
    import signal
    import warnings

    # On a timeout the parent asks for the Python stacks (SIGUSR1) before killing us.
    HANGS.mkdir(parents=True, exist_ok=True)
    stack_file = open(HANGS / f"worker-{os.getpid()}.pystack", "w")  # noqa: SIM115
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)
    from tests.conformance import classify

    ops = database(db)
    conn.send(("ready", os.getpid()))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        key, dtype_name, opts = msg
        conn.send(("result", _run_one(classify, ops, key, dtype_name, record, opts)))


def _run_one(classify, ops, key, dtype_name, record, opts, only_sample=None) -> dict:
    """One case; a failure of the harness itself is reported as an error, not raised."""
    import traceback

    import torch

    try:
        op, _ = ops[key]
        return classify.run_case(op, getattr(torch, dtype_name), record=record,
                                 only_sample=only_sample, **opts).as_dict()
    except Exception as exc:  # noqa: BLE001
        tb = traceback.format_exc().strip().splitlines()
        return {"op": key, "dtype": dtype_name, "status": "error", "check": "values",
                "samples": 0, "detail": {"phase": "harness",
                                         "message": f"{type(exc).__name__}: {exc} | {tb[-3:]}"}}


class _Worker:
    def __init__(self, env: dict[str, str], record: bool, db: str):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            self.proc = ctx.Process(target=_worker_main, args=(child, record, db), daemon=True)
            self.proc.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        child.close()
        self.env = env
        self.ready = False
        self.case = None
        self.started = 0.0
        self.done = 0
        self.history: list[str] = []  # the cases this worker ran, for crash reports

    def send(self, case, opts) -> None:
        self.case = case
        self.started = time.monotonic()
        self.history.append(f"{case['op']} {case['dtype']}")
        opts = dict(opts)
        cap = SLOW_OPS_MAX_SAMPLES.get(case["op"])
        if cap is not None:
            opts["max_samples"] = min(cap, opts.get("max_samples") or cap)
        self.conn.send((case["op"], case["dtype"], opts))

    def dump_stacks(self) -> str:
        """Python and native stacks of a hung worker, saved under results/hangs/."""
        import shutil
        import signal

        pid = self.proc.pid
        out = HANGS / f"{self.case['op']}-{self.case['dtype']}-{pid}.txt"
        parts = [f"case: {self.case['op']} {self.case['dtype']}",
                 "previous cases of this worker: " + "; ".join(self.history[-6:-1])]
        try:
            os.kill(pid, signal.SIGUSR1)
            time.sleep(1.0)
            parts.append((HANGS / f"worker-{pid}.pystack").read_text())
        except OSError:
            pass
        if shutil.which("gdb"):
            try:
                parts.append(subprocess.run(
                    ["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 25"],
                    capture_output=True, text=True, timeout=60).stdout)
            except Exception:  # noqa: BLE001
                pass
        HANGS.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(parts))
        return str(out.relative_to(REPO))

    def kill(self) -> None:
        try:
            (HANGS / f"worker-{self.proc.pid}.pystack").unlink()
        except OSError:
            pass
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        try:
            (HANGS / f"worker-{self.proc.pid}.pystack").unlink()
        except OSError:
            pass


def run_pool(cases: list[dict], *, workers: int, timeout: float, opts: dict, record: bool,
             progress=print, db: str = "opinfo") -> list[dict]:
    """Runs cases (dicts with op, dtype, env) on `workers` processes per environment."""
    results: list[dict] = []
    by_env: dict[tuple, list[dict]] = {}
    for c in cases:
        by_env.setdefault(tuple(sorted(c["env"].items())), []).append(c)
    t0 = time.monotonic()
    total = len(cases)
    counts: dict[str, int] = {}

    def finish(case, res):
        res.setdefault("op", case["op"])
        res.setdefault("dtype", case["dtype"])
        results.append(res)
        counts[res["status"]] = counts.get(res["status"], 0) + 1
        n = len(results)
        if n % 100 == 0 or n == total:
            summary = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
            progress(f"[{n}/{total}] {time.monotonic() - t0:.0f}s {summary}")

    for env_key, todo in by_env.items():
        env = {**WORKER_ENV, **dict(env_key)}
        queue = list(todo)
        pool = [_Worker(env, record, db) for _ in range(min(workers, len(queue)))]
        # A spare worker starts in advance, so replacing a dead one costs no start-up time.
        spare = [_Worker(env, record, db)] if len(queue) > len(pool) else []

        def replace():
            if queue:
                pool.append(spare.pop() if spare else _Worker(env, record, db))
                if len(queue) > len(pool):
                    spare.append(_Worker(env, record, db))

        start_failures = 0
        while pool:
            # Hand out work.
            for w in list(pool):
                if w.ready and w.case is None:
                    if queue and w.done < CASES_PER_WORKER:
                        w.send(queue.pop(0), opts)
                    else:
                        w.stop()
                        pool.remove(w)
                        replace()
            if not pool:
                break
            ready = wait([w.conn for w in pool] + [w.proc.sentinel for w in pool], timeout=1.0)
            now = time.monotonic()
            for w in list(pool):
                died = False
                if w.conn in ready:
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):
                        died = True
                    else:
                        if msg[0] == "ready":
                            w.ready = True
                            start_failures = 0
                        elif msg[0] == "result":
                            finish(w.case, msg[1])
                            w.case, w.done = None, w.done + 1
                        continue
                elif w.proc.sentinel in ready and not w.proc.is_alive():
                    died = True
                if died or (w.case is not None and now - w.started > timeout):
                    if w.case is not None:
                        detail = {"phase": "process",
                                  "previous_cases": w.history[-4:-1]}
                        if died:
                            detail["message"] = f"crashed (worker exit code {w.proc.exitcode})"
                        else:
                            detail["message"] = f"timeout after {timeout:.0f}s"
                            detail["stacks"] = w.dump_stacks()
                        finish(w.case, {"status": "error", "check": "values", "samples": 0,
                                        "detail": detail,
                                        "seconds": round(now - w.started, 1)})
                    elif died:
                        progress(f"worker died while starting (exit code {w.proc.exitcode})")
                        start_failures += 1
                        if start_failures >= 3:
                            for x in pool + spare:
                                x.kill()
                            raise RuntimeError("workers keep dying before they are ready: "
                                               "is the build broken? (try --in-process)")
                    w.kill()
                    pool.remove(w)
                    replace()
        for x in spare:
            x.stop()
    return results


# ---------------------------------------------------------------------------------------
# Parent side.


def enumerate_cases(op_patterns, dtype_names, families, db: str = "opinfo"
                    ) -> tuple[list[dict], dict]:
    import torch

    from tests.conformance import families as fam
    from tests.conformance import modules, opinfos

    ops = database(db)
    cases, meta = [], {}
    for key, (op, source) in ops.items():
        if op_patterns and not any(fnmatch.fnmatchcase(key, p) or key == p
                                   for p in op_patterns):
            continue
        family = "module" if db == "module" else fam.family_of(op)
        if families and family not in families:
            continue
        dts = [str(d).removeprefix("torch.") for d in opinfos.cpu_dtypes(op)]
        meta[key] = {"family": family, "source": source, "dtypes": dts}
        if db == "module":
            meta[key]["pytorch_parity"] = modules.parity_marks(op.module_info)
        for d in dts:
            if dtype_names and d not in dtype_names:
                continue
            env = dict(FP8_ENV) if d in FP8_DTYPES else {}
            cases.append({"op": key, "dtype": d, "env": env})
    del torch
    return cases, meta


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def run_in_process(cases, opts, record, verbose, only_sample=None, db="opinfo") -> list[dict]:
    import warnings

    for k, v in WORKER_ENV.items():
        os.environ.setdefault(k, v)
    warnings.simplefilter("ignore")
    import torch

    from tests.conformance import classify

    ops = database(db)
    out = []
    for c in cases:
        res = _run_one(classify, ops, c["op"], c["dtype"], record, opts, only_sample)
        out.append(res)
        if verbose:
            print(json.dumps(res, indent=1, default=str))
        else:
            d = res.get("detail", {})
            where = f"sample {d['sample']} " if "sample" in d else ""
            print(f"{c['op']:45s} {c['dtype']:10s} {res['status']:15s} {where}"
                  f"{d.get('message', '')[:100]}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", action="append", default=[],
                    help="OpInfo name or glob ('name.variant' for variants), with --modules "
                         "a module name ('nn.LSTM'); repeatable")
    ap.add_argument("--modules", action="store_true",
                    help="PyTorch's ModuleInfo database (module_db) instead of the OpInfos")
    ap.add_argument("--dtype", action="append", default=[], help="e.g. float32; repeatable")
    ap.add_argument("--family", action="append", default=[], help="a family of families.py")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-samples", type=int, default=None,
                    help=f"samples per (op, dtype) (default {DEFAULT_MAX_SAMPLES}; with "
                         "--modules all); 0 = all")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    ap.add_argument("--sample", type=int, default=None,
                    help="run only this sample index (in this process; implies -v)")
    ap.add_argument("--in-process", action="store_true", help="no worker processes")
    ap.add_argument("--no-record", action="store_true",
                    help="do not record which aten ops ran (no TorchDispatchMode)")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"results JSON (default {DEFAULT_JSON.relative_to(REPO)}, with "
                         f"--modules {MODULES_JSON.relative_to(REPO)}, for a full sweep; none "
                         "for a partial one)")
    ap.add_argument("--report", type=Path, default=None,
                    help=f"markdown report (default {DEFAULT_REPORT.relative_to(REPO)} for a "
                         "full sweep; --modules rewrites its section only)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    full = not (args.op or args.dtype or args.family or args.sample is not None)
    db = "module" if args.modules else "opinfo"
    if args.max_samples is None:
        args.max_samples = 0 if args.modules else DEFAULT_MAX_SAMPLES
    max_samples = args.max_samples or None
    opts = {"max_samples": max_samples}
    record = not args.no_record
    cases, meta = enumerate_cases(args.op, set(args.dtype), set(args.family), db)
    if not cases:
        print("no case matches", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    if args.sample is not None or args.in_process:
        results = run_in_process(cases, opts, record, args.verbose or args.sample is not None,
                                 args.sample, db)
    else:
        print(f"{len(cases)} cases ({len(meta)} {'ModuleInfos' if args.modules else 'OpInfos'}), "
              f"{args.workers} workers, max {max_samples or 'all'} samples per case, "
              f"timeout {args.timeout:.0f}s", flush=True)
        results = run_pool(cases, workers=args.workers, timeout=args.timeout, opts=opts,
                           record=record, progress=lambda s: print(s, flush=True), db=db)
    elapsed = time.monotonic() - t0
    for r in results:
        m = meta.get(r["op"], {})
        r["family"] = m.get("family", "other")
        r["source"] = m.get("source", "")
    results.sort(key=lambda r: (r["op"], r["dtype"]))

    import torch

    import openneuron

    data = {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "git_commit": _git("rev-parse", "--short", "HEAD"),
            "git_dirty": bool(_git("status", "--porcelain", "--", "csrc", "python")),
            "torch": torch.__version__,
            "openneuron": getattr(openneuron, "__version__", "?"),
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "workers": args.workers if not (args.in_process or args.sample is not None) else 0,
            "database": "module_db" if args.modules else "op_db",
            "max_samples": max_samples,
            "timeout_s": args.timeout,
            "seconds": round(elapsed, 1),
            "full_sweep": full,
            "command": "python -m tests.conformance.sweep " + " ".join(argv or sys.argv[1:]),
        },
        "opinfos": meta,
        "cases": results,
    }
    from tests.conformance import report

    json_path, summary_path = (MODULES_JSON, MODULES_SUMMARY) if args.modules else \
        (DEFAULT_JSON, DEFAULT_SUMMARY)
    out = args.out or (json_path if full else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=1, default=str) + "\n")
        print(f"wrote {out}")
        if full:
            summary_path.write_text(json.dumps(report.summary(data), indent=1,
                                               sort_keys=True) + "\n")
            print(f"wrote {summary_path}")
    rep = args.report or (DEFAULT_REPORT if full else None)
    if rep is not None:
        report.write(rep, data)
        print(f"wrote {rep}")
    print(report.console_summary(data))
    print(f"{elapsed:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
