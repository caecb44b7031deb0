"""Starting multi-process tests: `torchrun` on a script of tests/python/distributed/, each
rank checking its own results against a reference and exiting non-zero on a mismatch.
Scripts share tests/python/distributed/common.py (imported through PYTHONPATH)."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).parent / "distributed"


def torchrun(script, nproc, *args, timeout=300, env=None, expect_ok=True, torchrun_args=()):
    """Runs `torchrun --standalone --nproc_per_node=nproc SCRIPT ARGS` and returns the
    CompletedProcess (stdout and stderr as text). With expect_ok, a non-zero exit fails the
    calling test with the ranks' output."""
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("OPENNEURON_NUM_CORES", "NEURON_RT_VISIBLE_CORES"))}
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(SCRIPTS), *filter(None, [os.environ.get("PYTHONPATH")])])
    full_env.update({k: str(v) for k, v in (env or {}).items()})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", *torchrun_args, str(SCRIPTS / script), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout)
    if expect_ok and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd[2:])} exited with {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-10000:]}")
    return proc


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_ranks(script, nproc, *args, timeout=120, env=None):
    """Starts `nproc` ranks of SCRIPT as plain processes with torchrun's environment
    variables (env:// rendezvous), without torchrun's agent: when a rank dies the others
    keep running, which is what the fault tests observe. Returns one CompletedProcess-like
    (returncode, stdout, stderr, pid) tuple per rank, in rank order."""
    port = free_port()
    procs = []
    for rank in range(nproc):
        rank_env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("OPENNEURON_NUM_CORES", "NEURON_RT_VISIBLE_CORES"))}
        rank_env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc),
                        LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                        PYTHONPATH=os.pathsep.join([str(SCRIPTS), *filter(None, [os.environ.get("PYTHONPATH")])]))
        rank_env.update({k: str(v) for k, v in (env or {}).items()})
        procs.append(subprocess.Popen([sys.executable, str(SCRIPTS / script), *map(str, args)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=rank_env))
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, err = p.communicate()
            err += f"\n[launch_ranks: killed after {timeout} s]"
        results.append((p.returncode, out, err, p.pid))
    return results
