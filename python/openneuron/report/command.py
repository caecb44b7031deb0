"""`openneuron report [--html FILE] [--json FILE] SCRIPT [ARGS...]`: runs SCRIPT on
neuron, then prints the report and passes on the script's exit status.

The report's own options may come before SCRIPT or after it (`report train.py --json
out.json`); everything after SCRIPT that is not one of them goes to the script, and
everything after a `--` does, so `report train.py -- --json x` gives the script
`--json x`.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from .collect import DEFAULT_HISTORY_ENTRIES

# name -> (type, help): the options that take a value; there are no flags.
OPTIONS = {
    "--html": (Path, "also write one self-contained HTML page with plots"),
    "--json": (Path, "also write the report as JSON, for machines"),
    "--history-entries": (int, "allocation events kept for the top allocation sites "
                          f"(default {DEFAULT_HISTORY_ENTRIES}; 0: no memory history)"),
}


def parser() -> argparse.ArgumentParser:
    """For --help and errors; split_argv does the parsing (argparse drops a `--`)."""
    ap = argparse.ArgumentParser(
        prog="openneuron report",
        description="Run a PyTorch script unchanged on neuron and report CPU fallbacks, host "
        "library ops, float64 downcasts, compilations and recompilations, graph breaks, "
        "memory and device time at its exit.",
        epilog="Report options may also follow SCRIPT; arguments after `--` all go to SCRIPT.")
    for name, (kind, help_text) in OPTIONS.items():
        ap.add_argument(name, type=kind, metavar="N" if kind is int else "FILE", help=help_text)
    ap.add_argument("script", help="the Python script to run")
    ap.add_argument("args", nargs="*", help="the script's arguments")
    return ap


def split_argv(argv: list[str]) -> tuple[dict, str, list[str]]:
    """(report options, script, script arguments)."""
    options: dict = {name: None for name in OPTIONS}
    script, script_args = None, []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if script is not None and arg == "--":
            script_args += argv[i + 1:]
            break
        name, eq, value = arg.partition("=")
        if name in OPTIONS:
            if not eq:
                if i + 1 >= len(argv):
                    parser().error(f"{name} needs a value")
                value, i = argv[i + 1], i + 1
            try:
                options[name] = OPTIONS[name][0](value)
            except ValueError:
                parser().error(f"{name}: not a valid value: {value!r}")
        elif script is None:
            if arg in ("-h", "--help"):
                parser().print_help()
                sys.exit(0)
            if arg.startswith("-") and arg != "-":
                parser().error(f"unknown option {arg}")
            script = arg
        else:
            script_args.append(arg)
        i += 1
    if script is None:
        parser().error("the script to run is missing")
    return options, script, script_args


def main(argv: list[str] | None = None) -> int:
    options, script, script_args = split_argv(sys.argv[1:] if argv is None else argv)
    if not Path(script).is_file():
        print(f"openneuron report: no such script: {script}", file=sys.stderr)
        return 2
    import openneuron

    if not openneuron.is_loaded():
        print(f"openneuron report: the neuron device is not available: {openneuron.load_error()}",
              file=sys.stderr)
        return 2
    from . import build, collect, render_html, render_text, run

    entries = options["--history-entries"]
    collector = collect.Collector(DEFAULT_HISTORY_ENTRIES if entries is None else entries)
    collector.start()
    status, error = run.run_script(script, script_args)
    try:
        doc = build.build(collector.stop(), str(Path(script).resolve()), script_args,
                          status, error)
        out = sys.stdout if sys.stdout and not sys.stdout.closed else sys.__stdout__
        out.write(render_text.render(doc))
        out.flush()
        if options["--json"]:
            options["--json"].write_text(json.dumps(doc, indent=1) + "\n")
        if options["--html"]:
            options["--html"].write_text(render_html.render(doc))
    except Exception:  # a broken report must not hide how the script ended
        traceback.print_exc()
        print("openneuron report: could not write the report", file=sys.stderr)
        return status or 2
    return status
