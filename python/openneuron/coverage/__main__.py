"""python -m openneuron.coverage [--mapping causal-lm ...] [--only a,b] [--compiled]"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import driver, report
from .mappings import MAPPINGS, architectures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m openneuron.coverage", description=__doc__)
    ap.add_argument("--mapping", action="append", choices=sorted(MAPPINGS),
                    help="mappings to cover (default: causal-lm; 'all' tiers with --all)")
    ap.add_argument("--all", action="store_true", help="every mapping (both tiers)")
    ap.add_argument("--only", help="comma-separated architectures (model_type names)")
    ap.add_argument("--limit", type=int, help="first N architectures of each mapping")
    ap.add_argument("--compiled", action="store_true",
                    help="run neuron under torch.compile(backend='neuron')")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300, help="seconds per architecture")
    ap.add_argument("--json", default="build/coverage/model_coverage.json")
    ap.add_argument("--markdown", default=None, help="write the report here (docs/model-coverage.md)")
    args = ap.parse_args(argv)

    names = sorted(MAPPINGS) if args.all else (args.mapping or ["causal-lm"])
    names.sort(key=lambda n: (MAPPINGS[n].tier, n))
    sections = []
    for name in names:
        archs = architectures(MAPPINGS[name])
        if args.only:
            wanted = set(args.only.split(","))
            archs = [a for a in archs if a in wanted]
        if args.limit:
            archs = archs[: args.limit]
        if not archs:
            continue
        print(f"{name}: {len(archs)} architectures", file=sys.stderr)
        results = driver.run(name, archs, args.compiled, args.workers, args.timeout,
                             progress=lambda d, t: print(f"  {d}/{t}", file=sys.stderr))
        summary = report.summarize(results)
        sections.append((name, summary, results))
        c = summary["counts"]
        print(f"{name}: pass {c['pass']}/{summary['total']} ({100 * summary['pass_rate']:.1f}%), "
              f"with fallback {c['pass-with-fallback']}, mismatch {c['mismatch']}, "
              f"error {c['error']}, cpu-error {c['cpu-error']}")
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({n: {"summary": s, "results": r} for n, s, r in sections}, f, indent=1)
    if args.markdown:
        command = "python -m openneuron.coverage " + " ".join(argv if argv is not None else sys.argv[1:])
        with open(args.markdown, "w") as f:
            f.write(report.markdown(sections, command.strip()))
    mismatches = sum(s["counts"]["mismatch"] for _, s, _ in sections)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
