"""The report document: what collect.py gathered, turned into the sections the text and
HTML renderers show and `--json` writes. Times are seconds since the script started;
source lines are the user's (frames.user_frame)."""

from __future__ import annotations

from collections import defaultdict

from .categories import CATEGORIES, category, is_program
from .frames import user_frame

VERSION = 1
TOP = 15  # rows of the "top ..." tables
STORED_AS = {"float64": "float32", "complex128": "complex64"}
HISTORY_OFF = "turned off (--history-entries 0)"


def build(raw: dict, script: str, argv: list[str], exit_status: int, error: str | None) -> dict:
    t0 = raw["started"]
    observed = raw["observed_ops"]
    return {
        "version": VERSION,
        "script": script,
        "argv": argv,
        "exit_status": exit_status,
        "error": error,
        "started_unix": t0,
        "wall_seconds": raw["ended"] - t0,
        "devices": raw["devices"],
        "sync_error": raw["sync_error"],
        "fallback_ops": _host_ops(observed, "fallback", t0),
        "library_ops": _host_ops(observed, "library", t0),
        "downcasts": _downcasts(observed, t0),
        "compile": _compile(raw["dynamo"], raw["backend_metrics"], t0),
        "memory": _memory(raw, t0),
        "device_time": _device_time(raw["device_totals"]),
        "timeline": _timeline(raw, t0),
        "runtime_counters": raw["runtime_counters"],
    }


def _since(t0: float, time_ns: int | None) -> float | None:
    return None if not time_ns else round(time_ns / 1e9 - t0, 6)


def _host_ops(observed: list[dict], kind: str, t0: float) -> dict:
    """Ops run on the host (fallback: copied out and back; library: PyTorch's CPU kernel
    in place): calls, time, bytes copied, the user's line of the first call."""
    ops = []
    for o in observed:
        if o["kind"] != kind:
            continue
        ops.append({"op": o["op"], "calls": int(o["calls"]), "seconds": float(o.get("seconds", 0.0)),
                    "bytes_to_host": int(o.get("bytes_to_host", 0)),
                    "bytes_to_device": int(o.get("bytes_to_device", 0)),
                    "first_call_s": _since(t0, o.get("first_time_ns")),
                    "source": user_frame(o.get("frames", []))})
    ops.sort(key=lambda o: (-o["seconds"], -o["calls"]))
    return {"ops": ops}


def _downcasts(observed: list[dict], t0: float) -> dict:
    items = [{"dtype": o["op"], "stored_as": STORED_AS.get(o["op"], "?"), "count": int(o["calls"]),
              "first_call_s": _since(t0, o.get("first_time_ns")),
              "source": user_frame(o.get("frames", []))}
             for o in observed if o["kind"] == "downcast"]
    items.sort(key=lambda d: -d["count"])
    return {"items": items}


def graph_break_summary(reason: str) -> str:
    """One line from Dynamo's graph-break reason: what broke and its explanation
    ("Call to `torch._dynamo.graph_break()`: User-inserted graph break. Message: None")."""
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()]
    # Dynamo opens with which bytecode it was tracing; the kind of break comes next.
    if len(lines) > 1 and lines[0].startswith("Encountered graph break"):
        lines = lines[1:]
    title = lines[0] if lines else reason.strip()
    explanation = next((ln[len("Explanation:"):].strip() for ln in lines
                        if ln.startswith("Explanation:")), "")
    return f"{title}: {explanation}" if explanation else title


def _compile(dynamo: dict, backend: dict, t0: float) -> dict:
    compiles = [{**c, "time_s": round(c["time"] - t0, 6)} for c in dynamo["compiles"]]
    for c in compiles:
        del c["time"]
    breaks: dict[tuple, dict] = {}
    for b in dynamo["graph_breaks"]:
        summary = graph_break_summary(b["reason"])
        key = (b["filename"], b["line"], summary)
        if key not in breaks:
            breaks[key] = {"filename": b["filename"], "line": b["line"], "summary": summary,
                           "reason": b["reason"], "count": 0, "first_s": round(b["time"] - t0, 6)}
        breaks[key]["count"] += 1
    keep = ("dynamo_graphs", "forward_graphs", "backward_graphs", "inference_graphs",
            "whole_graph_programs", "op_by_op_graphs", "whole_graph_calls", "op_by_op_calls",
            "fallback_graphs", "compile_seconds", "capture_failures", "ops_without_lowering")
    return {
        "frames_compiled": sum(1 for c in compiles if not c["failure"]),
        # Recompilations Dynamo attempted (each with its guard failure), failed ones too.
        "recompiles": sum(1 for c in compiles if c["recompile_reason"]),
        "failed_compiles": sum(1 for c in compiles if c["failure"]),
        "compiles": compiles,
        "graph_breaks": sorted(breaks.values(), key=lambda b: b["first_s"]),
        "backend": {k: backend.get(k) for k in keep},
    }


def _site_key(frames: list[dict]) -> tuple:
    f = user_frame(frames)
    if f is None and frames:  # only library code: name its innermost frame
        f = {"filename": frames[0].get("filename", "?"), "line": frames[0].get("line", 0),
             "name": frames[0].get("name", "")}
    if f is None:
        return ("(no Python stack: the autograd engine or a C++ thread)", 0, "")
    return (f["filename"], int(f["line"]), f["name"])


def top_allocation_sites(events_per_device: list[list[dict]], top: int = TOP) -> list[dict]:
    """Allocations grouped by the user's source line: how many, bytes in all, and the
    most bytes of that line's allocations live at once (over all cores)."""
    events = [(e["time_us"], d, e) for d, evs in enumerate(events_per_device) for e in evs]
    events.sort(key=lambda x: x[0])  # stable: each core's own order is kept
    sites: dict[tuple, dict] = defaultdict(lambda: {"allocations": 0, "bytes": 0, "live": 0,
                                                    "peak_live_bytes": 0})
    live: dict[tuple, tuple] = {}  # (core, address) -> (site, size)
    for _, d, e in events:
        if e["action"] == "alloc":
            key = _site_key(e.get("frames", []))
            s = sites[key]
            s["allocations"] += 1
            s["bytes"] += e["size"]
            s["live"] += e["size"]
            s["peak_live_bytes"] = max(s["peak_live_bytes"], s["live"])
            live[(d, e["addr"])] = (key, e["size"])
        elif e["action"] == "free_requested":
            hit = live.pop((d, e["addr"]), None)  # None: allocated before the ring's start
            if hit:
                sites[hit[0]]["live"] -= hit[1]
    rows = [{"filename": k[0], "line": k[1], "name": k[2], "allocations": s["allocations"],
             "bytes": s["bytes"], "peak_live_bytes": s["peak_live_bytes"]}
            for k, s in sites.items()]
    rows.sort(key=lambda r: (-r["peak_live_bytes"], -r["bytes"]))
    return rows[:top]


def _memory(raw: dict, t0: float) -> dict:
    samples = raw["samples"]
    events = raw["memory_events"]
    return {
        "peak_allocated_bytes": raw["peak_allocated"],
        "peak_reserved_bytes": raw["peak_reserved"],
        "timeline": {"t": [round(t - t0, 4) for t in samples["time"]],
                     "allocated_bytes": samples["allocated"]},
        # events is None: the memory history was turned off, the section says so.
        "top_sites": {"available": events is not None,
                      "note": None if events is not None else HISTORY_OFF,
                      "sites": top_allocation_sites(events) if events is not None else []},
    }


def _device_time(totals: dict[str, tuple[int, int]]) -> dict:
    rows = [{"name": name, "category": category(name), "count": count, "seconds": ns / 1e9}
            for name, (count, ns) in totals.items()]
    rows.sort(key=lambda r: -r["seconds"])
    by_cat: dict[str, dict] = {}
    for r in rows:
        c = by_cat.setdefault(r["category"], {"category": r["category"], "seconds": 0.0, "count": 0})
        c["seconds"] += r["seconds"]
        c["count"] += r["count"]
    return {
        "total_seconds": sum(r["seconds"] for r in rows),
        "by_category": sorted(by_cat.values(), key=lambda c: (-c["seconds"],
                                                              CATEGORIES.index(c["category"]))),
        "top_ops": [r for r in rows if not is_program(r["name"])][:TOP],
        "top_programs": [r for r in rows if is_program(r["name"])][:TOP],
    }


def _timeline(raw: dict, t0: float) -> dict:
    samples = raw["samples"]
    dyn = raw["dynamo"]
    return {
        "fallback_calls": {"t": [round(t - t0, 4) for t in samples["time"]],
                           "calls": samples["fallback_calls"]},
        "compiles_s": [round(c["time"] - t0, 4) for c in dyn["compiles"]
                       if not c["recompile_reason"]],
        "recompiles_s": [round(c["time"] - t0, 4) for c in dyn["compiles"] if c["recompile_reason"]],
        "graph_breaks_s": [round(b["time"] - t0, 4) for b in dyn["graph_breaks"]],
    }

