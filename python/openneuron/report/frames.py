"""Which frame of a Python stack is the user's: the innermost one outside the libraries
(PyTorch, OpenNeuron, site-packages, the standard library)."""

from __future__ import annotations

import os
import site
import sysconfig
from functools import lru_cache


@lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    import torch

    import openneuron

    roots = {
        os.path.dirname(os.path.abspath(torch.__file__)),
        # An editable install keeps OpenNeuron outside site-packages.
        os.path.dirname(os.path.abspath(openneuron.__file__)),
        sysconfig.get_paths()["stdlib"],
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    }
    roots.update(getattr(site, "getsitepackages", lambda: [])())
    user_site = getattr(site, "getusersitepackages", lambda: None)()
    if isinstance(user_site, str):
        roots.add(user_site)
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


@lru_cache(maxsize=4096)
def is_library_file(filename: str) -> bool:
    """True for library code and for code without a file ("<frozen runpy>", FX's
    "<eval_with_key>.3", Dynamo's generated code)."""
    if not filename or filename.startswith("<"):
        return True
    path = os.path.realpath(filename)
    return any(path.startswith(root) for root in _library_roots())


def user_frame(frames: list[dict]) -> dict | None:
    """The first frame (frames are innermost first) in the user's code, as
    {"filename", "line", "name"}; None when every frame is library code or there are
    none (work queued from the autograd engine's thread has no Python stack)."""
    for f in frames or ():
        if not is_library_file(f.get("filename", "")):
            return {"filename": f["filename"], "line": int(f.get("line", 0)),
                    "name": f.get("name", "")}
    return None

