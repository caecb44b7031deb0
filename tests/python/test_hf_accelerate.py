"""Accelerate unchanged on neuron: PartialState picks the device, Accelerator prepares model,
optimizer and dataloader on it and trains like the CPU, in float32 and with bf16 mixed precision."""

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("accelerate")

from accelerate import Accelerator, PartialState  # noqa: E402
from accelerate.state import AcceleratorState  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from hf_tiny import record_fallbacks, tiny_llama  # noqa: E402,F401

STEPS = 6


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def _data():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (16, 12), generator=g)
    return TensorDataset(ids)


def _train(cpu: bool, mixed_precision: str = "no"):
    AcceleratorState._reset_state(reset_partial_state=True)
    acc = Accelerator(cpu=cpu, mixed_precision=mixed_precision)
    model = tiny_llama(seed=0).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(_data(), batch_size=4, shuffle=False)
    model, opt, loader = acc.prepare(model, opt, loader)
    losses, devices = [], set()
    for _ in range(STEPS // len(loader) + 1):
        for (ids,) in loader:
            devices.add(ids.device.type)
            with acc.autocast():
                out = model(input_ids=ids, labels=ids)
            acc.backward(out.loss)
            opt.step()
            opt.zero_grad()
            losses.append(out.loss.item())
            if len(losses) == STEPS:
                return acc, model, losses, devices
    return acc, model, losses, devices


def test_partial_state_device_is_neuron(neuron):
    state = PartialState()
    assert state.device.type == "neuron"
    assert state.default_device.type == "neuron"
    assert str(state.distributed_type) == "DistributedType.NO" and state.num_processes == 1


def test_module_to_neuron_keeps_parameters_so_an_earlier_optimizer_trains(neuron):
    """Accelerate builds the optimizer before prepare() moves the model (as user code often
    does): module.to("neuron") must keep the Parameter objects, as module.to("cuda") does."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    before = list(model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model.to(neuron)
    assert all(a is b for a, b in zip(model.parameters(), before))
    assert {p.device.type for p in opt.param_groups[0]["params"]} == {"neuron"}
    w0 = model[0].weight.detach().cpu().clone()
    F.mse_loss(model(torch.ones(3, 4, device=neuron)), torch.zeros(3, 2, device=neuron)).backward()
    opt.step()
    assert not torch.equal(model[0].weight.detach().cpu(), w0)
    model.cpu()  # and back, with the gradients
    assert all(a is b for a, b in zip(model.parameters(), before))
    assert model[0].weight.device.type == "cpu" and model[0].weight.grad.device.type == "cpu"
    assert not torch._has_compatible_shallow_copy_type(torch.zeros(2), torch.zeros(2, device="meta"))


def test_accelerator_trains_on_neuron_like_cpu(neuron):
    _, _, ref, ref_devices = _train(cpu=True)
    acc, model, got, devices = _train(cpu=False)
    assert acc.device.type == "neuron" and devices == {"neuron"} and ref_devices == {"cpu"}
    assert {p.device.type for p in model.parameters()} == {"neuron"}
    assert got[4] < got[0] - 0.1  # step 5 sees step 1's batch again: it learned
    assert max(abs(a - b) for a, b in zip(got, ref)) < 1e-4, (got, ref)


def test_accelerator_bf16_mixed_precision(neuron):
    _, _, ref, _ = _train(cpu=True, mixed_precision="bf16")
    acc, model, got, _ = _train(cpu=False, mixed_precision="bf16")
    assert acc.mixed_precision == "bf16" and acc.device.type == "neuron"
    # master weights stay float32; the forward runs in bf16 under autocast
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    with acc.autocast():
        x = torch.randn(4, 8, device=neuron)
        assert (x @ x.T).dtype == torch.bfloat16
    assert got[4] < got[0] - 0.1
    assert max(abs(a - b) for a, b in zip(got, ref)) < 0.01, (got, ref)
