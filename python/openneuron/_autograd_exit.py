"""A clean exit after backward passes on neuron.

The autograd engine runs a neuron backward pass on a device thread of its own. When the
pass is done, the caller's `backward()` returns while that thread is still releasing the
graph; a tensor whose last reference goes there is freed with the GIL taken. A script
that ends right after `backward()` can reach interpreter finalization in that window, and
a thread taking the GIL then is ended by Python with a forced unwind that C++ turns into
`terminate called without an active exception` (PyTorch issue 190489; CUDA's device
threads share it).

At exit, while the interpreter is still whole, one tiny backward pass per core queues
behind whatever the device threads were releasing, so that work is finished before
finalization starts. The tiny passes release their own graphs in the same way (each
holds a snapshot of Python thread-local state), so the exit then waits a moment for
that, with the GIL free for them to take.
"""

from __future__ import annotations

import atexit
import time

# Time given to the device threads to release the tiny passes' graphs: microseconds of
# work; the margin covers a busy host.
_RELEASE_WAIT_S = 0.02


def _flush() -> None:
    import torch

    from . import _C

    # No device work in this process (or a forked child that cannot run it): no thread.
    if not _C.is_initialized() or _C.in_bad_fork():
        return
    try:
        for index in range(_C.device_count()):
            leaf = torch.zeros(1, device=torch.device("neuron", index), requires_grad=True)
            leaf.sum().backward()
    except Exception:  # noqa: BLE001 - exiting: a failure here must not mask the program's
        return
    time.sleep(_RELEASE_WAIT_S)


def install() -> None:
    atexit.register(_flush)
