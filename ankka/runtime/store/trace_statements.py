"""The trace context recorded with a task, so that every iteration of it, in whichever process
and after whichever restart, joins one trace (docs/observability.md, "One trace per task").

A side table of the task store, ``ankka_task_traces``: one row per task created while tracing
was on, holding the W3C carrier (``traceparent``, and ``tracestate``/``baggage`` when set) of
the span current at its creation (the PUT's or the A2A request's SERVER span, a delegating
step's ``execute_tool``). Its own table (CREATE IF NOT EXISTS), so a store written before it
needs no migration; a task created with tracing off has no row, and its iterations start
traces of their own. Statements, as :mod:`.task_statements`: each runs in the caller's
transaction. Pure SQL over :class:`~ankka.runtime.store.tasks.Transaction`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ankka.runtime.store.tasks import Transaction

__all__ = ["MAX_CONTEXT", "SCHEMA", "get", "record"]

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ankka_task_traces (
    task TEXT PRIMARY KEY,
    context TEXT NOT NULL
)""",
)

MAX_CONTEXT = 4096
"""The most characters of a recorded carrier (``traceparent`` is 55, a ``tracestate`` at most
512): a larger one is not recorded."""

_KEYS = ("traceparent", "tracestate", "baggage")


def record(tx: Transaction, task: str, carrier: Mapping[str, str]) -> None:
    """Record ``carrier`` as ``task``'s trace context; the first one recorded stays (a PUT made
    again, a resumed creation, does not move the task to another trace). Nothing without a
    ``traceparent``, or when it is larger than :data:`MAX_CONTEXT`."""
    kept = {k: v for k, v in carrier.items() if k in _KEYS and isinstance(v, str)}
    if "traceparent" not in kept:
        return
    text = json.dumps(kept, separators=(",", ":"), sort_keys=True)
    if len(text) > MAX_CONTEXT:
        return
    tx.rows(
        "INSERT INTO ankka_task_traces (task, context) VALUES (?, ?) ON CONFLICT (task) DO NOTHING",
        (task, text),
    )


def get(tx: Transaction, task: str) -> dict[str, str]:
    """``task``'s recorded carrier; ``{}`` when none was (or what is there is not one)."""
    rows = tx.rows("SELECT context FROM ankka_task_traces WHERE task = ?", (task,))
    if not rows:
        return {}
    try:
        found = json.loads(str(rows[0][0]))
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if k in _KEYS and isinstance(v, str)}
