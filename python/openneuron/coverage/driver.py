"""Runs workers over chunks of architectures, surviving crashes and hangs."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

CHUNK = 12
# A tiny model needs well under 1 GiB; a worker that grows past this is a runaway
# (a config the harness failed to shrink) and must not take the machine down.
MEMORY_LIMIT_BYTES = 8 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def _run_chunk(mapping: str, mode: str, archs: list[str], timeout_per_arch: float) -> list[dict]:
    """Runs `archs` in one worker; on a crash or timeout, the unfinished ones run alone."""
    cmd = [sys.executable, "-m", "openneuron.coverage.worker", mapping, mode, *archs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_limit_memory,
                              env={**os.environ, "OPENNEURON_HBM_BYTES": str(4 << 30)},
                              timeout=timeout_per_arch * len(archs))
        stdout, crashed = proc.stdout, proc.returncode != 0
        tail = proc.stderr.strip().splitlines()[-1:] if crashed else []
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        crashed, tail = True, ["timeout"]
    results = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    done = {r["arch"] for r in results}
    rest = [a for a in archs if a not in done]
    if crashed and rest:
        if len(archs) == 1:
            reason = tail[0] if tail else "worker died"
            return [{"arch": archs[0], "mapping": mapping, "status": "error",
                     "message": f"process crashed or hung: {reason}"[:400]}]
        for arch in rest:
            results.extend(_run_chunk(mapping, mode, [arch], timeout_per_arch))
    return results


def run(mapping: str, archs: list[str], compiled: bool, workers: int,
        timeout_per_arch: float, progress=None) -> list[dict]:
    mode = "compiled" if compiled else "eager"
    chunks = [archs[i:i + CHUNK] for i in range(0, len(archs), CHUNK)]
    results: list[dict] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for chunk_results in pool.map(
                lambda c: _run_chunk(mapping, mode, c, timeout_per_arch), chunks):
            results.extend(chunk_results)
            if progress:
                progress(len(results), len(archs))
    return sorted(results, key=lambda r: r["arch"])
