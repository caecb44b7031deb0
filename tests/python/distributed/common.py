"""What the torchrun scripts share: the rank's identity and a check that fails the rank
with a message naming it."""

import os
import sys

import torch

RANK = int(os.environ.get("RANK", "0"))
WORLD_SIZE = int(os.environ.get("WORLD_SIZE", "1"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))


def say(line):
    """One line in one write: ranks sharing a pipe (torchrun) never interleave within a line."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def device():
    return torch.device("neuron", LOCAL_RANK)


def assert_close(got, ref, what, **kw):
    """got (any device) equals ref (CPU) within kw's tolerances (exact by default)."""
    kw.setdefault("rtol", 0)
    kw.setdefault("atol", 0)
    try:
        torch.testing.assert_close(got.detach().cpu(), ref.detach().cpu(), **kw)
    except AssertionError as e:
        raise AssertionError(f"rank {RANK}: {what}: {e}") from None


# ---- training scripts (train_*.py, dcp_roundtrip.py, pipeline.py) ----

def add_backend_args(parser):
    """--device neuron|cpu and --backend (default "neuron"): the scripts can be debugged
    on CPU tensors with --device cpu --backend gloo."""
    parser.add_argument("--device", default="neuron", choices=["neuron", "cpu"])
    parser.add_argument("--backend", default="neuron")
    return parser


def train_device(kind):
    """This rank's device of type `kind` (neuron:LOCAL_RANK, or the CPU)."""
    return torch.device("cpu") if kind == "cpu" else torch.device(kind, LOCAL_RANK)


def init_training(args, timeout_s=60):
    """init_process_group with args.backend, checking the device and backend picked."""
    import datetime

    import torch.distributed as dist

    dev = train_device(args.device)
    kw = {"device_id": dev} if dev.type != "cpu" else {}
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=timeout_s), **kw)
    if dev.type == "neuron":
        assert torch.neuron.current_device() == LOCAL_RANK, (
            f"rank {RANK}: current device {torch.neuron.current_device()} != LOCAL_RANK {LOCAL_RANK}")
    assert dist.get_world_size() == WORLD_SIZE
    return dev


def run_checks(checks):
    """Runs each (name, fn) and prints "PASS name" or "FAIL name: error"; a failure does
    not stop the later checks (a pytest test per name reads its own line). Returns
    whether all passed; the script then exits non-zero if not."""
    import traceback

    ok = True
    for name, fn in checks:
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            ok = False
            traceback.print_exc()
            msg = str(e).strip().replace("\n", " | ")[:2000]
            say(f"rank {RANK}: FAIL {name}: {type(e).__name__}: {msg}")
        else:
            say(f"rank {RANK}: PASS {name}")
    return ok


def finish():
    """destroy_process_group once the objects holding the group (DDP, FSDP, meshes, in
    reference cycles) are freed, so that it stops Gloo's worker threads while Python is
    still up: one that outlives it drops its last tensor reference during interpreter
    shutdown and aborts the rank (pytorch/pytorch#190489)."""
    import gc

    import torch.distributed as dist

    gc.collect()
    dist.destroy_process_group()
