"""torch.save / torch.load of neuron tensors and state dicts."""

import torch


def test_save_and_load_with_map_locations(neuron, tmp_path):
    model = torch.nn.Linear(4, 3).to(neuron)
    path = tmp_path / "sd.pt"
    torch.save(model.state_dict(), path)
    loaded = torch.load(path)
    assert loaded["weight"].device == torch.device("neuron:0")
    assert torch.equal(loaded["weight"].cpu(), model.weight.detach().cpu())
    on1 = torch.load(path, map_location="neuron:1")
    assert on1["bias"].device == torch.device("neuron:1")
    cpu = torch.load(path, map_location="cpu")
    assert cpu["weight"].device.type == "cpu"
    assert torch.equal(cpu["weight"], model.weight.detach().cpu())


def test_cpu_checkpoint_to_neuron(neuron, tmp_path):
    t = {"x": torch.arange(6.0).view(2, 3)}
    torch.save(t, tmp_path / "t.pt")
    r = torch.load(tmp_path / "t.pt", map_location="neuron")
    assert r["x"].is_neuron and torch.equal(r["x"].cpu(), t["x"])
