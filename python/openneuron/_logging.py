"""The `openneuron` logger: its set-up from the environment and the routing of the
backend's own messages into it.

Variables (OPENNEURON_* wins over TorchNeuron's TORCH_NEURONX_* name of the same setting):
  OPENNEURON_LOG_LEVEL / TORCH_NEURONX_LOG_LEVEL  DEBUG, INFO, WARNING (WARN), ERROR,
                                                  CRITICAL (FATAL); any case
  OPENNEURON_LOG_FILE  / TORCH_NEURONX_LOG_FILE   append records to this file (else stderr)

With neither set, the logger only has a NullHandler, as a library's should: the
application's logging configuration decides what is shown. With either set:
  - records of `openneuron` and its children (`openneuron.runtime`: the messages of the
    C++ runtime, compiler and bridge, through _C._set_log_sink; those logged by a worker
    thread arrive at the next message or torch.neuron.synchronize()) go to the file or
    stderr at that level;
  - warnings the backend raises (the C++ TORCH_WARNs such as "aten::X has no native neuron
    kernel ...", and OpenNeuron's Python warnings) are also logged, at WARNING. They stay
    visible as warnings; on stderr they are not printed a second time as records.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings

__all__ = ["configure", "configure_from_env", "is_openneuron_warning"]

logger = logging.getLogger("openneuron")
runtime_logger = logging.getLogger("openneuron.runtime")
logger.addHandler(logging.NullHandler())

LEVELS = {
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARNING": logging.WARNING,
    "WARN": logging.WARNING,  # Python's own alias
    "ERROR": logging.ERROR,
    "CRITICAL": logging.CRITICAL,
    "FATAL": logging.CRITICAL,  # Python's own alias
}
# With a file but no level, the level Python's logging uses by default.
DEFAULT_LEVEL = logging.WARNING
FORMAT = "%(asctime)s %(name)s %(levelname)s: %(message)s"

# How the backend's warnings read: TORCH_WARN texts of csrc/ and OpenNeuron's Python
# warnings. A TORCH_WARN reaches Python as a UserWarning attributed to the user's line, so
# its text is all that says where it came from.
_OURS = re.compile(
    r"^(aten::\S+ has no native neuron kernel"
    r"|neuron: "
    r"|OpenNeuron: "
    r"|torch\.compile\(backend='neuron'\))"
)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# Marks records that repeat a warning, so the stderr handler can skip them.
_FROM_WARNING = "openneuron_from_warning"


def is_openneuron_warning(message: object, filename: str = "") -> bool:
    """True for a warning raised by OpenNeuron (its C++ or its Python code)."""
    return bool(_OURS.match(str(message))) or os.path.abspath(filename).startswith(_PACKAGE_DIR)


def parse_level(value: str, variable: str) -> int | None:
    """The logging level named by `value`, or None after warning that it names none."""
    level = LEVELS.get(value.strip().upper())
    if level is None:
        accepted = ", ".join(LEVELS)
        warnings.warn(
            f"OpenNeuron: {variable}={value!r} is not a log level; accepted (any case): "
            f"{accepted}. Keeping the default level "
            f"{logging.getLevelName(DEFAULT_LEVEL)}.",
            stacklevel=2,
        )
    return level


def _setting(name: str) -> tuple[str, str] | None:
    """(variable, value) of OPENNEURON_<name>, else TORCH_NEURONX_<name>; empty = unset."""
    for variable in (f"OPENNEURON_{name}", f"TORCH_NEURONX_{name}"):
        value = os.environ.get(variable, "")
        if value:
            return variable, value
    return None


class _SkipWarnings(logging.Filter):
    """On stderr a routed warning is already printed by `warnings`: don't print it twice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, _FROM_WARNING, False)


_handlers: list[logging.Handler] = []  # the handlers configure() added, for reconfiguring
_previous_showwarning = None


def _open_handler(file: str | None) -> logging.Handler:
    if file:
        try:
            return logging.FileHandler(file, encoding="utf-8")
        except OSError as e:
            warnings.warn(
                f"OpenNeuron: cannot open the log file {file!r} ({e}); logging to stderr instead.",
                stacklevel=3,
            )
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_SkipWarnings())
    return handler


def _showwarning(message, category, filename, lineno, file=None, line=None):
    if is_openneuron_warning(message, filename):
        logger.warning("%s (%s:%s)", message, filename, lineno, extra={_FROM_WARNING: True})
    _previous_showwarning(message, category, filename, lineno, file, line)


def _route_warnings() -> None:
    # Chained like logging.captureWarnings, so other hooks (pytest's, the user's) still run.
    global _previous_showwarning
    if _previous_showwarning is None:
        _previous_showwarning = warnings.showwarning
        warnings.showwarning = _showwarning


def _runtime_message(level: int, message: str) -> None:
    runtime_logger.log(level, "%s", message)


def _attach_runtime_sink() -> None:
    # Only once the backend is loaded: importing _C here would register the device.
    _C = sys.modules.get(f"{__package__}._C")
    if _C is not None and hasattr(_C, "_set_log_sink"):
        # The C++ side formats only the messages this level lets through.
        _C._set_log_sink(_runtime_message, runtime_logger.getEffectiveLevel())
        import atexit

        # The runtime may log during interpreter teardown, after logging is gone; None
        # also delivers what worker threads logged since the last delivery.
        atexit.register(_C._set_log_sink, None)


def configure(level: int | None = None, file: str | None = None) -> None:
    """Sends the `openneuron` logger's records at `level` (default WARNING) and above to
    `file` (default stderr), and routes the backend's warnings and runtime messages to it.
    Calling it again replaces the earlier set-up."""
    for handler in _handlers:
        logger.removeHandler(handler)
        handler.close()
    _handlers.clear()
    handler = _open_handler(file)
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    _handlers.append(handler)
    logger.setLevel(DEFAULT_LEVEL if level is None else level)
    # The user asked for these records here; the root logger's handlers would repeat them.
    logger.propagate = False
    _route_warnings()
    _attach_runtime_sink()
    logger.debug("logging at %s to %s", logging.getLevelName(logger.level),
                 getattr(handler, "baseFilename", "stderr"))


def configure_from_env() -> None:
    """Applies the LOG_LEVEL / LOG_FILE variables; does nothing when neither is set."""
    level_setting, file_setting = _setting("LOG_LEVEL"), _setting("LOG_FILE")
    if level_setting is None and file_setting is None:
        return
    level = parse_level(level_setting[1], level_setting[0]) if level_setting else None
    configure(level, file_setting[1] if file_setting else None)
