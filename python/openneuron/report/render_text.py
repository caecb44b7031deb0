"""The report as plain text, printed when the script exits."""

from __future__ import annotations

from .formatting import duration, location, path, plural, size


def table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell; the first left-aligned, numbers right."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]

    def line(cells):
        parts = [str(c).ljust(w) if i == 0 or i == len(cells) - 1 else str(c).rjust(w)
                 for i, (c, w) in enumerate(zip(cells, widths))]
        return (indent + "  ".join(parts)).rstrip()

    return [line(headers)] + [line(r) for r in rows]


def _host_ops(title: str, section: dict, copies: bool) -> list[str]:
    ops = section["ops"]
    calls = sum(o["calls"] for o in ops)
    out = [f"{title}: {plural(len(ops), 'op')}, {plural(calls, 'call')}"]
    if not ops:
        return out
    headers = ["op", "calls", "time"] + (["to host", "to device"] if copies else []) + ["first call at"]
    rows = [[o["op"], o["calls"], duration(o["seconds"])]
            + ([size(o["bytes_to_host"]), size(o["bytes_to_device"])] if copies else [])
            + [location(o["source"])] for o in ops]
    return out + table(headers, rows)


def _downcasts(section: dict) -> list[str]:
    items = section["items"]
    if not items:
        return ["float64/complex128 downcasts: none"]
    out = ["float64/complex128 downcasts (stored in the narrower type on the device):"]
    rows = [[f"{d['dtype']} -> {d['stored_as']}", d["count"], location(d["source"])] for d in items]
    return out + table(["dtype", "count", "first at"], rows)


def _compile(c: dict) -> list[str]:
    breaks = c["graph_breaks"]
    failed = f"{c['failed_compiles']} failed, " if c["failed_compiles"] else ""
    out = [f"torch.compile: {plural(c['frames_compiled'], 'frame')} compiled, "
           f"{plural(c['recompiles'], 'recompilation')}, {failed}"
           f"{plural(sum(b['count'] for b in breaks), 'graph break')}"]
    b = c["backend"]
    if b.get("dynamo_graphs"):
        out.append(f"  neuron backend: {plural(b['dynamo_graphs'], 'graph')} "
                   f"({b['forward_graphs']} forward, {b['backward_graphs']} backward, "
                   f"{b['inference_graphs']} inference), "
                   f"{plural(b['whole_graph_programs'], 'whole-graph program')}, "
                   f"{duration(b['compile_seconds'])} in the backend")
    for x in c["compiles"]:
        if not (x["recompile_reason"] or x["failure"]):
            continue
        what = "failed" if x["failure"] else "recompiled"
        where = f" ({path(x['filename'])}:{x['line']})" if x["filename"] else ""
        out.append(f"  {x['compile_id']} {x['function'] or ''}{where} {what} at {x['time_s']:.2f} s")
        # First lines only (Dynamo appends the user's stack): the JSON and HTML have all.
        for label, text in (("guard failure", x["recompile_reason"]), ("error", x["failure"])):
            if text:
                out.append(f"      {label}: {text.splitlines()[0]}")
    for g in breaks:
        out.append(f"  graph break x{g['count']} at {path(g['filename'])}:{g['line']}: {g['summary']}")
    return out


def _memory(m: dict) -> list[str]:
    out = ["Memory:"]
    for d, (alloc, reserved) in enumerate(zip(m["peak_allocated_bytes"], m["peak_reserved_bytes"])):
        out.append(f"  neuron:{d} peak {size(alloc)} allocated, {size(reserved)} reserved")
    sites = m["top_sites"]
    if not sites["available"]:  # the memory history was turned off
        out.append(f"  top allocation sites: {sites['note']}")
    elif sites["sites"]:
        out.append("  top allocation sites:")
        rows = [[location(s), s["allocations"], size(s["bytes"]),
                 size(s["peak_live_bytes"]), s["name"]] for s in sites["sites"]]
        out += table(["where", "allocations", "bytes", "peak live", "in"], rows, indent="    ")
    return out


def _device_time(t: dict) -> list[str]:
    total = t["total_seconds"]
    out = [f"Device time: {duration(total)}"]
    if not total:
        return out
    out.append("  by category: " + ", ".join(
        f"{c['category']} {100 * c['seconds'] / total:.0f}%" for c in t["by_category"]))
    for title, rows in (("top ops", t["top_ops"]), ("top programs", t["top_programs"])):
        if rows:
            out.append(f"  {title}:")
            out += table(["name", "count", "time", "share", "category"],
                         [[r["name"], r["count"], duration(r["seconds"]),
                           f"{100 * r['seconds'] / total:.1f}%", r["category"]] for r in rows],
                         indent="    ")
    return out


def render(doc: dict) -> str:
    status = f"exit status {doc['exit_status']}"
    if doc["error"]:
        status += f", {doc['error']}"
    head = (f"== openneuron report: {path(doc['script'])} ({status}, "
            f"{doc['wall_seconds']:.2f} s) ==")
    sections = [
        [head] + ([f"  device error at exit: {doc['sync_error']}"] if doc["sync_error"] else []),
        _host_ops("CPU fallback ops (inputs copied to the host, results back)",
                  doc["fallback_ops"], copies=True),
        _host_ops("Host library ops (PyTorch's CPU kernel in place on device memory)",
                  doc["library_ops"], copies=False),
        _downcasts(doc["downcasts"]),
        _compile(doc["compile"]),
        _memory(doc["memory"]),
        _device_time(doc["device_time"]),
    ]
    return "\n" + "\n\n".join("\n".join(s) for s in sections) + "\n"
