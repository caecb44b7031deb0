"""Benchmark results: raw interleaved samples in, medians, spreads and ratios out.

The harness (benchmarks/) writes raw per-repetition samples; `summarize` adds the
statistics every reader uses, so the JSON file, the markdown report and the cost report
agree. A speed-up is reference time / column time (above 1: faster than the reference),
taken as the median over repetitions of the ratio within each repetition: the two sides of
one pair were measured moments apart, which cancels most of a shared machine's drift.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


def stats(samples: list[float]) -> dict[str, float] | None:
    if not samples:
        return None
    median = statistics.median(samples)
    return {"median": median, "min": min(samples), "max": max(samples), "n": len(samples),
            "spread_pct": (max(samples) - min(samples)) / median * 100 if median > 0 else 0.0}


def paired_speedup(reference: list[float], other: list[float]) -> dict[str, float] | None:
    """Median and range of reference[i] / other[i] over the repetitions both completed."""
    ratios = [r / o for r, o in zip(reference, other) if o > 0]
    if not ratios:
        return None
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "n": len(ratios)}


def _ok_samples(cell: dict | None) -> list[float]:
    if not cell or cell.get("status") != "ok":
        return []
    return cell.get("samples_s") or []


def summarize_cells(row: dict, comparisons: list[list[str]],
                    units_per_call: float | None = None) -> None:
    """Adds `stats` (and `throughput` per second) to each measured cell of a row and
    `speedups` {column: {vs, median, min, max, n}} for each (column, reference) pair."""
    for cell in row.get("cells", {}).values():
        s = stats(_ok_samples(cell))
        if s is None:
            continue
        cell["stats"] = s
        if units_per_call:
            cell["throughput"] = units_per_call / s["median"]
    speedups = {}
    for column, reference in comparisons:
        ratio = paired_speedup(_ok_samples(row["cells"].get(reference)),
                               _ok_samples(row["cells"].get(column)))
        if ratio is not None:
            speedups[column] = {"vs": reference, **ratio}
    row["speedups"] = speedups


def summarize(results: dict) -> dict:
    """Fills in statistics and ratios for every section of a results document, in place."""
    comparisons = results.get("comparisons", [])
    for row in results.get("models", []):
        summarize_cells(row, comparisons, row.get("units_per_call"))
    for row in results.get("ops", {}).get("rows", []):
        summarize_cells(row, [["neuron_eager", "cpu_eager"]])
    for row in results.get("dispatch", {}).get("rows", []):
        summarize_cells(row, [["neuron_eager", "cpu_eager"]])
    for row in results.get("collectives", {}).get("rows", []):
        summarize_cells(row, [["neuron", "gloo"]])
    for row in results.get("compile", {}).get("rows", []):
        summarize_compile(row)
    return results


def summarize_compile(row: dict, column: str = "neuron_compiled",
                      reference: str = "inductor_cpu") -> None:
    """First-call speed-ups (cold cache, warm cache) of a compiled backend vs Inductor."""
    ref, col = row["cells"].get(reference, {}), row["cells"].get(column, {})
    if ref.get("status") != "ok" or col.get("status") != "ok":
        return
    ratios = {}
    for phase in ("cold", "warm"):
        r, c = ref.get(phase, {}).get("first_call_s"), col.get(phase, {}).get("first_call_s")
        if r and c:
            ratios[phase] = r / c
    row["speedups"] = {column: {"vs": reference, **ratios}}


def fallback_summary(cell: dict) -> tuple[int, int]:
    """(distinct ops, op calls) that ran on the CPU during one call of a neuron cell."""
    fallbacks = cell.get("fallbacks") or {}
    return len(fallbacks), int(sum(fallbacks.values()))


def column_labels(results: dict) -> dict[str, str]:
    return {c["name"]: c["label"] for c in results.get("columns", [])}


def load(path: str | Path) -> dict[str, Any]:
    with open(path) as f:
        results = json.load(f)
    if results.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"{path}: results schema {results.get('schema')!r}, "
                         f"this version reads {SCHEMA_VERSION}")
    return results


def save(results: dict, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
