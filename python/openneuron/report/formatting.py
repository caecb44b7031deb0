"""Numbers and source locations as the text and HTML reports print them."""

from __future__ import annotations

import os


def size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def duration(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.0f} us"


def path(filename: str | None) -> str:
    """Relative to the working directory when under it: short, and still clickable."""
    if not filename:
        return "?"
    if filename.startswith("<"):
        return filename
    rel = os.path.relpath(filename)
    return filename if rel.startswith("..") else rel


def location(frame: dict | None) -> str:
    """"train.py:12" for {"filename", "line", ...}; "-" when there is none; the name alone
    for a place without lines ("(no Python stack)")."""
    if not frame or not frame.get("filename"):
        return "-"
    if not frame.get("line"):
        return path(frame["filename"])
    return f"{path(frame['filename'])}:{frame['line']}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
