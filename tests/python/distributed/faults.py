"""Faults the neuron backend must turn into clear errors on every surviving rank, never
a hang or a wrong result. Started by tests/python/test_distributed_faults.py through
launch_ranks (no torchrun agent, so survivors are not killed for it).

Usage: faults.py MODE, MODE one of
  kill       rank 1 is SIGKILLed before an all_reduce the others wait in
  size       ranks pass all_reduce tensors of different sizes
  kind       rank 0 calls all_reduce where the others call all_gather_into_tensor
  dtype      rank 0 passes float32 where the others pass int32
  device     a CPU tensor on a neuron-only group
  reinit     destroy_process_group, then init and use a new one in the same process
Each surviving rank prints "ERROR: <message>" for the error it got (or "OK") and exits 0.
"""

import datetime
import os
import signal
import sys

import torch
import torch.distributed as dist

from common import RANK, WORLD_SIZE, device, say


def main(mode):
    dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=30))
    dev = device()
    dist.all_reduce(torch.ones(4, device=dev))  # everyone is up
    torch.neuron.synchronize()
    try:
        if mode == "kill":
            if RANK == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            t = torch.ones(1 << 20, device=dev)
            dist.all_reduce(t)
            t.cpu()  # the failure surfaces at the stream's next synchronisation
        elif mode == "size":
            t = torch.ones(100 + RANK, device=dev)
            dist.all_reduce(t)
            t.cpu()
        elif mode == "kind":
            x = torch.ones(8, device=dev)
            if RANK == 0:
                dist.all_reduce(x)
            else:
                dist.all_gather_into_tensor(torch.empty(8 * WORLD_SIZE, device=dev), x)
            torch.neuron.synchronize()
        elif mode == "dtype":
            x = torch.ones(8, device=dev, dtype=torch.float32 if RANK == 0 else torch.int32)
            dist.all_reduce(x)
            x.cpu()
        elif mode == "device":
            dist.all_reduce(torch.ones(3))
        elif mode == "reinit":
            dist.destroy_process_group()
            dist.init_process_group("neuron")
            t = torch.full((3,), float(RANK), device=dev)
            dist.all_reduce(t)
            expected = float(sum(range(WORLD_SIZE)))
            assert t.cpu().tolist() == [expected] * 3, t
            say("OK")
            dist.destroy_process_group()
            return
        else:
            raise SystemExit(f"unknown mode {mode}")
    except Exception as e:  # noqa: BLE001
        say(f"ERROR: {type(e).__name__}: {e}")
        # A failed group cannot be used again; later calls say so at once.
        try:
            dist.all_reduce(torch.ones(1, device=dev))
            torch.neuron.synchronize()
            say("LATER: no error")
        except Exception as later:  # noqa: BLE001
            say(f"LATER: {later}")
        return
    say("OK")


if __name__ == "__main__":
    main(sys.argv[1])
    # Exit without destroy_process_group's shutdown waiting on a dead peer.
    sys.stdout.flush()
    os._exit(0)
