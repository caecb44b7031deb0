"""What the numbers were measured on: hardware, load, software versions, thread counts."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def load_average() -> list[float]:
    # Other work on a shared machine is the main source of noise: record how much there was.
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def describe(threads: int) -> dict:
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "cpu": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": {p: _version(p) for p in
                     ("torch", "openneuron", "transformers", "diffusers", "numpy")},
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "threads": {"torch_intra_op": threads, "neuron_intra_op": threads,
                    "collective_ranks_share": True},
        "load_average_at_start": load_average(),
    }
