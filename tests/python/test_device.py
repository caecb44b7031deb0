"""The device itself: autoload, torch.neuron, torch.accelerator, guards, errors."""

import warnings

import pytest
import torch

from conftest import run_python


def test_import_torch_alone_gives_the_device():
    r = run_python("import torch; x = torch.ones(3, device='neuron'); print(x + x); "
                   "print(torch.accelerator.current_accelerator())")
    assert r.returncode == 0, r.stderr
    assert "tensor([2., 2., 2.], device='neuron:0')" in r.stdout
    assert r.stdout.strip().endswith("neuron")


def test_autoload_can_be_disabled_and_explicit_import_works():
    code = ("import torch; print(hasattr(torch, 'neuron')); import openneuron; "
            "print(torch.ones(2, device='neuron').sum().item())")
    r = run_python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "2.0"]


def test_other_privateuse1_backend_is_reported_not_crashing():
    code = ("import torch; torch.utils.rename_privateuse1_backend('other'); import openneuron; "
            "print(openneuron.is_loaded()); print(openneuron.load_error())")
    r = run_python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "False"
    assert "another PrivateUse1 backend ('other')" in r.stdout


def test_torch_neuron_module_basics(neuron):
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 2
    assert torch.neuron.current_device() == 0
    props = torch.neuron.get_device_properties(0)
    assert props.platform == "trn2"
    assert props.total_memory > 0
    assert "trn2" in torch.neuron.get_device_name()
    assert torch.neuron.is_bf16_supported()
    assert torch.bfloat16 in torch.neuron.get_amp_supported_dtype()
    torch.ones(1, device=neuron)
    assert torch.neuron.is_initialized()


def test_accelerator_api(neuron):
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == "neuron"
    assert torch.accelerator.device_count() == 2
    x = torch.ones(4, device=neuron)
    torch.accelerator.synchronize()
    assert torch.accelerator.memory_allocated(0) >= x.nbytes


def test_tensor_and_module_methods(neuron):
    t = torch.arange(4.0)
    n = t.neuron()
    assert n.is_neuron and n.device == torch.device("neuron:0")
    m = torch.nn.Linear(2, 2).neuron()
    assert m.weight.device.type == "neuron"
    assert t.to("neuron:1").device.index == 1


def test_device_context_and_set_device(neuron):
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
        assert torch.empty(1, device="neuron").device.index == 1
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(1)
    try:
        assert torch.ones(1, device="neuron").device.index == 1
    finally:
        torch.neuron.set_device(0)


def test_device_index_out_of_range_lists_cores(neuron):
    with pytest.raises(IndexError, match=r"out of range: 2 cores are available \(neuron:0..neuron:1\)"):
        torch.ones(1, device="neuron:5")
    with pytest.raises(IndexError, match="2 cores are available"):
        torch.neuron.set_device(7)
    assert torch.ones(1, device="neuron").sum().item() == 1.0  # the process carries on


def test_mixing_devices_raises_pytorch_device_error(neuron):
    a = torch.ones(3, device="neuron:0")
    b = torch.ones(3, device="neuron:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + torch.ones(3)
    # A 0-dim CPU tensor takes part as a scalar, as with CUDA.
    assert torch.equal((a * torch.tensor(2.0)).cpu(), torch.full((3,), 2.0))


def test_printing_shows_values_and_device(neuron):
    x = torch.tensor([[1.5, -2.0], [3.0, 4.25]], device=neuron)
    s = str(x)
    assert "1.5000" in s and "4.2500" in s and "device='neuron:0'" in s


def test_float64_is_narrowed_with_one_warning(neuron):
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        x = torch.tensor([1.0, 2.0], dtype=torch.float64).to(neuron)
        y = torch.zeros(2, dtype=torch.float64, device=neuron)
    assert x.dtype == torch.float32 and y.dtype == torch.float32
    assert torch.equal(x.cpu(), torch.tensor([1.0, 2.0]))
    c = torch.tensor([1 + 2j], dtype=torch.complex128).to(neuron)
    assert c.dtype == torch.complex64


def test_unknown_platform_lists_valid_ones():
    r = run_python("import torch; torch.ones(1, device='neuron')", OPENNEURON_PLATFORM="trn9")
    assert r.returncode != 0
    assert "trn2" in r.stderr and "trn3" in r.stderr and "trn9" in r.stderr


def test_trn3_platform_and_core_count():
    code = ("import torch; p = torch.neuron.get_device_properties(0); "
            "print(torch.neuron.device_count(), p.platform, p.supports_fp8)")
    r = run_python(code, OPENNEURON_PLATFORM="trn3", OPENNEURON_NUM_CORES="4")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["4", "trn3", "True"]


def test_visible_cores_restrict_devices():
    code = ("import torch; print(torch.neuron.device_count(), "
            "torch.neuron.get_device_properties(0).physical_index)")
    r = run_python(code, OPENNEURON_NUM_CORES="4", NEURON_RT_VISIBLE_CORES="2-3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "2"]


def test_forked_child_is_told_to_use_spawn(neuron):
    code = """
import os, torch
torch.ones(1, device='neuron').sum().item()
pid = os.fork()
if pid == 0:
    try:
        torch.ones(1, device='neuron')
        os._exit(3)
    except RuntimeError as e:
        os._exit(0 if 'spawn' in str(e) else 4)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


def test_torch_neuronx_alias_opens_hf_gate(neuron):
    import importlib.util

    assert importlib.util.find_spec("torch_neuronx") is not None
    import torch_neuronx

    assert torch_neuronx.fallback_stats is __import__("openneuron").fallback_stats


_ENDS_WITH_BACKWARD = """
import torch
class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2
    @staticmethod
    def backward(ctx, g):
        return g * 2
x = torch.ones(3, device="neuron", requires_grad=True)
Twice.apply(x).sum().backward()
"""


def test_a_script_ending_right_after_backward_exits_cleanly():
    # The device's autograd thread releases the graph after backward() returned; if the
    # interpreter is finalizing by then, Python ends that thread and C++ aborts
    # ("terminate called without an active exception", about one run in four of this
    # script before the exit hook in _autograd_exit.py). Five runs, each must exit 0.
    for _ in range(5):
        proc = run_python(_ENDS_WITH_BACKWARD)
        assert proc.returncode == 0, proc.stderr[-2000:]


def test_legacy_storage_classes_are_torch_neurons_as_torch_cudas(neuron):
    # Tensor.storage_type() looks the class up in the device module; isinstance checks the
    # storage's device and dtype; the class allocates on the device.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage is deprecated: PyTorch warns
        x = torch.randn(3, device=neuron)
        assert x.storage_type() is torch.neuron.FloatStorage
        assert torch.tensor([1], dtype=torch.int8, device=neuron).storage_type() is torch.neuron.CharStorage
        assert isinstance(x.storage(), torch.neuron.FloatStorage)
        assert not isinstance(x.storage(), torch.FloatStorage)
        assert not isinstance(x.cpu().storage(), torch.neuron.FloatStorage)
        s = torch.neuron.BFloat16Storage([1.0, 2.5])
        assert s.device.type == "neuron" and s.dtype == torch.bfloat16 and s.tolist() == [1.0, 2.5]
        assert torch.is_storage(s)
