"""The on-disk cache of whole-graph recordings.

A recording (whole_graph.py) is specialised to a graph's FX code, its device inputs'
layouts and its host input values. Written to disk, it lets a fresh process launch the
program at the graph's first call instead of running the graph op by op to record it.

Entries live in OPENNEURON_CACHE_DIR (or TorchNeuron's TORCH_NEURONX_NEFF_CACHE_DIR;
default $XDG_CACHE_HOME/openneuron, that is ~/.cache/openneuron) under `recordings/`, one
file per recording: a magic line, the SHA-256 of the rest, a JSON header (what the entry
is, the graph's output template) and the recording's bytes. The key hashes everything the
recording depends on, including the OpenNeuron and torch versions, so an upgrade starts
afresh. A file is written under a temporary name and renamed into place: readers never
see part of one, and processes that write one entry at once leave one whole copy. A
corrupt or truncated entry is reported with a warning, removed and recorded again; a
directory that cannot be written leaves the cache in memory, with one warning.
OPENNEURON_DISK_CACHE=0 (or TORCH_NEURONX_NEFF_DISABLE_CACHE=1) turns it off.
`openneuron cache list|stats|clear` looks after the directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

import torch

MAGIC = b"OPENNEURON-RECORDING 1\n"
_SUBDIR = "recordings"
_SUFFIX = ".rec"
_warned_unwritable: set[str] = set()


def cache_dir() -> Path:
    d = os.environ.get("OPENNEURON_CACHE_DIR") or os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "openneuron"


def enabled() -> bool:
    off = ("0", "false", "no", "off")
    if os.environ.get("OPENNEURON_DISK_CACHE", "1").strip().lower() in off:
        return False
    return os.environ.get("TORCH_NEURONX_NEFF_DISABLE_CACHE", "0").strip().lower() in off


def _entries_dir() -> Path:
    return cache_dir() / _SUBDIR


def entry_key(kind: str, code: str, device_inputs: list[torch.Tensor], host_key: tuple) -> str:
    """The name of a recording: a hash of all it was specialised to."""
    import openneuron

    storages: list[int] = []
    layouts = []
    for t in device_inputs:
        ptr = t.untyped_storage().data_ptr()
        shared = storages.index(ptr) if ptr in storages else -1
        storages.append(ptr)
        layouts.append([str(t.dtype), list(t.shape), list(t.stride()), t.storage_offset(),
                        t.untyped_storage().nbytes(), t.device.index, shared])
    material = json.dumps([
        MAGIC.decode(), openneuron.__version__, torch.__version__, openneuron._C.op_table_fingerprint(),
        os.environ.get("OPENNEURON_FUSION", "1"), os.environ.get("OPENNEURON_PLATFORM", ""),
        kind, code, layouts, repr(host_key)])
    return hashlib.sha256(material.encode()).hexdigest()


def _parse(data: bytes) -> tuple[dict, bytes]:
    if not data.startswith(MAGIC):
        raise ValueError("not a recording file (or another format version)")
    digest, rest = data[len(MAGIC):len(MAGIC) + 32], data[len(MAGIC) + 32:]
    if hashlib.sha256(rest).digest() != digest:
        raise ValueError("checksum mismatch (truncated or corrupt)")
    header, sep, blob = rest.partition(b"\n")
    if not sep:
        raise ValueError("no header")
    return json.loads(header), blob


def load(key: str) -> tuple[dict, bytes] | None:
    """The entry's header and recording bytes; None if there is none or it is corrupt (then
    it is removed, with a warning)."""
    path = _entries_dir() / (key + _SUFFIX)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        warnings.warn(f"OpenNeuron: cannot read the cache entry {path}: {e}", stacklevel=3)
        return None
    try:
        return _parse(data)
    except ValueError as e:
        discard(key, f"{e}")
        return None


def discard(key: str, reason: str) -> None:
    """Removes a bad entry (it will be recorded again), saying why."""
    path = _entries_dir() / (key + _SUFFIX)
    warnings.warn(f"OpenNeuron: cache entry {path} is unusable ({reason}); recording the graph "
                  "again", stacklevel=3)
    try:
        path.unlink()
    except OSError:
        pass


def store(key: str, header: dict, blob: bytes) -> bool:
    """Writes an entry atomically; False (with one warning per directory) if it cannot."""
    d = _entries_dir()
    rest = json.dumps(header).encode() + b"\n" + blob
    data = MAGIC + hashlib.sha256(rest).digest() + rest
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, d / (key + _SUFFIX))
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        if str(d) not in _warned_unwritable:
            _warned_unwritable.add(str(d))
            warnings.warn(f"OpenNeuron: cannot write the program cache in {d} ({e}); "
                          "recordings stay in memory (set OPENNEURON_CACHE_DIR to a writable "
                          "directory)", stacklevel=3)
        return False
    return True


def entries() -> list[dict]:
    """Every entry: file name, bytes, age in seconds, and its header's description."""
    d = _entries_dir()
    out = []
    now = time.time()
    for path in sorted(d.glob("*" + _SUFFIX)) if d.is_dir() else []:
        try:
            st = path.stat()
            header, _ = _parse(path.read_bytes())
            desc = {k: header.get(k) for k in ("kind", "nodes", "instructions", "created")}
            status = "ok"
        except (OSError, ValueError) as e:
            st, desc, status = path.stat(), {}, f"unusable: {e}"
        out.append({"name": path.name, "bytes": st.st_size, "age_s": round(now - st.st_mtime),
                    "status": status, **desc})
    return out


def clear() -> int:
    """Removes every entry (and stray temporary files); returns how many entries."""
    d = _entries_dir()
    n = 0
    for path in d.glob("*") if d.is_dir() else []:
        if path.suffix in (_SUFFIX, ".tmp"):
            path.unlink(missing_ok=True)
            n += path.suffix == _SUFFIX
    return n
