"""On/off switches of the backend read from the environment: OpenNeuron's own variable
wins; else TorchNeuron's DISABLE_ variable of the same switch is honoured; else the
default."""

from __future__ import annotations

import os

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def switch(ours: str, theirs_disable: str, default: bool) -> bool:
    """`ours` set: on when it is true. Else `theirs_disable` (TorchNeuron's name): off when
    true, on when false. Unset or unrecognised: `default`."""
    value = os.environ.get(ours)
    if value is not None:
        return value.strip().lower() in _TRUE
    value = (os.environ.get(theirs_disable) or "").strip().lower()
    if value in _TRUE:
        return False
    if value in _FALSE:
        return True
    return default
