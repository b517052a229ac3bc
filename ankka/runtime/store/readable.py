"""What a caller may read, as a store query says it, and the cursor a listing pages by.

A listing (``GET /v1/approvals``, the console's lists, A2A ``tasks/list``) must not read a fixed
window of every caller's rows and then filter: another caller's volume would then hide one's
own (issue 31, item 3). :func:`readers` turns the session policy's read right
(:meth:`~ankka.runtime.declare.policy.SessionPolicy.allows`) for one caller into a value, and
:func:`clause` into a ``WHERE`` condition over a row's creator and agent columns, so the store
returns only the rows the caller may read, a page at a time, after a :class:`Cursor`.

A session's creator and agent are its first journal record (``session_opened``);
:func:`opened` is the join that finds it for a row naming a session, written once for both
databases with the JSON accessor each understands (``Transaction.json_text``). Pure: it
builds statements, and runs one only in :func:`readable_sessions`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass

from ankka._kernel.errors import RequestError
from ankka._kernel.identity import is_platform
from ankka.runtime.declare.policy import SessionPolicy
from ankka.runtime.store.database import Transaction

__all__ = [
    "EVERYONE",
    "MAX_LIMIT",
    "BadCursor",
    "Cursor",
    "Readers",
    "clause",
    "decode_cursor",
    "encode_cursor",
    "opened",
    "readable_sessions",
    "readers",
]

MAX_LIMIT = 500
"""The most rows one page of a listing answers (``?limit=``'s bound)."""
_MAX_CURSOR = 2048

Cursor = tuple[str, str]
"""The sort key of a page's last row (a time or name, and an id): the next page starts after."""


class BadCursor(RequestError):
    """A cursor this runtime did not give (422)."""

    kind = "invalid_cursor"


@dataclass(frozen=True, slots=True)
class Readers:
    """Whose rows one caller may read. ``caller`` None: every row (the platform)."""

    caller: str | None
    granted: tuple[str, ...] = ()  # agents whose own access gives the caller read
    own: tuple[str, ...] = ()  # agents with an access of their own
    service: bool = False  # the service's access gives the caller read


EVERYONE = Readers(None)


def readers(policy: SessionPolicy, caller: str | None) -> Readers:
    """The rows ``caller`` may read under ``policy`` (None or the platform: every row)."""
    if caller is None or is_platform(caller):
        return EVERYONE
    own = tuple(sorted(policy.agents))
    granted = tuple(a for a in own if policy.agents[a].grants(caller, "read"))
    return Readers(caller, granted, own, policy.service.grants(caller, "read"))


def _marks(values: Sequence[str]) -> str:
    return ", ".join("?" for _ in values)


def clause(who: Readers, creator: str, agent: str) -> tuple[str, list[object]]:
    """The condition (``?`` placeholders) that a row whose creator and agent are the SQL
    expressions ``creator`` and ``agent`` is one ``who`` may read: as
    :meth:`SessionPolicy.allows` decides (no creator recorded: anyone's)."""
    if who.caller is None or (who.service and not who.own):
        return "1 = 1", []
    parts = [f"{creator} IS NULL", f"{creator} = ?"]
    params: list[object] = [who.caller]
    if who.granted:
        parts.append(f"{agent} IN ({_marks(who.granted)})")
        params += who.granted
    if who.service:
        parts.append(f"({agent} IS NULL OR {agent} NOT IN ({_marks(who.own)}))")
        params += who.own
    return f"({' OR '.join(parts)})", params


def encode_cursor(key: Cursor) -> str:
    """The opaque form of a page's last key, as an answer's ``next`` gives it."""
    raw = json.dumps(list(key), ensure_ascii=False, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str, *, name: str = "cursor") -> Cursor:
    """The key an :func:`encode_cursor` gave, or :class:`BadCursor` naming ``?name=``."""
    refused = BadCursor(
        f"?{name}= is not a cursor this runtime gave: pass the 'next' of the previous answer "
        "unchanged (or leave it out for the first page)"
    )
    if not text or len(text) > _MAX_CURSOR:
        raise refused
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError) as exc:
        raise refused from exc
    if not (isinstance(data, list) and len(data) == 2 and all(isinstance(v, str) for v in data)):
        raise refused
    return data[0], data[1]


def opened(tx: Transaction, session: str, alias: str = "opened") -> tuple[str, str, str]:
    """A ``LEFT JOIN`` of the first record of the session the SQL ``session`` names, when it
    is ``session_opened``, and the SQL of that session's creator and agent (NULL without)."""
    join = (
        f"LEFT JOIN {tx.journal_table()} {alias} ON {alias}.session = {session} "
        f"AND {alias}.seq = 1 AND {alias}.kind = 'session_opened'"
    )
    body = f"{alias}.body"
    return join, tx.json_text(body, "caller"), tx.json_text(body, "agent")


def readable_sessions(
    tx: Transaction, who: Readers, *, after: Cursor | None, limit: int
) -> list[Cursor]:
    """The sessions ``who`` may read, most recently active first, after ``after``: each as
    its cursor key (its last event's time as ISO text, its name)."""
    join, creator, agent = opened(tx, "s.session")
    condition, params = clause(who, creator, agent)
    where = [condition]
    if after is not None:
        stamp = tx.stamp()
        where.append(f"(s.last < {stamp} OR (s.last = {stamp} AND s.session < ?))")
        params += [after[0], after[0], after[1]]
    # Each session's last time first, then its opener's record once per session (not per event).
    rows = tx.rows(
        f"SELECT s.session, s.last FROM (SELECT session, MAX(at) AS last FROM "
        f"{tx.journal_table()} GROUP BY session) s {join} WHERE {' AND '.join(where)} "
        f"ORDER BY s.last DESC, s.session DESC LIMIT {int(limit)}",
        params,
    )
    return [(r[1] if isinstance(r[1], str) else r[1].isoformat(), str(r[0])) for r in rows]
