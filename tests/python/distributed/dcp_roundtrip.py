"""torch.distributed.checkpoint of an FSDP2 model and its AdamW state on the neuron backend.

  --phase save (2 ranks): train the model of train_fsdp2.py for 2 steps, dcp.save model and
      optimizer state (get_state_dict) into DIR, and rank 0 writes the full state
      (full_state_dict=True) to DIR/full.pt. Then a differently initialised model and
      optimizer dcp.load it: the full state must equal the saved one exactly, and one more
      training step must give the original's loss and parameters exactly.
  --phase load (3 ranks, another sharding: 32 embedding rows over 3 ranks is uneven):
      dcp.load DIR into a fresh FSDP2 model and optimizer; the full state must equal
      DIR/full.pt exactly.
      Then (check "barrier_after_save") rank 0 writes a file while the others wait in
      dist.barrier().
Prints "PASS <phase>" or "FAIL <phase>: ...".

Usage (under torchrun): dcp_roundtrip.py --phase save|load --dir DIR [--device ...] [--backend ...]
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from common import finish, RANK, WORLD_SIZE, add_backend_args, init_training, run_checks, say
from train_fsdp2 import TinyLM, batch, loss_fn, make_opt


def build(dev, seed):
    torch.manual_seed(seed)
    model = TinyLM().to(dev)
    mesh = init_device_mesh(dev.type, (WORLD_SIZE,))
    for b in model.blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, make_opt(model.parameters())


def train_step(model, opt, dev, step):
    x, y = batch(step)
    x, y = x.chunk(WORLD_SIZE)[RANK].to(dev), y.chunk(WORLD_SIZE)[RANK].to(dev)
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    loss = loss.detach().clone()
    dist.all_reduce(loss)
    return (loss / WORLD_SIZE).cpu()


def full_state(model, opt):
    """Model and optimizer state as full CPU tensors (every rank)."""
    msd, osd = get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True))
    return {"model": to_cpu(msd), "optim": to_cpu(osd)}


def to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def assert_same(got, ref, where="state"):
    if isinstance(ref, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"rank {RANK}: {where}: {type(got)}, expected a tensor"
        assert got.dtype == ref.dtype and got.shape == ref.shape and torch.equal(got, ref), (
            f"rank {RANK}: {where}: differs (max |diff| "
            f"{(got.double() - ref.double()).abs().max().item() if got.shape == ref.shape else 'shape'})")
    elif isinstance(ref, dict):
        assert isinstance(got, dict) and set(got) == set(ref), (
            f"rank {RANK}: {where}: keys {sorted(map(str, got)) if isinstance(got, dict) else got} "
            f"!= {sorted(map(str, ref))}")
        for k in ref:
            assert_same(got[k], ref[k], f"{where}.{k}")
    elif isinstance(ref, (list, tuple)):
        assert len(got) == len(ref), f"rank {RANK}: {where}: length {len(got)} != {len(ref)}"
        for i, (g, r) in enumerate(zip(got, ref)):
            assert_same(g, r, f"{where}[{i}]")
    else:
        assert got == ref, f"rank {RANK}: {where}: {got!r} != {ref!r}"


def load_into(model, opt, ckpt):
    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=ckpt)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])


def save_phase(dev, ckpt):
    model, opt = build(dev, seed=0)
    for step in range(2):
        train_step(model, opt, dev, step)
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=ckpt)
    saved = full_state(model, opt)
    if RANK == 0:  # read only by the 3-rank launch
        torch.save(saved, os.path.join(ckpt, "full.pt"))
    assert saved["optim"]["state"], f"rank {RANK}: the optimizer has no state"

    other, other_opt = build(dev, seed=1)
    train_step(other, other_opt, dev, 5)  # a different optimizer state to overwrite
    load_into(other, other_opt, ckpt)
    assert_same(full_state(other, other_opt), saved)
    # and it trains on exactly as the original does
    loss, loss_loaded = train_step(model, opt, dev, 2), train_step(other, other_opt, dev, 2)
    assert torch.equal(loss, loss_loaded), f"rank {RANK}: loss after loading {loss_loaded} != {loss}"
    assert_same(full_state(other, other_opt)["model"], full_state(model, opt)["model"], "after a step")


def barrier_after_save(ckpt):
    """The usual "rank 0 writes, everyone waits" pattern: the other ranks reach the
    barrier well before rank 0 does, and must wait for it rather than fail."""
    if RANK == 0:
        torch.save({"step": 3}, os.path.join(ckpt, "extra.pt"))
        time.sleep(0.5)
    dist.barrier()
    assert os.path.exists(os.path.join(ckpt, "extra.pt")), f"rank {RANK}: left the barrier before rank 0 wrote"


def load_phase(dev, ckpt):
    model, opt = build(dev, seed=1)
    load_into(model, opt, ckpt)
    ref = torch.load(os.path.join(ckpt, "full.pt"), weights_only=True)
    assert_same(full_state(model, opt), ref)
    emb = model.emb.weight
    say(f"rank {RANK}: embedding shard {tuple(emb.to_local().shape)} of {tuple(emb.shape)}")


def main():
    parser = add_backend_args(argparse.ArgumentParser())
    parser.add_argument("--phase", choices=["save", "load"], required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    dev = init_training(args)
    if args.phase == "save":
        checks = [("dcp_save", lambda: save_phase(dev, args.dir)),
                  ("barrier_after_save", lambda: barrier_after_save(args.dir))]
    else:
        checks = [("dcp_load", lambda: load_phase(dev, args.dir))]
    ok = run_checks(checks)
    finish()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
