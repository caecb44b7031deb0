"""The report as one self-contained HTML page: inline CSS, inline SVG plots (svg.py),
no scripts and nothing loaded from anywhere, so it can be mailed or attached to an issue."""

from __future__ import annotations

import time
from html import escape

from . import svg
from .formatting import duration, location, path, plural, size

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px;
       color: #222; padding: 0 16px; }
h1 { font-size: 20px; margin-bottom: 4px; } h2 { font-size: 16px; margin-top: 28px;
     border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta { color: #666; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 16px 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; min-width: 120px; }
.card b { display: block; font-size: 18px; }
.card.warn { border-color: #d9822b; background: #fff7ee; }
.plots { display: flex; flex-wrap: wrap; gap: 18px; }
figure { margin: 0; } figcaption { font-weight: 600; margin-bottom: 4px; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border-bottom: 1px solid #eee; padding: 3px 10px; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code, pre { font: 12px/1.4 ui-monospace, monospace; }
pre { background: #f6f6f6; padding: 6px 8px; margin: 2px 0; white-space: pre-wrap; }
.note { color: #8a5a00; }
"""


def _table(headers: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    """Cells are escaped unless they are already HTML (tuple ("html", text))."""
    def cell(i, c, tag):
        cls = ' class="n"' if i in numeric else ""
        body = c[1] if isinstance(c, tuple) else escape(str(c))
        return f"<{tag}{cls}>{body}</{tag}>"

    head = "".join(cell(i, h, "th") for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell(i, c, "td") for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _note(text: str | None) -> str:
    return f'<p class="note">{escape(text)}</p>' if text else ""


def _card(label: str, value: str, warn: bool = False) -> str:
    return f'<div class="card{" warn" if warn else ""}"><b>{escape(value)}</b>{escape(label)}</div>'


def _cards(doc: dict) -> str:
    fb = sum(o["calls"] for o in doc["fallback_ops"]["ops"])
    lib = sum(o["calls"] for o in doc["library_ops"]["ops"])
    down = sum(d["count"] for d in doc["downcasts"]["items"])
    c = doc["compile"]
    peak = max(doc["memory"]["peak_allocated_bytes"], default=0)
    dev = doc["device_time"]["total_seconds"]
    return '<div class="cards">' + "".join([
        _card("CPU fallback calls", str(fb), warn=fb > 0),
        _card("host library calls", str(lib)),
        _card("float64 downcasts", str(down), warn=down > 0),
        _card("frames compiled", str(c["frames_compiled"])),
        _card("recompilations", str(c["recompiles"]), warn=c["recompiles"] > 0),
        _card("graph breaks", str(sum(b["count"] for b in c["graph_breaks"])),
              warn=bool(c["graph_breaks"])),
        _card("peak memory (one core)", size(peak)),
        _card("device time", duration(dev)),
    ]) + "</div>"


def _figure(caption: str, body: str) -> str:
    return f"<figure><figcaption>{escape(caption)}</figcaption>{body}</figure>"


def _plots(doc: dict) -> str:
    t = doc["device_time"]
    if t["by_category"]:
        cats = t["by_category"]
        bars = svg.bar_chart("Device time by op category", [c["category"] for c in cats],
                             [c["seconds"] for c in cats], duration)
    else:
        bars = _note("Device time: no device work")
    timeline = doc["memory"]["timeline"]
    top = max((max(s, default=0) for s in timeline["allocated_bytes"]), default=0)
    unit, scale = next(((u, f) for u, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
                        if top >= 4 * f), ("bytes", 1))
    memory = svg.line_chart(
        "Memory allocated per core over time",
        [(f"neuron:{d}", timeline["t"], [b / scale for b in series])
         for d, series in enumerate(timeline["allocated_bytes"])],
        [], f"{unit} allocated", lambda v: f"{v:g}")
    tl = doc["timeline"]
    events = svg.line_chart(
        "CPU fallbacks and recompilations over time",
        [("CPU fallback calls (total)", tl["fallback_calls"]["t"], tl["fallback_calls"]["calls"])],
        [("compilations", "#6f7a86", tl["compiles_s"]),
         ("recompilations", "#c23b3b", tl["recompiles_s"]),
         ("graph breaks", "#d9822b", tl["graph_breaks_s"])],
        "calls", lambda v: f"{v:g}")
    return ('<div class="plots">'
            + _figure("Device time by op category", bars)
            + _figure("Memory allocated per core over time", memory)
            + _figure("CPU fallbacks and recompilations over time", events) + "</div>")


def _host_ops(title: str, section: dict, copies: bool) -> str:
    out = f"<h2>{escape(title)}</h2>"
    if not section["ops"]:
        return out + "<p>none</p>"
    headers = ["op", "calls", "time"] + (["to host", "to device"] if copies else []) + ["first call at"]
    rows = [[("html", f"<code>{escape(o['op'])}</code>"), o["calls"], duration(o["seconds"])]
            + ([size(o["bytes_to_host"]), size(o["bytes_to_device"])] if copies else [])
            + [location(o["source"])] for o in section["ops"]]
    return out + _table(headers, rows, numeric={1, 2, 3, 4} if copies else {1, 2})


def _downcasts(section: dict) -> str:
    out = "<h2>float64 / complex128 downcasts</h2>"
    if not section["items"]:
        return out + "<p>none</p>"
    rows = [[f"{d['dtype']} → {d['stored_as']}", d["count"], location(d["source"])]
            for d in section["items"]]
    return out + _table(["dtype", "count", "first at"], rows, numeric={1})


def _compile(c: dict) -> str:
    failed = f"{c['failed_compiles']} failed, " if c["failed_compiles"] else ""
    out = (f"<h2>torch.compile</h2><p>{plural(c['frames_compiled'], 'frame')} compiled, "
           f"{plural(c['recompiles'], 'recompilation')}, {failed}"
           f"{plural(sum(b['count'] for b in c['graph_breaks']), 'graph break')}.</p>")
    if c["compiles"]:
        def why(x):
            parts = [x["recompile_reason"] or "first compile"] + (
                [f"failed: {x['failure']}"] if x["failure"] else [])
            return ("html", "".join(f"<pre>{escape(p)}</pre>" for p in parts))

        rows = [[x["compile_id"], ("html", f"<code>{escape(x['function'] or '?')}</code>"),
                 location(x), f"{x['time_s']:.2f} s", why(x)] for x in c["compiles"]]
        out += _table(["id", "function", "defined at", "when", "why (Dynamo's guard failure)"], rows,
                      numeric={3})
    if c["graph_breaks"]:
        rows = [[location(g), g["count"],
                 ("html", f"<details><summary>{escape(g['summary'])}</summary>"
                          f"<pre>{escape(g['reason'])}</pre></details>")] for g in c["graph_breaks"]]
        out += "<h3>Graph breaks</h3>" + _table(["where", "count", "reason"], rows, numeric={1})
    return out


def _memory(m: dict) -> str:
    rows = [[f"neuron:{d}", size(a), size(r)] for d, (a, r)
            in enumerate(zip(m["peak_allocated_bytes"], m["peak_reserved_bytes"]))]
    out = "<h2>Memory</h2>" + _table(["core", "peak allocated", "peak reserved"], rows, {1, 2})
    sites = m["top_sites"]
    out += "<h3>Top allocation sites</h3>" + _note(sites["note"])  # the history turned off
    if sites["sites"]:
        rows = [[location(s), s["allocations"], size(s["bytes"]),
                 size(s["peak_live_bytes"]), s["name"]] for s in sites["sites"]]
        out += _table(["where", "allocations", "bytes", "peak live", "in"], rows, {1, 2, 3})
    return out


def _device_time(t: dict) -> str:
    out = "<h2>Device time</h2>"
    total = t["total_seconds"]
    for title, rows in (("Top ops", t["top_ops"]), ("Top programs (compiled graphs)",
                                                    t["top_programs"])):
        if rows:
            out += f"<h3>{title}</h3>" + _table(
                ["name", "count", "time", "share", "category"],
                [[("html", f"<code>{escape(r['name'])}</code>"), r["count"], duration(r["seconds"]),
                  f"{100 * r['seconds'] / total:.1f}%" if total else "-", r["category"]]
                 for r in rows], {1, 2, 3})
    return out


def render(doc: dict) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(doc["started_unix"]))
    status = f"exit status {doc['exit_status']}" + (f" ({doc['error']})" if doc["error"] else "")
    title = f"openneuron report: {path(doc['script'])}"
    body = "".join([
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">{escape(" ".join([path(doc["script"]), *doc["argv"]]))} &middot; '
        f"{escape(status)} &middot; {doc['wall_seconds']:.2f} s &middot; started {started} "
        f"&middot; {plural(doc['devices'], 'core')}</p>",
        _note(f"device error at exit: {doc['sync_error']}" if doc["sync_error"] else None),
        _cards(doc), _plots(doc),
        _host_ops("CPU fallback ops", doc["fallback_ops"], copies=True),
        _host_ops("Host library ops", doc["library_ops"], copies=False),
        _downcasts(doc["downcasts"]), _compile(doc["compile"]), _memory(doc["memory"]),
        _device_time(doc["device_time"]),
    ])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head>"
            f"<body>{body}</body></html>\n")
