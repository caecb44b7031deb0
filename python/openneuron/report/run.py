"""Runs a user script unchanged, as `python SCRIPT ARGS` would, and turns however it
ended (normally, an exception, SystemExit) into an exit status, so the report is still
printed before that status is passed on."""

from __future__ import annotations

import os
import runpy
import sys
import traceback


def exit_status(code) -> int:
    """The status `python` exits with for `sys.exit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1


def _print_traceback(exc: BaseException, script: str) -> None:
    """The traceback from the script's first frame on: runpy's frames are ours, not its."""
    tb = exc.__traceback__
    target = os.path.realpath(script)
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)


def run_script(script: str, args: list[str]) -> tuple[int, str | None]:
    """(exit status, "ExceptionType: message" or None). The script sees sys.argv =
    [script, *args], its own directory first on sys.path, and __name__ == "__main__"."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *args]
    path = os.path.abspath(script)  # as `python SCRIPT`: __file__ and frames absolute
    sys.path.insert(0, os.path.dirname(path))
    try:
        runpy.run_path(path, run_name="__main__")
        return 0, None
    except SystemExit as exc:
        return exit_status(exc.code), None
    except KeyboardInterrupt as exc:
        _print_traceback(exc, script)
        return 130, "KeyboardInterrupt"
    except BaseException as exc:  # the script's own error, shown as Python shows it
        _print_traceback(exc, script)
        return 1, f"{type(exc).__name__}: {exc}"
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
