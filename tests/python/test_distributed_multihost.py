"""The neuron backend across hosts: two network namespaces on this machine stand for two
hosts (different host keys, see openneuron.distributed.host_key), joined by a veth pair.

`torchrun --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d` runs in each namespace
(tests/python/distributed/multihost_ddp.py): 4 ranks, 2 per "host". The cross-host group
must go through Gloo over the veth (GLOO_SOCKET_IFNAME), a one-host group through shared
memory, and DDP must train like one process on the full batch.

Needs CAP_NET_ADMIN (root) and the `ip` binary (Debian iproute2); skipped otherwise.
"""

import functools
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys

import pytest

from dist_launch import SCRIPTS

NPROC = 2
NODES = 2


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def _why_no_namespaces():
    if shutil.which("ip") is None:
        return "no `ip` binary (Debian package iproute2)"
    if sys.platform != "linux":
        return "network namespaces are Linux-only"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_NET_ADMIN)"
    return None


class TwoHosts:
    """Two network namespaces joined by a veth pair, 10.a.b.1 and 10.a.b.2/24, loopback up
    in each; names unique per run. Use as a context manager: always torn down."""

    def __init__(self):
        tag = secrets.token_hex(3)
        self.netns = [f"onmh-{tag}-{i}" for i in range(NODES)]
        self.ifname = [f"onv{tag}{i}" for i in range(NODES)]  # <= 15 characters
        a, b = 16 + secrets.randbelow(200), secrets.randbelow(256)
        self.addr = [f"10.{a}.{b}.{i + 1}" for i in range(NODES)]
        self.created = []

    def __enter__(self):
        try:
            for ns in self.netns:
                _ip("netns", "add", ns)
                self.created.append(ns)
            _ip("link", "add", self.ifname[0], "type", "veth", "peer", "name", self.ifname[1])
            for ns, ifname, addr in zip(self.netns, self.ifname, self.addr):
                _ip("link", "set", ifname, "netns", ns)
                _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", ifname)
                _ip("-n", ns, "link", "set", ifname, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except subprocess.CalledProcessError as e:
            self.__exit__(None, None, None)
            if not self.created or "Operation not permitted" in e.stderr:
                pytest.skip(f"cannot create network namespaces: {' '.join(e.cmd)}: {e.stderr.strip()}")
            raise
        return self

    def __exit__(self, *exc):
        # Deleting a namespace deletes its end of the veth pair, and with it the peer.
        for ns in self.created:
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.ifname[0], check=False)  # if it never left the root namespace
        self.created = []


def launch_two_hosts(*script_args, timeout=300):
    """Runs multihost_ddp.py on 2 namespaces x 2 ranks; returns [(returncode, stdout,
    stderr)] per node."""
    why = _why_no_namespaces()
    if why:
        pytest.skip(why)
    port = 29500 + secrets.randbelow(20000)  # each namespace has its own port space
    with TwoHosts() as hosts:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENNEURON_NUM_CORES", "NEURON_RT_VISIBLE_CORES",
                                    "MASTER_", "GLOO_SOCKET_IFNAME", "TORCHELASTIC"))}
        env["PYTHONPATH"] = os.pathsep.join([str(SCRIPTS), *filter(None, [env.get("PYTHONPATH")])])
        procs = []
        try:
            for node in range(NODES):
                cmd = ["ip", "netns", "exec", hosts.netns[node],
                       sys.executable, "-m", "torch.distributed.run", f"--nnodes={NODES}",
                       f"--nproc_per_node={NPROC}", f"--node_rank={node}", "--rdzv_backend=c10d",
                       f"--rdzv_endpoint={hosts.addr[0]}:{port}", f"--rdzv_id={hosts.netns[0]}",
                       # torchrun guesses the store's host from the hostname, which both
                       # namespaces share: say which agent hosts it.
                       f"--rdzv_conf=is_host={int(node == 0)}",
                       f"--local_addr={hosts.addr[node]}", "--max_restarts=0",
                       str(SCRIPTS / "multihost_ddp.py"), *map(str, script_args)]
                procs.append(subprocess.Popen(
                    cmd, env={**env, "GLOO_SOCKET_IFNAME": hosts.ifname[node]},
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    start_new_session=True))  # its own process group: killed as a whole
            results = []
            for p in procs:
                try:
                    out, err = p.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:
                    for q in procs:
                        if q.poll() is None:
                            os.killpg(q.pid, signal.SIGKILL)
                    out, err = p.communicate()
                    err += f"\n[killed after {timeout} s]"
                results.append((p.returncode, out, err))
            return results
        finally:
            for q in procs:
                if q.poll() is None:
                    os.killpg(q.pid, signal.SIGKILL)
                    q.wait()


@functools.cache
def _launch():
    return launch_two_hosts()


def _expect_pass(check):
    results = _launch()
    stdout = "".join(out for _, out, _ in results)
    passed = len(re.findall(rf"(?<!\w)rank \d+: PASS {check}(?!\w)", stdout))
    if passed != NODES * NPROC:
        fails = re.findall(rf"^rank \d+: FAIL {check}:.*$", stdout, re.M)
        detail = "\n".join(f"--- node {i} (exit {rc}) stdout ---\n{out[-3000:]}\n"
                           f"--- node {i} stderr ---\n{err[-6000:]}"
                           for i, (rc, out, err) in enumerate(results))
        raise AssertionError(f"{check}: {passed} of {NODES * NPROC} ranks passed\n"
                             + ("\n".join(fails) or "(no FAIL line: the launch itself failed)")
                             + "\n" + detail)


def test_ranks_see_two_hosts():
    _expect_pass("hosts")


def test_cross_host_group_uses_gloo_one_host_group_shared_memory():
    _expect_pass("transport")


def test_one_host_group_all_reduce():
    _expect_pass("same_host")


def test_ddp_across_hosts_matches_single_process():
    _expect_pass("ddp")


def test_namespaces_are_removed():
    why = _why_no_namespaces()
    if why:
        pytest.skip(why)
    with TwoHosts() as hosts:
        names = hosts.netns
        assert all(n in _ip("netns", "list").stdout for n in names)
    left = _ip("netns", "list").stdout
    assert not any(n in left for n in names), left
