"""Turns the sweep's JSON into docs/op-coverage.md, a compact summary and a console table.

The page is the OpInfo report with the ModuleInfo section (`sweep --modules`) spliced in
between markers; each sweep rewrites its own part and keeps the other (write()).

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


def database(data) -> str:
    """"op_db" or "module_db": what the sweep ran."""
    return data["meta"].get("database", "op_db")


def headline(data) -> dict:
    """float32 over op_db (the issue's acceptance measure), or over module_db."""
    source = database(data)
    f32 = [c for c in data["cases"] if c["dtype"] == "float32" and c.get("source") == source]
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
        f"headline_float32_{database(data)}": headline(data),
        "counts": {d: dict(c) for d, c in counts_by_dtype(data["cases"]).items()},
        "cases": dict(sorted(per_op.items())),
    }


def console_summary(data) -> str:
    lines = [f"{'dtype':12s} " + " ".join(f"{s:>14s}" for s in STATUS_COLUMNS)]
    for d, c in counts_by_dtype(data["cases"]).items():
        lines.append(f"{d:12s} " + " ".join(f"{c[s]:14d}" for s in STATUS_COLUMNS))
    h = headline(data)
    if h["opinfos"]:
        lines.append(f"float32, {database(data)}: {h['native']}/{h['opinfos']} native "
                     f"({h['native_pct']}%), "
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
    modules = " --modules" if c.get("source") == "module_db" else ""
    cmd = f"python -m tests.conformance.sweep{modules} --op '{c['op']}' --dtype {c['dtype']}"
    if sample is not None:
        cmd += f" --sample {sample}"
    return cmd


def markdown(data) -> str:
    meta, cases = data["meta"], data["cases"]
    h = headline(data)
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
    out += _dtype_table(cases)
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
    out += _wrong_list(cases, "##")

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


def _dtype_table(cases) -> list[str]:
    """Counts per dtype (one per case), native share, cases whose values are not compared."""
    out = ["| dtype | cases | " + " | ".join(STATUS_TITLES[s] for s in STATUS_COLUMNS)
           + " | native % | values not comparable (random / uninitialised) |",
           "|---|---:|" + "---:|" * len(STATUS_COLUMNS) + "---:|---:|"]
    for d, c in counts_by_dtype(cases).items():
        total = sum(c.values())
        countable = total - c["skipped"]
        native = c["native_own"] + c["native_library"]
        pct = f"{100.0 * native / countable:.1f}" if countable else "-"
        shape_only = sum(1 for x in cases if x["dtype"] == d and x.get("check", "values") not in
                         ("values", "values (random samples: shape/dtype)"))
        label = f"{d} (narrowed to {NARROWED[d]})" if d in NARROWED else d
        out.append(f"| {label} | {total} | " + " | ".join(str(c[s]) for s in STATUS_COLUMNS)
                   + f" | {pct} | {shape_only} |")
    out.append("")
    return out


def _wrong_list(cases, level: str) -> list[str]:
    wrong = [c for c in cases if c["status"] == "wrong"]
    out = [f"{level} Wrong results ({len(wrong)})\n"]
    if not wrong:
        return out + ["None.\n"]
    out.append("Every entry is a bug. Reproduce one with the command shown.\n")
    for c in sorted(wrong, key=lambda c: (_family_key(c.get("family", "")), c["op"],
                                          _dtype_key(c["dtype"]))):
        d = c.get("detail", {})
        out.append(f"- **{c['op']}** {c['dtype']} ({d.get('phase', '?')}): "
                   f"{_md_escape(d.get('message', ''))}  \n  sample: "
                   f"`{_md_escape(d.get('input', ''))}`  \n  repro: `{_repro(c)}`")
    return out + [""]


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


# ---------------------------------------------------------------------------------------
# The ModuleInfo section (`sweep --modules`): one row per module.

MODULES_BEGIN = ("<!-- ModuleInfo section: written by "
                 "`python -m tests.conformance.sweep --modules` -->")
MODULES_END = "<!-- end of the ModuleInfo section -->"
_METHOD_HEADING = "## How it is measured"


def _module_cell(c) -> str:
    if c is None:
        return "-"
    return STATUS_TITLES[c["status"]]


def _module_notes(c, marks) -> str:
    """A row's notes: the ATen ops that fell back, the first error or wrong value, or the
    host library kernels used; and how PyTorch marks its own parity test for the module."""
    parts = []
    if c["status"] == "fallback":
        parts.append("CPU fallback: " + ", ".join(f"`{o}`" for o in _fallback_ops(c)))
    elif c["status"] in ("wrong", "error", "skipped"):
        d = c.get("detail", {})
        where = f"{c['dtype']}, sample {d['sample']} ({d.get('phase', '?')}): " if "sample" in d \
            else f"{c['dtype']}: "
        parts.append(where + _md_escape(d.get("message", ""))[:300])
    elif c.get("library_ops"):
        parts.append("library: " + ", ".join(f"`{o}`" for o in c["library_ops"][:4])
                     + (" ..." if len(c["library_ops"]) > 4 else ""))
    if marks:
        parts.append("PyTorch's test_cpu_gpu_parity: " + ", ".join(marks))
    return "; ".join(parts)


def module_markdown(data) -> str:
    """The ModuleInfo section of docs/op-coverage.md, between its markers."""
    meta, cases = data["meta"], data["cases"]
    infos = data.get("opinfos", {})
    h = headline(data)
    out: list[str] = [MODULES_BEGIN, ""]
    w = out.append
    w("## ModuleInfo: PyTorch's module_db on `neuron`\n")
    w("Generated by `python -m tests.conformance.sweep --modules` (part of `make conformance`) "
      "from `tests/conformance/results/module_coverage.json`. Every ModuleInfo of "
      "`torch.testing._internal.common_modules.module_db`, in every dtype it declares for "
      "the CPU, as PyTorch's `TestModule.test_cpu_gpu_parity` runs it (lazy modules too, "
      "which that test leaves out): for each input of its "
      "`module_inputs_func` (training=True and training=False) the module is built on the "
      "CPU, its parameters and buffers are copied to neuron, and the forward outputs, the "
      "buffers it updates (running statistics) and the gradients of the inputs and of the "
      "parameters are compared with the CPU's by the OpInfo harness's rules "
      "(`tests/conformance/modules.py`; tolerances: the parity test's overrides, else as "
      "below).\n")
    w(f"- Run: {meta.get('date', '?')}, commit `{meta.get('git_commit', '?')}`"
      f"{' (with uncommitted changes in csrc/ or python/)' if meta.get('git_dirty') else ''}, "
      f"torch {meta.get('torch', '?')}, {meta.get('workers', '?')} workers, "
      f"{meta.get('seconds', 0) / 60:.1f} min; samples: "
      f"{('the first ' + str(meta['max_samples'])) if meta.get('max_samples') else 'all'} "
      "of each module's inputs per dtype.")
    w(f"- ModuleInfos: {len(infos)}; {len(cases)} (module, dtype) cases, "
      f"{sum(c.get('samples', 0) for c in cases)} samples checked.\n")
    if h["opinfos"]:
        w(f"**{h['native']} of {h['opinfos']} ModuleInfos ({h['native_pct']}%) pass natively "
          f"in float32** (forward and backward): {h['native_own']} through our own "
          f"lowerings, {h['native_library']} using a host library kernel. {h['fallback']} "
          f"pass through the CPU fallback, {h['wrong']} are wrong, {h['error']} raise, "
          f"{h['skipped']} were skipped. Wrong results in any dtype: "
          f"**{h['wrong_all_dtypes']}**.\n")
    out += _dtype_table(cases)

    w("### Per module\n")
    by_mod: dict[str, dict[str, dict]] = defaultdict(dict)
    for c in cases:
        by_mod[c["op"]][c["dtype"]] = c
    w("| module | float32 | float64 (narrowed) | other dtypes | float32 samples (grads) | notes |")
    w("|---|---|---|---|---:|---|")
    for name in sorted(by_mod):
        per = by_mod[name]
        others = ", ".join(f"{d}: {_module_cell(per[d])}" for d in
                           sorted(set(per) - {"float32", "float64"}, key=_dtype_key))
        f32 = per.get("float32")
        counts = f"{f32['samples']} ({f32.get('grad_samples', 0)})" if f32 else "-"
        worst = max(per.values(), key=lambda c: _SEVERITY[c["status"]])
        w(f"| {name} | {_module_cell(f32)} | {_module_cell(per.get('float64'))} | "
          f"{others or '-'} | {counts} | "
          f"{_module_notes(worst, infos.get(name, {}).get('pytorch_parity'))} |")
    w("")
    out += _wrong_list(cases, "###")
    errors = [c for c in cases if c["status"] == "error"]
    w(f"### Errors ({len(errors)})\n")
    w("None.\n" if not errors else "Each with the first failing sample and its repro.\n")
    for c in sorted(errors, key=lambda c: (c["op"], _dtype_key(c["dtype"]))):
        d = c.get("detail", {})
        w(f"- **{c['op']}** {c['dtype']} ({d.get('phase', '?')}): "
          f"`{_md_escape(d.get('message', ''))}`  \n  sample: `{_md_escape(d.get('input', ''))}`"
          f"  \n  repro: `{_repro(c)}`")
    if errors:
        w("")
    w(MODULES_END)
    return "\n".join(out) + "\n"


# The status a module row explains first.
_SEVERITY = {"wrong": 5, "error": 4, "fallback": 3, "skipped": 2, "native_library": 1,
             "native_own": 0}


def splice(page: str, section: str) -> str:
    """page with its ModuleInfo section replaced by `section` (before "How it is measured",
    or at the end)."""
    if MODULES_BEGIN in page and MODULES_END in page:
        head, rest = page.split(MODULES_BEGIN, 1)
        page = head.rstrip("\n") + "\n\n" + rest.split(MODULES_END, 1)[1].lstrip("\n")
    if not section:
        return page
    if _METHOD_HEADING in page:
        head, tail = page.split(_METHOD_HEADING, 1)
        return head + section + "\n" + _METHOD_HEADING + tail
    return (page.rstrip("\n") + "\n\n" if page else "") + section


def _section(page: str) -> str:
    if MODULES_BEGIN not in page or MODULES_END not in page:
        return ""
    inner = page.split(MODULES_BEGIN, 1)[1].split(MODULES_END, 1)[0]
    return MODULES_BEGIN + inner + MODULES_END + "\n"


def write(path: Path, data) -> None:
    """Writes data's part of the page at `path` and keeps the other part: an OpInfo sweep
    keeps the ModuleInfo section, a ModuleInfo sweep keeps the OpInfo report."""
    old = path.read_text() if path.exists() else ""
    if database(data) == "module_db":
        page, section = old, module_markdown(data)
    else:
        page, section = markdown(data), _section(old)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(splice(page, section))


def main(argv=None) -> int:
    """Re-renders from the JSON: [results.json] [out.md]; without arguments, both parts from
    results/op_coverage.json and results/module_coverage.json, where present."""
    argv = argv if argv is not None else sys.argv[1:]
    dst = Path(argv[1]) if len(argv) > 1 else HERE.parent.parent / "docs" / "op-coverage.md"
    sources = [Path(argv[0])] if argv else [
        p for p in (HERE / "results" / "op_coverage.json",
                    HERE / "results" / "module_coverage.json") if p.exists()]
    if not sources:
        print("no results JSON: run the sweep first", file=sys.stderr)
        return 2
    for src in sources:
        data = json.loads(src.read_text())
        write(dst, data)
        print(console_summary(data))
    print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
