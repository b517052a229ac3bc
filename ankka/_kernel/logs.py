"""The one log format of every ``ankka`` command: text for a person, JSON lines for a collector.

Who calls it: ``ankka``'s entry point (:mod:`ankka.cli`) configures logging once, from
``--log-format`` (any command) or ``ANKKA_LOG_FORMAT``, before the command runs, and sets
``ANKKA_LOG_FORMAT`` so that the processes a command starts (``ankka up``'s parts) log alike.
The commands' own status lines (``... listening on URL``, what ``ankka up`` started) go through
:func:`say`, so with ``json`` every line a command writes is one JSON object.

- ``text`` (the default): ``2026-01-02T03:04:05.678Z INFO ankka.gateway: message``; status
  lines are printed as they always were.
- ``json``: one object per line with ``timestamp`` (RFC 3339, UTC), ``level``, ``logger``,
  ``message``, and ``trace_id`` / ``span_id`` when the line was logged inside a recorded span
  (:func:`ankka._kernel.tracing.trace_ids`); ``exception`` holds a traceback; ``object`` is
  the Kubernetes object a kopf line is about.

Nothing here redacts: secrets are kept out of messages where they are made (docs/security.md),
and ``tests/integration/test_secret_canary.py`` reads every command's JSON lines for a canary.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import traceback
from types import TracebackType
from typing import Any, TextIO

from ankka._kernel.tracing import trace_ids

__all__ = [
    "ENV",
    "FORMATS",
    "QUIET",
    "JsonFormatter",
    "TextFormatter",
    "add_option",
    "configure",
    "say",
]

ENV = "ANKKA_LOG_FORMAT"
FORMATS = ("text", "json")

_format = "text"  # the process's format, set by configure() (say() follows it)
# HTTP clients that log every request at INFO: a probe loop or a readiness poll would fill the
# log with one line per request (``GET /health 503`` every 0.1 s while a model loads). Their
# warnings and errors still come through.
QUIET = ("httpx2", "httpx", "httpcore", "httpcore2")


def _timestamp(created: float) -> str:
    moment = dt.datetime.fromtimestamp(created, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TextFormatter(logging.Formatter):
    """``TIMESTAMP LEVEL LOGGER: message`` (and the traceback, if any, on the lines after)."""

    def format(self, record: logging.LogRecord) -> str:
        line = (
            f"{_timestamp(record.created)} {record.levelname} {record.name}: {record.getMessage()}"
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per record (module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "timestamp": _timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        ids = trace_ids()
        if ids is not None:
            entry["trace_id"], entry["span_id"] = ids
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        ref = getattr(record, "k8s_ref", None)  # kopf's per-object loggers
        if isinstance(ref, dict):
            entry["object"] = ref
        return json.dumps(entry, ensure_ascii=False, default=str)


def _chosen(value: str | None) -> str:
    chosen = (value or os.environ.get(ENV) or "text").strip().lower()
    if chosen not in FORMATS:
        raise SystemExit(f"{ENV}={chosen[:20]!r} is no log format: choose text or json")
    return chosen


def add_option(parser: argparse.ArgumentParser) -> None:
    """``--log-format text|json`` (default: ``ANKKA_LOG_FORMAT``, else text)."""
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        default=None,
        help=f"text (the default) or json: one JSON object per line, with timestamp, level, "
        f"logger, message and the trace and span ids; env {ENV}",
    )


def configure(value: str | None = None, *, level: int = logging.INFO) -> str:
    """Log to stderr in ``value`` (else ``ANKKA_LOG_FORMAT``, else text); return the format.

    Replaces the root logger's handlers, so calling it again (or after a library installed
    its own) leaves one. In json, an uncaught exception is a JSON line too."""
    global _format
    _format = _chosen(value)
    os.environ[ENV] = _format  # the processes this one starts log alike
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if _format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    if _format == "json":
        sys.excepthook = _uncaught
    return _format


def _uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    summary = "".join(traceback.format_exception_only(kind, exc)).strip()
    logging.getLogger("ankka").critical("uncaught %s", summary, exc_info=(kind, exc, tb))


def say(text: str, *, stream: TextIO | None = None, level: str = "INFO") -> None:
    """A command's own status line: printed as is in text, a JSON object (logger ``ankka``)
    in json; flushed, since scripts and tests read these lines as they come."""
    out = stream if stream is not None else sys.stdout
    if _format == "json":
        entry = {
            "timestamp": _timestamp(dt.datetime.now(dt.UTC).timestamp()),
            "level": level,
            "logger": "ankka",
            "message": text,
        }
        text = json.dumps(entry, ensure_ascii=False)
    print(text, file=out, flush=True)
