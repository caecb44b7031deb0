"""`openneuron`: command-line tools.

    openneuron cost --prices prices.toml [--results benchmarks/results/latest.json]
    openneuron bench-report [--results ...] [--docs docs/BENCHMARKS.md] [--prices ...]
    openneuron cache list|stats|clear
    openneuron report [--html FILE] [--json FILE] SCRIPT [ARGS...]

`python -m openneuron ...` runs the same commands.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

DEFAULT_RESULTS = Path("benchmarks/results/latest.json")


def _load_results(path: Path) -> dict:
    from .bench_results import load, summarize

    if not path.exists():
        sys.exit(f"openneuron: no benchmark results at {path}; run `make bench-quick` or "
                 "`make bench` first, or pass --results")
    return summarize(load(path))


def cmd_cost(args: argparse.Namespace) -> int:
    from . import cost

    results = _load_results(args.results)
    prices = cost.load_prices(args.prices)
    if args.achieved_fraction is not None:
        prices.achieved_fraction = args.achieved_fraction
    if args.precision:
        prices.precision = args.precision
    if args.json:
        rows = cost.measured_costs(results, prices) + cost.projected_costs(results, prices)
        json.dump({"currency": prices.currency, "assumptions": cost.assumptions(prices),
                   "rows": [asdict(r) for r in rows]}, sys.stdout, indent=1)
        print()
    else:
        print(f"Cost per completed work, from {args.results} (profile "
              f"{results.get('profile')}, {results.get('started')})\n")
        print(cost.render_markdown(results, prices))
    return 0


def cmd_bench_report(args: argparse.Namespace) -> int:
    from . import bench_report

    results = _load_results(args.results)
    results.setdefault("results_path", str(args.results))
    bench_report.write(results, args.docs, args.prices)
    print(f"wrote {args.docs}")
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from ..dynamo import disk_cache

    where = disk_cache.cache_dir()
    if args.action == "clear":
        print(f"removed {disk_cache.clear()} entries from {where}")
        return 0
    rows = disk_cache.entries()
    if args.action == "stats":
        bad = sum(r["status"] != "ok" for r in rows)
        state = "on" if disk_cache.enabled() else "off (OPENNEURON_DISK_CACHE=0)"
        print(f"{where}: {len(rows)} entries, {sum(r['bytes'] for r in rows)} bytes, "
              f"{bad} unusable; disk cache {state}")
        return 0
    for r in rows:
        what = (f"{r['kind']} graph, {r['nodes']} nodes, {r['instructions']} instructions"
                if r["status"] == "ok" else r["status"])
        print(f"{r['name']}  {r['bytes']:>9} bytes  {r['age_s']:>8} s old  {what}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ..report import main as report_main

    return report_main(args.argv)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="openneuron", description="OpenNeuron tools")
    sub = ap.add_subparsers(dest="command", required=True)

    c = sub.add_parser("cost", help="cost per completed work from benchmark throughput and your prices")
    c.add_argument("--prices", type=Path, required=True, help="TOML or YAML price file "
                   "(see examples/prices.sample.toml)")
    c.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    c.add_argument("--achieved-fraction", type=float, help="override the projection's assumed "
                   "fraction of peak (0-1]")
    c.add_argument("--precision", choices=["bf16", "fp8"], help="peak used by the projection")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(func=cmd_cost)

    r = sub.add_parser("bench-report", help="regenerate docs/BENCHMARKS.md from a results JSON")
    r.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    r.add_argument("--docs", type=Path, default=Path("docs/BENCHMARKS.md"))
    r.add_argument("--prices", type=Path, help="also render the cost table with these prices")
    r.set_defaults(func=cmd_bench_report)

    k = sub.add_parser("cache", help="the on-disk cache of compiled-graph recordings "
                       "(OPENNEURON_CACHE_DIR)")
    k.add_argument("action", choices=["list", "stats", "clear"])
    k.set_defaults(func=cmd_cache)

    # Everything after `report` is its own command line (report options, then the script
    # and the script's arguments, which may look like options): passed on verbatim.
    p = sub.add_parser("report", add_help=False, prefix_chars="\0",
                       help="run a script on neuron and report fallbacks, downcasts, "
                       "recompilations, memory and device time (openneuron report --help)")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_report)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError) as exc:
        print(f"openneuron {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
