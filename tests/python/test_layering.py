"""tools/check_layering.py (run by `make lint`) on small trees: each rule catches its
violation and a clean tree passes, so the lint cannot silently pass everything."""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "tools" / "check_layering.py"
_spec = importlib.util.spec_from_file_location("check_layering", SCRIPT)
lint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lint)

# A tree shaped like csrc/ that keeps every rule.
CLEAN = {
    "csrc/runtime/include/openneuron/runtime.h": "#pragma once\n#include <stddef.h>\n",
    "csrc/runtime/stream.cpp": '#include <pthread.h>\n#include "stream.h"\n#include "openneuron/runtime.h"\n',
    "csrc/runtime/stream.h": '#include "openneuron/runtime.h"\n',
    "csrc/kernels/include/openneuron/kernels/kernels.h": '#include "openneuron/runtime.h"\n',
    "csrc/kernels/internal.h": '#include "openneuron/kernels/kernels.h"\n',
    "csrc/kernels/gemm.cpp": '#include <dnnl.h>\n#include "internal.h"\n#include "openneuron/runtime.h"\n',
    "csrc/compiler/include/openneuron/compiler/graph.h": '#include "openneuron/kernels/kernels.h"\n',
    "csrc/compiler/lowering.h": '#include "openneuron/kernels/kernels.h"\n#include "../kernels/internal.h"\n',
    "csrc/compiler/lower_mm.cpp": '#include "lowering.h"\n#include "openneuron/runtime.h"\n',
    "csrc/torch/bridge.h": "#include <ATen/core/Tensor.h>\n#include <c10/core/Device.h>\n",
    "csrc/torch/ops_mm.cpp": ('#include <ATen/ATen.h>\n#include <torch/library.h>\n#include <pybind11/pybind11.h>\n'
                              '#include <Python.h>\n#include "bridge.h"\n#include "openneuron/compiler/graph.h"\n'
                              '#include "openneuron/runtime.h"\n'),
    "csrc/torch/CMakeLists.txt": "add_library(x ops_mm.cpp)\n",
    "tests/cpp/test_stream.cpp": '#include <gtest/gtest.h>\n#include "openneuron/runtime.h"\n',
}


def make_tree(root, extra=None):
    for rel, text in {**CLEAN, **(extra or {})}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def found(root, **kw):
    return [(v.path, v.line, v.rule) for v in lint.check(str(root), **kw)]


def test_a_clean_tree_passes(tmp_path):
    root = make_tree(tmp_path)
    assert found(root, exceptions={}) == []
    run = subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr


# (rule, file, include added to its clean text)
VIOLATIONS = [
    # only csrc/torch includes torch, ATen, c10, pybind11, Python.h (tests/cpp runs without torch)
    ("torch-headers", "csrc/kernels/gemm.cpp", "<ATen/ATen.h>"),
    ("torch-headers", "csrc/runtime/stream.h", "<c10/util/Exception.h>"),
    ("torch-headers", "csrc/compiler/lower_mm.cpp", "<torch/library.h>"),
    ("torch-headers", "csrc/compiler/lowering.h", "<pybind11/pybind11.h>"),
    ("torch-headers", "csrc/kernels/internal.h", "<Python.h>"),
    ("torch-headers", "tests/cpp/test_stream.cpp", '"ATen/core/Tensor.h"'),
    # csrc/torch reaches the kernels only through the compiler
    ("torch-kernels", "csrc/torch/ops_mm.cpp", '"openneuron/kernels/kernels.h"'),
    ("torch-kernels", "csrc/torch/ops_mm.cpp", "<openneuron/kernels/params.h>"),
    ("torch-kernels", "csrc/torch/ops_mm.cpp", '"kernels/internal.h"'),
    ("torch-kernels", "csrc/torch/bridge.h", '"../kernels/internal.h"'),
    # runtime, then kernels, then compiler, then torch: nothing from a layer below
    ("layer-order", "csrc/runtime/stream.cpp", '"openneuron/kernels/kernels.h"'),
    ("layer-order", "csrc/runtime/stream.cpp", '"openneuron/compiler/graph.h"'),
    ("layer-order", "csrc/runtime/stream.h", '"../kernels/internal.h"'),
    ("layer-order", "csrc/kernels/gemm.cpp", '"openneuron/compiler/graph.h"'),
    ("layer-order", "csrc/kernels/internal.h", '"../torch/bridge.h"'),
    ("layer-order", "csrc/compiler/lower_mm.cpp", '"../torch/bridge.h"'),
]


@pytest.mark.parametrize("rule,rel,header", VIOLATIONS)
def test_each_include_rule_catches_its_violation(tmp_path, rule, rel, header):
    root = make_tree(tmp_path, {rel: CLEAN[rel] + "#include " + header + "\n"})
    assert found(root, exceptions={}) == [(rel, CLEAN[rel].count("\n") + 1, rule)]


def test_commented_out_includes_are_not_counted(tmp_path):
    text = ('// #include <ATen/ATen.h>\n/* #include "openneuron/compiler/graph.h"\n'
            '#include <torch/library.h> */\n#include "internal.h" /* <c10/x.h> */\n')
    root = make_tree(tmp_path, {"csrc/kernels/unary.cpp": text})
    assert found(root, exceptions={}) == []
    root = make_tree(tmp_path, {"csrc/kernels/unary.cpp": text + "/* one */ #include <c10/x.h>\n"})
    assert found(root, exceptions={}) == [("csrc/kernels/unary.cpp", 5, "torch-headers")]


def test_file_length_limit_and_its_exceptions(tmp_path):
    long_file = "csrc/torch/ops_big.cpp"
    root = make_tree(tmp_path, {long_file: "int x;\n" * 901, "csrc/torch/ops_ok.cpp": "int y;\n" * 900,
                                "csrc/kernels/CMakeLists.txt": "# x\n" * 950})
    assert found(root, exceptions={}) == [("csrc/kernels/CMakeLists.txt", 901, "file-length"),
                                          (long_file, 901, "file-length")]
    both = {long_file: "one registration table", "csrc/kernels/CMakeLists.txt": "generated"}
    assert found(root, exceptions=both) == []
    # an exception needs a reason, a file that exists and is still too long
    assert found(root, exceptions={**both, long_file: " "}) == [(long_file, 1, "file-length")]
    assert found(root, exceptions={**both, "csrc/torch/ops_ok.cpp": "x"}) == [
        ("csrc/torch/ops_ok.cpp", 1, "file-length")]
    assert found(root, exceptions={**both, "csrc/torch/gone.cpp": "x"}) == [
        ("csrc/torch/gone.cpp", 1, "file-length")]
    assert found(root, exceptions={}, max_lines=2000) == []


def test_the_command_prints_path_line_rule_message_and_fails(tmp_path):
    root = make_tree(tmp_path, {"csrc/kernels/gemm.cpp": '#include "openneuron/compiler/graph.h"\n',
                                "csrc/torch/ops_rng.cpp": '#include "openneuron/kernels/kernels.h"\n'})
    run = subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert [line.split(": ")[:2] for line in lines] == [["csrc/kernels/gemm.cpp:1", "layer-order"],
                                                        ["csrc/torch/ops_rng.cpp:1", "torch-kernels"]]
    assert all(len(line.split(": ", 2)[2]) > 10 for line in lines)


def test_every_listed_exception_has_a_reason():
    for rel, reason in lint.LENGTH_EXCEPTIONS.items():
        assert rel.startswith("csrc/") and isinstance(reason, str) and reason.strip(), rel
