"""Turns the sweep's JSON into docs/op-coverage.md, a compact summary and a console table.

    python -m tests.conformance.report [results.json] [out.md]   # re-render without re-running
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent

STATUS_COLUMNS = ("native_own", "native_library", "fallback", "wrong", "error", "skipped")
STATUS_TITLES = {"native_own": "native (own lowering)", "native_library": "native (library)",
                 "fallback": "fallback", "wrong": "wrong", "error": "error",
                 "skipped": "skipped"}
# Issue 4's dtypes first, then the ones the device narrows, then the rest.
DTYPE_ORDER = ("float32", "bfloat16", "float16", "int8", "int16", "int32", "int64", "uint8",
               "bool", "complex64", "float64", "complex128", "complex32", "uint16", "uint32",
               "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
NARROWED = {"float64": "float32", "complex128": "complex64"}


def _dtype_key(d: str):
    return (DTYPE_ORDER.index(d) if d in DTYPE_ORDER else len(DTYPE_ORDER), d)


def _families():
    from tests.conformance.families import FAMILIES

    return FAMILIES


def _family_key(f: str):
    fams = _families()
    return (fams.index(f) if f in fams else len(fams), f)


def is_native(status: str) -> bool:
    return status in ("native_own", "native_library")


def counts_by_dtype(cases) -> dict[str, Counter]:
    out: dict[str, Counter] = defaultdict(Counter)
    for c in cases:
        out[c["dtype"]][c["status"]] += 1
    return dict(sorted(out.items(), key=lambda kv: _dtype_key(kv[0])))


def headline(data) -> dict:
    """float32 over op_db: the issue's acceptance measure."""
    f32 = [c for c in data["cases"] if c["dtype"] == "float32" and c.get("source") == "op_db"]
    n = len(f32)
    c = Counter(x["status"] for x in f32)
    native = c["native_own"] + c["native_library"]
    return {
        "opinfos": n,
        "native": native,
        "native_own": c["native_own"],
        "native_library": c["native_library"],
        "fallback": c["fallback"],
        "wrong": c["wrong"],
        "error": c["error"],
        "skipped": c["skipped"],
        "native_pct": round(100.0 * native / n, 1) if n else 0.0,
        "own_share_pct": round(100.0 * c["native_own"] / native, 1) if native else 0.0,
        "wrong_all_dtypes": sum(1 for x in data["cases"] if x["status"] == "wrong"),
    }


def summary(data) -> dict:
    """The committed, diffable form: one status per (op, dtype)."""
    per_op: dict[str, dict[str, str]] = defaultdict(dict)
    for c in data["cases"]:
        per_op[c["op"]][c["dtype"]] = c["status"]
    meta = {k: data["meta"][k] for k in ("date", "git_commit", "torch", "max_samples",
                                          "seconds") if k in data["meta"]}
    return {
        "meta": meta,
        "headline_float32_op_db": headline(data),
        "counts": {d: dict(c) for d, c in counts_by_dtype(data["cases"]).items()},
        "cases": dict(sorted(per_op.items())),
    }


def console_summary(data) -> str:
    lines = [f"{'dtype':12s} " + " ".join(f"{s:>14s}" for s in STATUS_COLUMNS)]
    for d, c in counts_by_dtype(data["cases"]).items():
        lines.append(f"{d:12s} " + " ".join(f"{c[s]:14d}" for s in STATUS_COLUMNS))
    h = headline(data)
    if h["opinfos"]:
        lines.append(f"float32, op_db: {h['native']}/{h['opinfos']} native ({h['native_pct']}%), "
                     f"own lowering {h['own_share_pct']}% of native; wrong in any dtype: "
                     f"{h['wrong_all_dtypes']}")
    for c in data["cases"]:
        if c["status"] == "wrong":
            lines.append(f"WRONG {c['op']} {c['dtype']}: {c['detail'].get('message', '')[:200]}")
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fallback_ops(c) -> list[str]:
    fwd = set(c.get("fallback_forward") or {})
    bwd = set(c.get("fallback_backward") or {}) - fwd
    return sorted(fwd) + [f"{o} (backward)" for o in sorted(bwd)]


def _error_key(message: str) -> str:
    """A message with its specifics (dtypes, shapes, numbers, names) blanked."""
    import re

    m = re.sub(r"\{strides[^}]*\}", "", message)
    m = re.sub(r"\[[^\]]*\]", "[]", m)
    m = re.sub(r"\b(Float|BFloat|Half|Double|Int|UInt|Long|Short|Char|Byte|Bool|Complex"
               r"|ComplexFloat|ComplexDouble)\w*", "T", m)
    m = re.sub(r"\b(float|bfloat|int|uint|complex|bool)\d*\b", "T", m)
    m = re.sub(r"\d+(\.\d+)?", "N", m)
    m = re.sub(r"'[^']*'", "'...'", m)
    return m[:120]


def _dtypes_text(dtypes, data, op) -> str:
    declared = data.get("opinfos", {}).get(op, {}).get("dtypes", [])
    if declared and len(dtypes) == len(declared):
        return "all"
    return ", ".join(sorted(dtypes, key=_dtype_key))


def _repro(c) -> str:
    sample = c.get("detail", {}).get("sample")
    cmd = f"python -m tests.conformance.sweep --op '{c['op']}' --dtype {c['dtype']}"
    if sample is not None:
        cmd += f" --sample {sample}"
    return cmd


def markdown(data) -> str:
    meta, cases = data["meta"], data["cases"]
    h = headline(data)
    by_dtype = counts_by_dtype(cases)
    out: list[str] = []
    w = out.append
    w("# Op coverage: PyTorch's OpInfo database on `neuron`\n")
    w("Generated by `make conformance` (`python -m tests.conformance.sweep`) from "
      "`tests/conformance/results/op_coverage.json`; do not edit by hand. "
      "How it is measured: [the end of this page](#how-it-is-measured).\n")
    w(f"- Run: {meta.get('date', '?')}, commit `{meta.get('git_commit', '?')}`"
      f"{' (with uncommitted changes in csrc/ or python/)' if meta.get('git_dirty') else ''}, "
      f"torch {meta.get('torch', '?')}, {meta.get('machine', '?')}, "
      f"{meta.get('workers', '?')} workers, {meta.get('seconds', 0) / 60:.1f} min.")
    w(f"- Samples: the first {meta.get('max_samples') or 'all'} of each OpInfo's "
      "`sample_inputs` per dtype; per-case time limit "
      f"{meta.get('timeout_s', 0):.0f} s.")
    n_opinfos = len(data.get("opinfos", {}))
    sources = Counter(m.get("source") for m in data.get("opinfos", {}).values())
    w(f"- OpInfos: {n_opinfos} ({sources.get('op_db', 0)} from `op_db`, "
      f"{sources.get('foreach', 0)} `_foreach_*`, {sources.get('extra', 0)} of ours: "
      "`_fused_adamw_`, `_fused_adam_`, `_grouped_mm`); "
      f"{len(cases)} (op, dtype) cases.\n")

    w("## Headline (float32, op_db)\n")
    if h["opinfos"]:
        w(f"**{h['native']} of {h['opinfos']} op_db OpInfos ({h['native_pct']}%) pass "
          f"natively in float32**: {h['native_own']} through our own lowerings, "
          f"{h['native_library']} through a host library "
          f"(own-lowering share of native: {h['own_share_pct']}%). "
          f"{h['fallback']} pass through the CPU fallback, {h['wrong']} are wrong, "
          f"{h['error']} raise, {h['skipped']} were skipped. "
          f"Wrong results in any dtype: **{h['wrong_all_dtypes']}**.\n")

    w("## Counts per dtype\n")
    w("One row per dtype, one count per (OpInfo, dtype). float64 and complex128 are "
      "*narrowed*: the device stores them as float32 / complex64, so they are compared "
      "against the CPU computing on the same narrowed inputs (float32 tolerances).\n")
    w("| dtype | cases | " + " | ".join(STATUS_TITLES[s] for s in STATUS_COLUMNS)
      + " | native % | values not comparable (random / uninitialised) |")
    w("|---|---:|" + "---:|" * len(STATUS_COLUMNS) + "---:|---:|")
    for d, c in by_dtype.items():
        total = sum(c.values())
        countable = total - c["skipped"]
        native = c["native_own"] + c["native_library"]
        pct = f"{100.0 * native / countable:.1f}" if countable else "-"
        shape_only = sum(1 for x in cases if x["dtype"] == d and x.get("check", "values") not in
                         ("values", "values (random samples: shape/dtype)"))
        label = f"{d} (narrowed to {NARROWED[d]})" if d in NARROWED else d
        w(f"| {label} | {total} | " + " | ".join(str(c[s]) for s in STATUS_COLUMNS)
          + f" | {pct} | {shape_only} |")
    w("")
    fwd_only = [c for c in cases if c["status"] == "fallback" and not c.get("fallback_forward")]
    w(f"Of the fallback cases, {len(fwd_only)} run their forward natively and fall back only "
      "in the backward pass. Cases where neuron differs from the CPU kernel but is closer to "
      "a float64 computation (accepted, not wrong): "
      f"{sum(1 for c in cases if c.get('more_accurate'))}.\n")

    # Per family, float32.
    w("## Per family (float32)\n")
    fam_counts: dict[str, Counter] = defaultdict(Counter)
    for c in cases:
        if c["dtype"] == "float32":
            fam_counts[c.get("family", "other")][c["status"]] += 1
    w("| family | OpInfos | " + " | ".join(STATUS_TITLES[s] for s in STATUS_COLUMNS) + " |")
    w("|---|---:|" + "---:|" * len(STATUS_COLUMNS))
    for f in sorted(fam_counts, key=_family_key):
        c = fam_counts[f]
        w(f"| {f} | {sum(c.values())} | " + " | ".join(str(c[s]) for s in STATUS_COLUMNS) + " |")
    w("")

    # What to write next: the ATen ops behind the fallbacks.
    w("## What falls back most (kernel authors: start here)\n")
    w("ATen ops that ran through the CPU fallback, by the number of float32 OpInfos that "
      "needed them (forward or backward). A native kernel for the op at the top of this "
      "list moves the most OpInfos to native.\n")
    need: dict[str, set] = defaultdict(set)
    need_all: dict[str, set] = defaultdict(set)
    for c in cases:
        for o in list(c.get("fallback_forward") or {}) + list(c.get("fallback_backward") or {}):
            need_all[o].add(c["op"])
            if c["dtype"] == "float32":
                need[o].add(c["op"])
    ranked = sorted(need_all, key=lambda o: (-len(need.get(o, ())), -len(need_all[o]), o))
    w("| ATen op | float32 OpInfos | all-dtype OpInfos | e.g. |")
    w("|---|---:|---:|---|")
    for o in ranked[:60]:
        eg = ", ".join(sorted(need.get(o) or need_all[o])[:4])
        w(f"| `{o}` | {len(need.get(o, ()))} | {len(need_all[o])} | {_md_escape(eg)} |")
    if len(ranked) > 60:
        w(f"\n... and {len(ranked) - 60} more ATen ops (see the JSON).")
    w("")

    # Wrong.
    wrong = [c for c in cases if c["status"] == "wrong"]
    w(f"## Wrong results ({len(wrong)})\n")
    if not wrong:
        w("None.\n")
    else:
        w("Every entry is a bug. Reproduce one with the command shown.\n")
        for c in sorted(wrong, key=lambda c: (_family_key(c.get("family", "")), c["op"],
                                              _dtype_key(c["dtype"]))):
            d = c.get("detail", {})
            w(f"- **{c['op']}** {c['dtype']} ({d.get('phase', '?')}): "
              f"{_md_escape(d.get('message', ''))}  \n  sample: `{_md_escape(d.get('input', ''))}`"
              f"  \n  repro: `{_repro(c)}`")
        w("")

    # Errors, grouped by cause (the message with dtypes, shapes and numbers blanked).
    errors = [c for c in cases if c["status"] == "error"]
    w(f"## Errors ({len(errors)})\n")
    if not errors:
        w("None.\n")
    else:
        w("The op raised on neuron (or in its backward) where the CPU did not, or the case "
          "timed out or crashed its worker. Grouped by cause; the first message of a group "
          "is shown as it was. Full messages: the JSON.\n")
        groups: dict[tuple, list[dict]] = defaultdict(list)
        for c in errors:
            d = c.get("detail", {})
            groups[(d.get("phase", "?"), _error_key(d.get("message", "")))].append(c)
        w("| cases | phase | cause | OpInfos (dtypes) |")
        w("|---:|---|---|---|")
        for (phase, _), items in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            by_op: dict[str, list[str]] = defaultdict(list)
            for c in items:
                by_op[c["op"]].append(c["dtype"])
            ops = sorted(by_op, key=lambda o: (_family_key(items[0].get("family", "")), o))
            shown = "; ".join(f"{o} ({_dtypes_text(by_op[o], data, o)})" for o in ops[:25])
            if len(ops) > 25:
                shown += f"; and {len(ops) - 25} more"
            msg = items[0].get("detail", {}).get("message", "")[:240]
            w(f"| {len(items)} | {phase} | {_md_escape(msg)} | {_md_escape(shown)} |")
        w("")

    # Fallback list by family.
    w("## OpInfos still falling back, by family\n")
    w("An OpInfo is listed when it falls back in at least one dtype; the ATen ops are those "
      "the CPU fallback ran for it (union over its dtypes).\n")
    fb_by_op: dict[str, dict] = {}
    for c in cases:
        if c["status"] != "fallback":
            continue
        e = fb_by_op.setdefault(c["op"], {"family": c.get("family", "other"), "dtypes": [],
                                          "ops": set()})
        e["dtypes"].append(c["dtype"])
        e["ops"].update(_fallback_ops(c))
    for f in sorted({e["family"] for e in fb_by_op.values()}, key=_family_key):
        items = sorted((k, e) for k, e in fb_by_op.items() if e["family"] == f)
        w(f"### {f} ({len(items)})\n")
        w("| OpInfo | dtypes falling back | ATen ops run on the CPU |")
        w("|---|---|---|")
        for k, e in items:
            dts = sorted(e["dtypes"], key=_dtype_key)
            dts_text = "all" if len(dts) == len(data["opinfos"].get(k, {}).get("dtypes", [])) \
                else ", ".join(dts)
            ops = sorted(e["ops"])
            ops_text = ", ".join(f"`{o}`" for o in ops[:8]) + (" ..." if len(ops) > 8 else "")
            w(f"| {k} | {dts_text} | {ops_text} |")
        w("")

    # Skipped.
    skipped = [c for c in cases if c["status"] == "skipped"]
    w(f"## Skipped ({len(skipped)})\n")
    if skipped:
        reasons: dict[str, list[str]] = defaultdict(list)
        for c in skipped:
            reasons[c.get("detail", {}).get("message", "")[:160]].append(
                f"{c['op']} ({c['dtype']})")
        w("| reason | cases |")
        w("|---|---|")
        for r, items in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(items[:6]) + (f" and {len(items) - 6} more" if len(items) > 6 else "")
            w(f"| {_md_escape(r)} | {_md_escape(shown)} |")
        w("")
    no_cpu = [k for k, m in data.get("opinfos", {}).items() if not m.get("dtypes")]
    if no_cpu:
        w(f"OpInfos that declare no CPU dtype and so have no CPU reference (not counted): "
          f"{', '.join(sorted(no_cpu))}.\n")

    w(_METHOD)
    return "\n".join(out) + "\n"


_METHOD = """## How it is measured

The harness (`tests/conformance/`) follows PyTorch's own `TestCommon.test_compare_cpu`
(test/test_ops.py), in our code:

- **Cases.** Every OpInfo of `torch.testing._internal.common_methods_invocations.op_db`,
  the `_foreach_*` OpInfo databases, and our own OpInfos for `_fused_adamw_`,
  `_fused_adam_` and `torch._grouped_mm` (`opinfos.py`), times every dtype the OpInfo
  declares for the CPU (`op.supported_dtypes("cpu")`). FP8 dtypes run with
  `OPENNEURON_PLATFORM=trn3` (FP8 exists on that profile only).
- **Samples.** `op.sample_inputs("cpu", dtype, requires_grad=...)`, generated from a seed
  fixed by (op, dtype) so that every result can be re-run alone
  (`python -m tests.conformance.sweep --op NAME --dtype DTYPE --sample K`). Each sample is
  copied to neuron (every tensor in input, args and kwargs, recursively; tensors shared
  between arguments stay shared; `device="cpu"` arguments become `"neuron"`), the op runs
  on both devices, both results go through `sample.output_process_fn_grad`, and they are
  compared, as are the inputs afterwards (in-place effects).
- **Tolerances.** As test_compare_cpu: `atol = rtol = 1e-3`, raised by the OpInfo's
  `toleranceOverride` for that test where larger, and by torch.testing's default for the
  dtype where larger (bfloat16: rtol 1.6e-2). Integers and bool: exact. NaNs compare equal.
  When a floating-point result is outside the tolerance, the op is re-run on the CPU in
  float64. Each output tensor that differs from the CPU's passes if neuron's result is,
  element by element, within the tolerance of the float64 result or no further from it
  than the CPU kernel's; or, as PyTorch's reference tests judge it (test_ops.py,
  `_ref_test_helper`), if neuron's summed absolute error against float64 is no larger than
  the CPU kernel's and no element is further off than the CPU's worst element (plus atol).
  Example: the CPU's bfloat16 `add(alpha=...)` rounds `alpha` to bfloat16 first; neuron,
  like CUDA, does not.
- **Gradients.** For OpInfos that support autograd, in floating dtypes the OpInfo declares
  for backward: random cotangents (same values on both devices) for every differentiable
  output, `torch.autograd.grad` with respect to every input tensor that requires grad,
  compared like the forward results (with the same float64 rule). An output that requires
  grad on the CPU but not on neuron is *wrong* (autograd not connected).
- **Native or fallback.** The CPU fallback counts each op it runs
  (`openneuron.fallback_stats()`); the harness resets the counts before the op runs on
  neuron and reads them after the forward and after the backward. Any fallback call makes
  the case *fallback*, and the report names the ATen ops. A case with no fallback call ran
  on device memory through the runtime: *native*.
- **Native (own lowering) vs native (library).** The ATen ops that reached the device are
  recorded (a TorchDispatchMode that only watches); a native case that used an ATen op
  listed in `classify.LIBRARY_OPS` (or in `openneuron._C.library_ops()`, if the bridge
  exports one) is *native (library)*: its kernel hands the computation to a host library
  run as an external kernel inside the device program. The list is empty today.
- **float64 / complex128.** The device stores them as float32 / complex64 (with a
  one-time warning). We run those dtypes as their own rows, *narrowed*: the CPU reference
  computes on the same narrowed inputs, the device result must have the narrowed dtype,
  and float32 tolerances apply. They are not counted in the float32 headline.
- **Random ops** (RNG, dropout, rrelu, fractional max pool, the lowrank
  factorizations, multi-head attention with dropout): shape, dtype and device are checked,
  and a second run under the same `torch.manual_seed` must give the same values.
  `scaled_dot_product_attention` samples with `dropout_p > 0` likewise; its other samples
  are compared fully. **Uninitialised results** (`empty*`, `new_empty*`, `resize_`): shape
  and dtype only. Sort-like ops (`sort`, `topk`, `kthvalue`, `mode`, `median`, ...): values
  exactly; indices may differ among equal values if they point at the right values (not for
  `stable=True`).
- **Statuses.** A case is the worst of its samples: *wrong* (any difference beyond the
  tolerance — always a bug) > *error* (raised on neuron but not on the CPU; timed out; crashed
  its worker) > *fallback* > *native*. *Skipped*: no sample could run on the CPU.
- **Isolation.** Cases run in 2 spawned worker processes, one intra-op thread each, with a
  per-case time limit; a worker that dies or hangs is replaced and the case recorded as an
  error.
"""


def main(argv=None) -> int:
    argv = argv if argv is not None else sys.argv[1:]
    src = Path(argv[0]) if argv else HERE / "results" / "op_coverage.json"
    dst = Path(argv[1]) if len(argv) > 1 else HERE.parent.parent / "docs" / "op-coverage.md"
    data = json.loads(src.read_text())
    dst.write_text(markdown(data))
    print(console_summary(data))
    print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
