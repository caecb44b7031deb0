"""Cost per completed work: measured throughput x the user's prices.

    $ per million tokens | per thousand training samples | per audio hour | ...
      = (price per hour / 3600) / (units per second) x scale

Prices come only from the user's file (TOML or YAML); none ship as facts. Optionally, a
roofline projection for Trainium chips from documented peak figures and an explicit
achieved fraction: always labelled a projection, never a measurement.

Price file (see examples/prices.sample.toml):

    currency = "USD"
    [[instance]]
    name = "my-host"          # the machine the benchmark ran on
    price_per_hour = 0.10
    columns = ["cpu_eager", "neuron_eager", "inductor_cpu"]
    [[instance]]
    name = "trn2-example"
    price_per_hour = 1.00
    projection = { chip = "trainium2", chips = 1 }
    [projection]
    achieved_fraction = 0.3   # of peak FLOP/s and of HBM bandwidth: an assumption
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .hardware import CHIPS

# Cost is quoted per this many units (must match the harness's unit names).
UNIT_SCALES = {
    "tokens": (1_000_000, "per million tokens"),
    "training samples": (1_000, "per thousand training samples"),
    "audio seconds": (3_600, "per audio hour"),
    "images": (1_000, "per thousand images"),
    "denoising steps": (1_000, "per thousand image denoising steps"),
}


@dataclass
class Instance:
    name: str
    price_per_hour: float
    columns: list[str] = field(default_factory=list)  # measured columns that ran on it
    chip: str | None = None  # projected instance: chip key of hardware.CHIPS
    chips: int = 1


@dataclass
class PriceTable:
    currency: str
    instances: list[Instance]
    achieved_fraction: float | None = None
    precision: str = "bf16"


def _parse(path: Path) -> dict[str, Any]:
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml  # PyYAML: optional, only for YAML price files

        return yaml.safe_load(text) or {}
    import tomllib

    return tomllib.loads(text)


def load_prices(path: str | Path) -> PriceTable:
    data = _parse(Path(path))
    instances = []
    for i, entry in enumerate(data.get("instance", [])):
        where = f"{path}: instance #{i + 1}"
        if "price_per_hour" not in entry or "name" not in entry:
            raise ValueError(f"{where}: needs 'name' and 'price_per_hour'")
        price = float(entry["price_per_hour"])
        if price < 0:
            raise ValueError(f"{where}: price_per_hour must not be negative")
        projection = entry.get("projection") or {}
        chip = projection.get("chip")
        if chip is not None and chip not in CHIPS:
            raise ValueError(f"{where}: unknown chip {chip!r}; known: {', '.join(CHIPS)}")
        if not entry.get("columns") and chip is None:
            raise ValueError(f"{where}: give 'columns' (measured here) or 'projection'")
        instances.append(Instance(entry["name"], price, list(entry.get("columns", [])), chip,
                                  int(projection.get("chips", 1))))
    if not instances:
        raise ValueError(f"{path}: no [[instance]] entries")
    proj = data.get("projection", {})
    fraction = proj.get("achieved_fraction")
    if fraction is not None and not 0 < float(fraction) <= 1:
        raise ValueError(f"{path}: projection.achieved_fraction must be in (0, 1]")
    return PriceTable(data.get("currency", "USD"), instances,
                      float(fraction) if fraction is not None else None,
                      proj.get("precision", "bf16"))


def cost_per_scale(price_per_hour: float, units_per_second: float, unit: str) -> float:
    scale, _ = UNIT_SCALES[unit]
    return price_per_hour / 3600.0 / units_per_second * scale


@dataclass
class CostRow:
    workload: str  # "model/workload"
    dtype: str
    unit: str
    source: str  # column name, or "projection: <chip>"
    instance: str
    throughput: float  # units per second (per instance)
    cost: float  # currency per UNIT_SCALES[unit]
    projected: bool
    note: str = ""


def measured_costs(results: dict, prices: PriceTable) -> list[CostRow]:
    rows = []
    for row in results.get("models", []):
        for inst in prices.instances:
            for column in inst.columns:
                cell = row.get("cells", {}).get(column, {})
                if cell.get("status") != "ok" or not cell.get("throughput"):
                    continue
                rows.append(CostRow(f"{row['model']}/{row['workload']}", row["dtype"], row["unit"],
                                    column, inst.name, cell["throughput"],
                                    cost_per_scale(inst.price_per_hour, cell["throughput"],
                                                   row["unit"]), projected=False))
    return rows


def roofline_seconds(flops: float, bytes_moved: float, peak_flops: float, bytes_per_s: float,
                     fraction: float) -> tuple[float, str]:
    """Time of one call on one core at `fraction` of its peaks, and what bounds it."""
    compute = flops / (peak_flops * fraction)
    memory = bytes_moved / (bytes_per_s * fraction)
    return (compute, "compute") if compute >= memory else (memory, "memory")


def projected_costs(results: dict, prices: PriceTable) -> list[CostRow]:
    """Roofline projection: each logical core runs its own copy of the workload."""
    if prices.achieved_fraction is None:
        return []
    rows = []
    for row in results.get("models", []):
        work = row.get("work")
        for inst in prices.instances:
            if inst.chip is None:
                continue
            key = f"{row['model']}/{row['workload']}"
            if row["dtype"] != "bfloat16":
                continue  # no documented FP32 peak: project the bfloat16 rows only
            if not work:
                continue
            chip = CHIPS[inst.chip]
            seconds, bound = roofline_seconds(
                work["flops_per_call"], work["bytes_per_call"],
                chip.peak_flops(prices.precision) / chip.logical_cores,
                chip.hbm_tb_per_s * 1e12 / chip.logical_cores, prices.achieved_fraction)
            throughput = row["units_per_call"] / seconds * chip.logical_cores * inst.chips
            rows.append(CostRow(key, row["dtype"], row["unit"], f"projection: {chip.name}",
                                inst.name, throughput,
                                cost_per_scale(inst.price_per_hour, throughput, row["unit"]),
                                projected=True, note=f"{bound}-bound"))
    return rows


def assumptions(prices: PriceTable) -> list[str]:
    if prices.achieved_fraction is None:
        return []
    return [
        f"PROJECTION, not a measurement: {prices.achieved_fraction:.0%} of documented peak "
        f"{prices.precision.upper()} FLOP/s and of HBM bandwidth is assumed achieved.",
        "Roofline: time per call = max(FLOPs / compute, bytes / bandwidth); FLOPs from "
        "PyTorch's FLOP counter on the CPU run; bytes = weights x passes + every activation "
        "written once and read once (no fusion credit).",
        "Each logical NeuronCore runs its own copy of the workload; cores and chips scale "
        "perfectly; no host, launch, compile or collective cost.",
        "Only bfloat16 rows are projected (no FP32 peak is documented).",
    ]


def _fmt_money(value: float, currency: str) -> str:
    if value >= 100:
        return f"{value:,.0f} {currency}"
    if value >= 1:
        return f"{value:.2f} {currency}"
    return f"{value:.3g} {currency}"


def render_markdown(results: dict, prices: PriceTable) -> str:
    lines = [f"Prices: supplied by the user ({prices.currency} per instance-hour); "
             "throughput: measured in this run unless marked as a projection.", ""]
    for inst in prices.instances:
        what = (f"projection: {inst.chips} x {CHIPS[inst.chip].name}" if inst.chip
                else "measured columns: " + ", ".join(inst.columns))
        lines.append(f"- **{inst.name}**: {inst.price_per_hour:g} {prices.currency}/h ({what})")
    lines.append("")
    rows = measured_costs(results, prices) + projected_costs(results, prices)
    if not rows:
        lines.append("No priced throughput: no instance's columns were measured.")
        return "\n".join(lines) + "\n"
    lines += ["| workload | dtype | measured on / projected for | instance | throughput | cost |",
              "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r.workload, r.dtype, r.projected, r.cost)):
        _, per = UNIT_SCALES[r.unit]
        source = f"**{r.source}** ({r.note})" if r.projected else r.source
        lines.append(f"| {r.workload} | {r.dtype} | {source} | {r.instance} | "
                     f"{r.throughput:,.1f} {r.unit}/s | {_fmt_money(r.cost, prices.currency)} {per} |")
    notes = assumptions(prices)
    if notes:
        lines += ["", "Projection assumptions:", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
