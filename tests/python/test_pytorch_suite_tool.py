"""tools/pytorch_suite.py's pure logic: the CPU twin of a test id, the classification of a
neuron failure, reading the plugin's records, choosing files. No subprocesses."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "tools" / "pytorch_suite.py"
_spec = importlib.util.spec_from_file_location("pytorch_suite", _PATH)
suite = importlib.util.module_from_spec(_spec)
sys.modules["pytorch_suite"] = suite  # dataclasses look their module up there
_spec.loader.exec_module(suite)


@pytest.mark.parametrize("neuron, cpu", [
    ("test_view_ops.py::TestViewOpsPRIVATEUSE1::test_flip_neuron_float32",
     "test_view_ops.py::TestViewOpsCPU::test_flip_cpu_float32"),
    ("test_torch.py::TestTorchDeviceTypeNEURON::test_dim_order_neuron",
     "test_torch.py::TestTorchDeviceTypeCPU::test_dim_order_cpu"),
    # OpInfo tests: the op name comes before the device, the dtype after it.
    ("test_binary_ufuncs.py::TestBinaryUfuncsPRIVATEUSE1::test_contig_vs_every_other_add_neuron_complex64",
     "test_binary_ufuncs.py::TestBinaryUfuncsCPU::test_contig_vs_every_other_add_cpu_complex64"),
    # Two dtypes; only the device part changes, and only the last one.
    ("nn/test_embedding.py::TestEmbeddingNNDeviceTypePRIVATEUSE1::test_neuron_bag_neuron_int32_float32",
     "nn/test_embedding.py::TestEmbeddingNNDeviceTypeCPU::test_neuron_bag_cpu_int32_float32"),
    ("test_x.py::TestXPRIVATEUSE1::test_y_privateuse1", "test_x.py::TestXCPU::test_y_cpu"),
    # A file that failed to collect is its own twin; a device-less test keeps its id.
    ("test_nn.py", "test_nn.py"),
    ("test_nn.py::TestNN::test_neuronal_thing", "test_nn.py::TestNN::test_neuronal_thing"),
])
def test_twin_id(neuron, cpu):
    assert suite.twin_id(neuron) == cpu


def test_classify():
    plain = "test_a.py::TestAPRIVATEUSE1::test_add_neuron_float32"
    wide = "test_a.py::TestAPRIVATEUSE1::test_add_neuron_float64"
    assert suite.classify(plain, "AssertionError: not close", "passed") == "neuron-only"
    assert suite.classify(plain, "x", "xpass") == "neuron-only"
    assert suite.classify(wide, "AssertionError: not close", "passed") == "float64-design"
    assert suite.classify(plain, "expected scalar type Double but found Float", "passed") == "float64-design"
    assert suite.classify(plain, "dtype=torch.complex128", "passed") == "float64-design"
    # float64 inside the test, named by neither the id nor the message: the table says why.
    assert suite.classify(plain, "GradcheckError: Jacobian mismatch", "passed") == "float64-design"
    assert suite.explained(plain, "GradcheckError: Jacobian mismatch", suite.FLOAT64_INSIDE)
    assert suite.explained(plain, "not close", suite.FLOAT64_INSIDE) is None
    for cpu in ("failed", "error", "xfail"):
        assert suite.classify(wide, "x", cpu) == "fails-on-cpu-too"
    for cpu in (None, "skipped"):
        assert suite.classify(plain, "x", cpu) == "no-cpu-twin"


def test_double_backward_is_not_float64():
    assert not suite.mentions_float64("TestFoo::test_conv_double_backward_neuron_float32")
    assert suite.mentions_float64("torch.double")
    assert suite.mentions_float64("ComplexDouble")


def test_reason_groups_alike_messages():
    a = suite.reason("IndexError: index 5 is out of bounds for size 3\nmore")
    b = suite.reason("IndexError: index 12 is out of bounds for size 4")
    assert a == b == "IndexError: index N is out of bounds for size N"
    assert suite.reason("") == "(no message)"


def test_read_records_keeps_the_worst_and_the_running_test(tmp_path):
    lines = [
        {"event": "selected", "nodeids": ["f.py::A::a", "f.py::A::b"]},
        {"event": "start", "nodeid": "f.py::A::a"},
        {"nodeid": "f.py::A::a", "outcome": "failed", "msg": "subtest"},
        {"nodeid": "f.py::A::a", "outcome": "passed", "msg": ""},
        {"event": "start", "nodeid": "f.py::A::b"},
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"nodeid": "f.py::A::b", "outc')
    outcomes, started, selected = suite.read_records(path)
    assert outcomes["f.py::A::a"]["outcome"] == "failed"
    assert selected == ["f.py::A::a", "f.py::A::b"]
    assert suite.unfinished(started, outcomes) == "f.py::A::b"
    assert suite.read_records(tmp_path / "none.jsonl") == ({}, [], None)


def test_select_files():
    assert [f.name for f in suite.select_files(None)] == [f.name for f in suite.FILES]
    chosen = suite.select_files(["shape_ops", "test_scatter_gather_ops", "nn/test_dropout", "test_view_ops.py"])
    assert [f.name for f in chosen] == ["shape_ops", "scatter_gather", "nn_dropout", "view_ops"]
    with pytest.raises(SystemExit):
        suite.select_files(["no_such_file"])
