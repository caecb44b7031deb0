"""PNG plots for docs/BENCHMARKS.md (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

from .bench_results import column_labels


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display on build machines
    import matplotlib.pyplot as plt

    return plt


def _speedup_bars(ax, names: list[str], series: dict[str, list[float | None]], title: str) -> None:
    """Horizontal grouped bars on a log axis, with the reference at 1x."""
    height = 0.8 / max(len(series), 1)
    for i, (label, values) in enumerate(series.items()):
        ys = [y + i * height for y in range(len(names))]
        # Bars grow from the reference line at 1x: left when slower, right when faster.
        widths = [(v - 1.0) if v else 0.0 for v in values]
        ax.barh(ys, widths, left=1.0, height=height, label=label)
    ax.set_yticks([y + height * (len(series) - 1) / 2 for y in range(len(names))], names)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    # Symmetric limits around 1x and plain "2x"-style ticks: log minor labels overlap.
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    present = [v for vs in series.values() for v in vs if v]
    extent = max([2.0] + [max(v, 1 / v) for v in present]) * 1.15
    ax.set_xlim(1 / extent, extent)
    ticks = [2.0 ** k for k in range(-8, 9) if 1 / extent <= 2.0 ** k <= extent]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}×"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("speed-up vs reference (log; > 1 is faster)")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=7)


def plot_model_speedups(results: dict, path: Path) -> bool:
    rows = results.get("models", [])
    labels = column_labels(results)
    comparisons = [(c, r) for c, r in results.get("comparisons", [])
                   if any(c in row.get("speedups", {}) for row in rows)]
    dtypes = sorted({r["dtype"] for r in rows}, key=lambda d: d != "float32")
    if not rows or not comparisons:
        return False
    plt = _pyplot()
    workloads = list(dict.fromkeys(f"{r['model']} {r['workload']}" for r in rows))
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.5 * len(dtypes), 0.45 * len(workloads) + 1.5),
                             squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        by_name = {f"{r['model']} {r['workload']}": r for r in rows if r["dtype"] == dtype}
        series = {f"{labels.get(c, c)} vs {labels.get(ref, ref)}":
                  [by_name.get(w, {}).get("speedups", {}).get(c, {}).get("median") for w in workloads]
                  for c, ref in comparisons}
        _speedup_bars(ax, workloads, series, dtype)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def plot_op_speedups(results: dict, path: Path) -> bool:
    rows = [r for r in results.get("ops", {}).get("rows", []) if r.get("speedups")]
    if not rows:
        return False
    plt = _pyplot()
    names = [f"{r['op']} ({r['dtype']})" for r in rows]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(names) + 1.5))
    _speedup_bars(ax, names, {"neuron eager vs CPU eager":
                              [r["speedups"]["neuron_eager"]["median"] for r in rows]}, "ops")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def plot_collectives(results: dict, path: Path) -> bool:
    """Bus bandwidth against message size, one panel per collective: neuron and Gloo, and
    the single-thread memcpy bandwidth of the same run as a horizontal line."""
    coll = results.get("collectives", {})
    rows = coll.get("rows", [])
    if not rows:
        return False
    ops = list(dict.fromkeys(r.get("op", "all_reduce") for r in rows))
    memcpy = (coll.get("memcpy") or {}).get("gbps")
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(ops), figsize=(4.5 * len(ops), 4), squeeze=False, sharey=True)
    for ax, op in zip(axes[0], ops):
        for backend, label in (("gloo", "Gloo (CPU tensors)"), ("neuron", "neuron")):
            points = [(r["bytes"], r["cells"][backend]["bus_gbps"]) for r in rows
                      if r.get("op", "all_reduce") == op
                      and r["cells"].get(backend, {}).get("status") == "ok"]
            if points:
                ax.plot(*zip(*points), marker="o", markersize=3, label=label)
        if memcpy:
            ax.axhline(memcpy, color="gray", linestyle="--", linewidth=1,
                       label=f"memcpy, 1 thread ({memcpy:.1f} GB/s)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes, full tensor)")
        ax.set_title(f"{op}, {coll.get('world_size', 2)} ranks")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("bus bandwidth (GB/s)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def write_plots(results: dict, directory: Path, link_prefix: str) -> dict[str, str]:
    """Writes the PNGs; returns {plot name: link relative to the markdown page}."""
    directory.mkdir(parents=True, exist_ok=True)
    links = {}
    for name, plot in (("speedups", plot_model_speedups), ("ops", plot_op_speedups),
                       ("collectives", plot_collectives)):
        if plot(results, directory / f"{name}.png"):
            links[name] = f"{link_prefix}/{name}.png"
    return links
