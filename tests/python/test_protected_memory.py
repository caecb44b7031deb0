"""Protected device memory (OPENNEURON_PROTECT_MEMORY=1; README, docs/architecture.md): device
memory is closed to host code outside runtime work, so a stray host read or write of a
device tensor's data_ptr() faults at the culprit; what goes through the runtime works as
without it. The mode is chosen when the runtime starts, so each case runs in a fresh
interpreter."""

import signal

import pytest

from conftest import run_python


def have_protection_keys() -> bool:
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    return "pku" in flags and "ospke" in flags


needs_keys = pytest.mark.skipif(not have_protection_keys(),
                                reason="no memory protection keys (pku) on this CPU/kernel")

PROTECTED = {"OPENNEURON_PROTECT_MEMORY": "1", "PYTHONFAULTHANDLER": "1"}

STRAY_READ = """
import ctypes, torch
x = torch.arange(4.0, device="neuron") + 1
torch.neuron.synchronize()
print("read", ctypes.string_at(x.data_ptr(), 4).hex(), flush=True)
"""


@needs_keys
def test_a_host_read_of_device_memory_faults_at_the_culprit():
    r = run_python(STRAY_READ, **PROTECTED)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stdout, r.stderr)
    assert "host code touched neuron device memory at 0x" in r.stderr, r.stderr
    assert "OPENNEURON_PROTECT_MEMORY=1" in r.stderr
    # faulthandler's Python stack names the line that read the pointer
    assert 'File "<string>", line 5' in r.stderr, r.stderr
    assert "read" not in r.stdout


def test_without_protection_the_same_read_silently_works():
    r = run_python(STRAY_READ)
    assert r.returncode == 0, r.stderr
    assert "read 0000803f" in r.stdout  # 1.0f: what the test above must not see


@needs_keys
def test_a_host_write_faults_too():
    r = run_python("""
import ctypes, torch
x = torch.zeros(4, device="neuron")
torch.neuron.synchronize()
ctypes.memset(x.data_ptr(), 0xff, 4)
""", **PROTECTED)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    assert "host code touched neuron device memory" in r.stderr


@needs_keys
def test_work_through_the_runtime_matches_the_cpu():
    r = run_python("""
import copy, torch, openneuron
assert not torch.neuron.get_device_properties(0).host_mapped
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
dev = copy.deepcopy(model).to("neuron")
for m, xs, ys in ((model, x, y), (dev, x.to("neuron"), y.to("neuron"))):
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    for _ in range(3):
        loss = torch.nn.functional.cross_entropy(m(xs), ys)
        opt.zero_grad(); loss.backward(); opt.step()
    m.final = loss.item()
assert abs(model.final - dev.final) < 1e-4, (model.final, dev.final)
a = torch.rand(100) * 5 + 0.1
d = a.to("neuron")
torch.testing.assert_close(torch.lgamma(d).cpu(), torch.lgamma(a))  # a host library op
d.lgamma_()  # in place: the staged copy goes back into the same storage
torch.testing.assert_close(d.cpu(), torch.lgamma(a))
torch.testing.assert_close(d[10:20].lgamma().cpu(), torch.lgamma(a)[10:20].lgamma())
lib = openneuron.library_stats()
assert sum(n for op, n in lib.items() if op.split(".")[0] == "aten::lgamma") >= 3, lib
assert openneuron.fallback_stats() == {}, openneuron.fallback_stats()
c = torch.tensor([1.5, -2.0], device="neuron").to(torch.complex64)
assert c.cpu().tolist() == [1.5 + 0j, -2 + 0j]
assert str(torch.ones(2, device="neuron")).startswith("tensor([1., 1.], device='neuron:0')")
f = torch.compile(lambda t: (t.sin() * 2).softmax(-1), backend="neuron")
t = torch.randn(4, 8)
torch.testing.assert_close(f(t.to("neuron")).cpu(), (t.sin() * 2).softmax(-1))
print("ok")
""", **PROTECTED)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


def test_a_bad_setting_names_the_variable():
    r = run_python("import torch; torch.zeros(1, device='neuron')", OPENNEURON_PROTECT_MEMORY="yes")
    assert r.returncode != 0
    assert "OPENNEURON_PROTECT_MEMORY='yes' is invalid" in r.stderr, r.stderr


@pytest.mark.skipif(have_protection_keys(), reason="this machine has protection keys")
def test_without_protection_keys_the_error_says_what_is_missing():
    r = run_python("import torch; torch.zeros(1, device='neuron')", OPENNEURON_PROTECT_MEMORY="1")
    assert r.returncode != 0
    assert "needs memory protection keys" in r.stderr, r.stderr
