#!/usr/bin/env python3
"""Keeps the C++ layering of csrc/ (docs/architecture.md, "Layers"): each folder includes
only from the layers above it, only csrc/torch includes torch, and files stay small.

    runtime   (top: plain C++, includes no other layer)
    kernels   may include runtime
    compiler  may include runtime, kernels
    collectives may include runtime, kernels, compiler (it uses runtime and kernels)
    torch     may include runtime, compiler, collectives; not kernels (it reaches the engines through
              the compiler); the only C++ that includes torch/ATen/c10/pybind11/Python.h

Rules (each violation is printed as `path:line: rule: message`, exit status 1):
  torch-headers   only files under csrc/torch/ include torch, ATen, c10, pybind11 or
                  Python.h headers (tests/cpp and tests/fuzz are checked too: they run
                  without torch)
  torch-kernels   csrc/torch includes no kernels header (openneuron/kernels/..., kernels/...)
  layer-order     a folder includes nothing from a layer below it
  file-length     no file under csrc/ is longer than MAX_LINES lines, except those in
                  LENGTH_EXCEPTIONS, each with its reason; an exception no longer needed
                  (file gone or short enough) is reported too

Plain Python 3, standard library only: `python3 tools/check_layering.py [--root DIR]`.
"""

import argparse
import os
import re
import sys

MAX_LINES = 900

# path relative to the root -> why it may be longer than MAX_LINES
LENGTH_EXCEPTIONS = {}

# From the top of the stack down; a folder may include its own layer and those before it.
LAYERS = ["runtime", "kernels", "compiler", "collectives", "torch"]
# Which layers each layer must not include, beyond the order (csrc/torch skips kernels).
FORBIDDEN_EXTRA = {"torch": {"kernels"}}

SOURCE_EXTENSIONS = (".h", ".hpp", ".hh", ".c", ".cc", ".cpp", ".cxx", ".cu", ".inc", ".ipp")
TORCH_HEADER = re.compile(r"^(torch|ATen|c10|caffe2|pybind11)/|^Python\.h$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


class Violation:
    def __init__(self, path, line, rule, message):
        self.path, self.line, self.rule, self.message = path, line, rule, message

    def __str__(self):
        return f"{self.path}:{self.line}: {self.rule}: {self.message}"


def layer_of(relpath):
    """The layer a file under csrc/ belongs to (its first folder), or None."""
    parts = relpath.split("/")
    if len(parts) >= 3 and parts[0] == "csrc" and parts[1] in LAYERS:
        return parts[1]
    return None


def included_layer(header, includer_rel, root):
    """The layer a project header belongs to, or None for a system or third-party header.

    Public headers are named from their include folder (openneuron/runtime.h,
    openneuron/kernels/..., openneuron/compiler/...); private ones relative to the
    including file (internal.h, ../kernels/internal.h) or from csrc/ (kernels/internal.h)."""
    if header == "openneuron/runtime.h" or header.startswith("openneuron/runtime/"):
        return "runtime"
    m = re.match(r"^openneuron/(\w+)/", header)
    if m and m.group(1) in LAYERS:
        return m.group(1)
    beside = os.path.normpath(os.path.join(os.path.dirname(includer_rel), header)).replace(os.sep, "/")
    if header.startswith("..") or os.path.isfile(os.path.join(root, beside)):
        return layer_of(beside)
    first = header.split("/")[0]
    if "/" in header and first in LAYERS:
        return first
    return None


def includes(text):
    """(line number, delimiter, header) of every #include outside block comments."""
    in_comment = False
    for number, line in enumerate(text.splitlines(), 1):
        code = line
        if in_comment:
            end = code.find("*/")
            if end < 0:
                continue
            code = code[end + 2:]
            in_comment = False
        code = re.sub(r"/\*.*?\*/", "", code)
        start = code.find("/*")
        if start >= 0:
            code, in_comment = code[:start], True
        m = INCLUDE.match(code)
        if m:
            yield number, m.group(1), m.group(2)


def source_files(root, top):
    base = os.path.join(root, top)
    for folder, dirs, files in os.walk(base):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            yield os.path.relpath(path, root).replace(os.sep, "/"), path


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def line_count(text):
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def include_violations(rel, text, root):
    layer = layer_of(rel)
    for number, _, header in includes(text):
        if TORCH_HEADER.search(header):
            if layer != "torch":
                yield Violation(rel, number, "torch-headers",
                                f"includes <{header}>: only csrc/torch/ may include torch, ATen, c10, "
                                f"pybind11 or Python.h headers")
            continue
        target = included_layer(header, rel, root) if layer else None
        if target is None or target == layer:
            continue
        if target in FORBIDDEN_EXTRA.get(layer, ()):
            yield Violation(rel, number, "torch-kernels",
                            f'includes "{header}": csrc/{layer} reaches csrc/{target} only through '
                            f"the compiler")
        elif LAYERS.index(target) > LAYERS.index(layer):
            above = ", ".join(f"csrc/{name}" for name in LAYERS[:LAYERS.index(layer)]) or "no other layer"
            yield Violation(rel, number, "layer-order",
                            f'includes "{header}": csrc/{target} is below csrc/{layer}, which may '
                            f"include {above}")


def check(root, exceptions=None, max_lines=MAX_LINES):
    """Every violation under root (the repository), in path order."""
    exceptions = LENGTH_EXCEPTIONS if exceptions is None else exceptions
    violations = []
    lengths = {}
    for top in ("csrc", "tests/cpp", "tests/fuzz"):
        for rel, path in source_files(root, top):
            text = read(path)
            if top == "csrc":
                lengths[rel] = line_count(text)
                if lengths[rel] > max_lines and rel not in exceptions:
                    violations.append(Violation(
                        rel, max_lines + 1, "file-length",
                        f"{lengths[rel]} lines, over the limit of {max_lines}: split it by what it "
                        f"holds (or list it with a reason in LENGTH_EXCEPTIONS, tools/check_layering.py)"))
            if rel.endswith(SOURCE_EXTENSIONS):
                violations.extend(include_violations(rel, text, root))
    for rel, reason in sorted(exceptions.items()):
        if not isinstance(reason, str) or not reason.strip():
            problem = "is listed in LENGTH_EXCEPTIONS without a reason"
        elif rel not in lengths:
            problem = "is listed in LENGTH_EXCEPTIONS but does not exist"
        elif lengths[rel] <= max_lines:
            problem = (f"is listed in LENGTH_EXCEPTIONS but has {lengths[rel]} lines (limit {max_lines}): "
                       f"drop it from the list")
        else:
            continue
        violations.append(Violation(rel, 1, "file-length", problem))
    violations.sort(key=lambda v: (v.path, v.line, v.rule))
    return violations


def main(argv=None):
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=default_root, help="the repository (default: this script's)")
    args = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(args.root, "csrc")):
        print(f"check_layering: no csrc/ under {args.root}", file=sys.stderr)
        return 2
    violations = check(args.root)
    for v in violations:
        print(v)
    if violations:
        print(f"check_layering: {len(violations)} violation(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
