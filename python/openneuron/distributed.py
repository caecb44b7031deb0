"""torch.distributed on neuron: the c10d backend "neuron" (docs/distributed.md).

Registered at autoload, so `init_process_group(backend="neuron")`,
`init_process_group(device_id=torch.device("neuron", i))`, `"cpu:gloo,neuron:neuron"`,
`new_group`, `DeviceMesh("neuron", ...)` and Accelerate's choice of the backend name all
reach it. The backend itself is C++ (csrc/torch/process_group.cpp): ranks on one host
exchange through shared memory; a group that spans hosts goes through a Gloo group made
here, over CPU views of the device memory.
"""

from __future__ import annotations

import os
import socket

BACKEND_NAME = "neuron"


def host_key() -> str:
    """What identifies this rank's host: ranks with equal keys share memory.

    The hostname alone is not enough: two network namespaces on one machine (the
    multi-host test, containers) are different hosts to the network and to Gloo.
    """
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        netns = 0
    return f"{socket.gethostname()}/{netns}"


def _create_backend(dist_options, backend_options):
    """The creator c10d calls for every group that uses the neuron backend."""
    import torch.distributed as dist

    from . import _C

    store = dist_options.store
    rank, size = dist_options.group_rank, dist_options.group_size
    store.set(f"openneuron/host/{rank}", host_key())
    hosts = {store.get(f"openneuron/host/{r}").decode() for r in range(size)}
    gloo = None
    if len(hosts) > 1:
        # Gloo picks its interface from GLOO_SOCKET_IFNAME, else the hostname.
        gloo = dist.ProcessGroupGloo(
            dist.PrefixStore("openneuron/gloo/", store), rank, size, dist_options.timeout
        )
    return _C._create_neuron_backend(
        store, rank, size, dist_options.timeout, str(dist_options.group_id), gloo
    )


def register() -> None:
    """Registers the backend with torch.distributed (idempotent)."""
    import torch.distributed as dist

    if not dist.is_available() or BACKEND_NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(
        BACKEND_NAME, _create_backend, extended_api=True, devices=["neuron"]
    )


def default_device_index(device_count: int) -> int | None:
    """The core a process started by a launcher uses: LOCAL_RANK, counted among the
    visible cores (NEURON_RT_VISIBLE_CORES). A process that sees a single core (a
    launcher that gives each rank its own) uses it whatever its LOCAL_RANK."""
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is None or not local_rank.strip().isdigit() or device_count == 0:
        return None
    index = int(local_rank)
    if index < device_count:
        return index
    return 0 if device_count == 1 else None
