"""Compilations, recompilations and graph breaks, from Dynamo's own records.

- Every frame Dynamo compiles leaves a `CompilationMetrics` in
  `torch._dynamo.utils.get_compilation_metrics()`; a recompilation's carries
  `recompile_reason`, Dynamo's guard-failure text ("0/0: tensor 'x' size mismatch at
  index 0. expected 2, actual 3").
- Graph breaks are what Dynamo logs on its "graph_breaks" artifact loggers ("Graph break
  in user code at FILE:LINE / Graph Break Reason: ..."): a handler on those loggers
  keeps them, without printing them unless the user asked for them (TORCH_LOGS).

Importing Dynamo takes over a second, so a script that never compiles must not pay it:
the watcher attaches when the script itself imports torch._dynamo.
"""

from __future__ import annotations

import importlib.abc
import logging
import re
import sys

_LOCATION = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.MULTILINE)
_REASON = re.compile(r"Graph Break Reason: (?P<reason>.*?)(?:\n\s*\nUser code traceback:|\Z)",
                     re.DOTALL)
# Dynamo keeps 64 compilations by default; a long run's first ones must stay.
_METRICS_LIMIT = 100_000


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `callback` once module `name` has finished executing."""

    def __init__(self, name: str, callback):
        self.name, self.callback = name, callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader, callback = spec.loader, self.callback

        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                try:
                    callback()
                except Exception as exc:  # the report must never break the script's import
                    print(f"openneuron report: not watching Dynamo: {exc!r}", file=sys.stderr)

        spec.loader = Loader()
        return spec


class _GraphBreakHandler(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.breaks: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:
            return
        loc = _LOCATION.search(text.split("\n", 1)[0])
        reason = _REASON.search(text)
        self.breaks.append({
            "time": record.created,
            "filename": loc["file"] if loc else None,
            "line": int(loc["line"]) if loc else None,
            "reason": (reason["reason"] if reason else text).strip(),
        })


class DynamoWatcher:
    def __init__(self):
        self._attached = False
        self._hook: _AfterImport | None = None
        self._baseline = 0
        self._handler = _GraphBreakHandler()
        self._loggers: list[tuple[logging.Logger, int, bool]] = []

    def start(self) -> None:
        if "torch._dynamo" in sys.modules:
            self._attach()
        else:
            self._hook = _AfterImport("torch._dynamo", self._attach)
            sys.meta_path.insert(0, self._hook)

    def _attach(self) -> None:
        from torch._dynamo import utils
        from torch._logging import _internal

        self._attached = True
        utils.set_compilation_metrics_limit(_METRICS_LIMIT)
        self._baseline = len(utils.get_compilation_metrics())
        user_asked = _internal.log_state.is_artifact_enabled("graph_breaks")
        for qname in sorted(_internal.log_registry.get_artifact_log_qnames()):
            log = logging.getLogger(qname)
            if getattr(log, "artifact_name", None) != "graph_breaks":
                continue
            self._loggers.append((log, log.level, log.propagate))
            log.addHandler(self._handler)
            if not user_asked:  # collect, but print nothing the user did not ask for
                log.setLevel(logging.DEBUG)
                log.propagate = False

    def stop(self) -> dict:
        """{"compiles": [...], "graph_breaks": [...]}, times in time.time() seconds."""
        if self._hook is not None and self._hook in sys.meta_path:
            sys.meta_path.remove(self._hook)
        for log, level, propagate in self._loggers:
            log.removeHandler(self._handler)
            log.setLevel(level)
            log.propagate = propagate
        if not self._attached:
            return {"compiles": [], "graph_breaks": []}
        from torch._dynamo import utils

        compiles = []
        for m in utils.get_compilation_metrics()[self._baseline:]:
            if m.is_forward is False or m.is_runtime:  # a lazily compiled backward, autotuning
                continue
            compiles.append({
                "compile_id": m.compile_id,
                "function": m.co_name,
                "filename": m.co_filename,
                "line": m.co_firstlineno,
                "time": (m.start_time_us or 0) / 1e6,
                "ops": m.graph_op_count,
                "recompile_reason": m.recompile_reason,
                "failure": f"{m.fail_type}: {m.fail_reason}" if m.fail_type else None,
            })
        return {"compiles": compiles, "graph_breaks": list(self._handler.breaks)}
