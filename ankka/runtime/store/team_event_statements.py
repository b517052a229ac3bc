"""A team's event log and its summary: each function is part of one transaction's work
(docs/teams.md, "Watching a team").

``ankka_team_events`` holds, per team, every change of its backlog's items (added, ready,
claimed, returned, re-prioritised, cancel requested, ended) and every message sent on its
channel, numbered ``seq`` from 1 with no gap. Each is written by the transaction that makes
the change (:mod:`.team_statements`, :mod:`.team_message_statements`), so the log holds what
the backlog and the channel hold, no more and no less, and ``GET /v1/teams/{team}/events``
resumes from it after any ``seq`` without loss or repetition.

Why ``MAX(seq) + 1`` and no database sequence: the writers of a team's items and messages
are ``serial`` writes (:meth:`~.database.Database.write`: one at a time across processes on
PostgreSQL, SQLite's one writer), so a ``seq`` is taken and committed before the next one is
read, and the log's order is its commit order: a reader that has seen ``seq`` N has seen
every event before it. A sequence would hand out numbers in the order transactions began and
let a reader see 7 before 6 committed. Should a writer ever not be serial, the primary key
refuses the second ``seq`` (a store error), it never reorders the log.

:func:`summary` counts a backlog by aggregate: its items by state, the oldest claim held, and
its budget (used and reserved), the same sums the claims are granted from
(:func:`budget_spent`), never by reading every item.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ankka.runtime.store.database import Transaction

__all__ = [
    "ITEM_EVENTS",
    "MESSAGE_EVENT",
    "SCHEMA",
    "STATES",
    "Spent",
    "Summary",
    "TeamEvent",
    "after",
    "append",
    "budget_spent",
    "head",
    "summary",
]

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ankka_team_events (
    team TEXT NOT NULL,
    seq BIGINT NOT NULL,
    event TEXT NOT NULL,
    item TEXT,
    created_by TEXT NOT NULL,
    data TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (team, seq)
)""",
)

# What a team's log records of its items (docs/http-api.md, "A team's events").
ITEM_EVENTS = (
    "item_added",
    "item_ready",
    "item_claimed",
    "item_returned",
    "item_reprioritised",
    "item_cancel_requested",
    "item_ended",
)
MESSAGE_EVENT = "message"
STATES = ("waiting", "ready", "claimed", "completed", "failed", "cancelled")
_FINAL = "('completed', 'failed', 'cancelled')"


@dataclass(frozen=True, slots=True)
class TeamEvent:
    team: str
    seq: int
    event: str
    item: str | None  # the item it is of; a message's id for a message
    created_by: str  # the item's (or message's) creator: who may read it
    data: dict[str, Any]
    at: datetime


def append(
    tx: Transaction,
    team: str,
    event: str,
    *,
    item: str | None,
    created_by: str,
    now: datetime,
    data: Mapping[str, Any],
) -> int:
    """Record ``event`` of ``item`` (``data``: what changed) in ``team``'s log, in the
    transaction making the change; its seq."""
    assert event in ITEM_EVENTS or event == MESSAGE_EVENT, event
    last = tx.rows("SELECT MAX(seq) FROM ankka_team_events WHERE team = ?", (team,))
    seq = int(str(last[0][0])) + 1 if last and last[0][0] is not None else 1
    tx.rows(
        "INSERT INTO ankka_team_events (team, seq, event, item, created_by, data, at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            team, seq, event, item, created_by,
            json.dumps(dict(data), ensure_ascii=False, default=str), now.isoformat(),
        ),
    )  # fmt: skip
    return seq


def head(tx: Transaction, team: str) -> int:
    """The seq of ``team``'s last event (0: none yet)."""
    rows = tx.rows("SELECT MAX(seq) FROM ankka_team_events WHERE team = ?", (team,))
    return int(str(rows[0][0])) if rows and rows[0][0] is not None else 0


def after(
    tx: Transaction, team: str, seq: int, *, creator: str | None, limit: int
) -> tuple[list[TeamEvent], int]:
    """At most ``limit`` of ``team``'s events after ``seq``, in order (``creator`` not None:
    only those of items and messages ``creator`` created), and the seq read up to: the last
    one returned, or the last one looked at when ``creator`` left every one out."""
    rows = tx.rows(
        "SELECT seq, event, item, created_by, data, at FROM ankka_team_events "
        "WHERE team = ? AND seq > ? ORDER BY seq LIMIT ?",
        (team, seq, limit),
    )
    found = [
        TeamEvent(
            team,
            int(str(r[0])),
            str(r[1]),
            None if r[2] is None else str(r[2]),
            str(r[3]),
            dict(json.loads(str(r[4]))),
            datetime.fromisoformat(str(r[5])),
        )
        for r in rows
    ]
    read_to = found[-1].seq if found else seq
    return [e for e in found if creator is None or e.created_by == creator], read_to


@dataclass(frozen=True, slots=True)
class Spent:
    """What a backlog's tasks took of its budget: ``used`` (spent), ``reserved`` (granted to
    a task at work and not spent yet), for iterations and tokens; ``live``: tasks at work."""

    iterations_used: int
    iterations_reserved: int
    tokens_used: int
    tokens_reserved: int
    live: int


def budget_spent(tx: Transaction, team: str) -> Spent:
    """The backlog's spend, by one aggregate over its items' tasks. A task at work holds its
    whole grant (iterations: its budget; tokens: its token grant, or what it spent when more);
    an ended one what it spent (its unspent grant goes back)."""
    total = (
        f"(CAST(COALESCE({tx.json_text('t.usage', 'input_tokens')}, '0') AS BIGINT) + "
        f"CAST(COALESCE({tx.json_text('t.usage', 'output_tokens')}, '0') AS BIGINT))"
    )
    live = f"t.state NOT IN {_FINAL}"
    rows = tx.rows(
        f"SELECT COALESCE(SUM(t.iterations_used), 0), "
        f"COALESCE(SUM(CASE WHEN {live} AND t.budget > t.iterations_used "
        "THEN t.budget - t.iterations_used ELSE 0 END), 0), "
        f"COALESCE(SUM({total}), 0), "
        f"COALESCE(SUM(CASE WHEN {live} AND r.token_budget > {total} "
        f"THEN r.token_budget - {total} ELSE 0 END), 0), "
        f"COALESCE(SUM(CASE WHEN {live} THEN 1 ELSE 0 END), 0) "
        "FROM ankka_team_items i JOIN ankka_tasks t ON t.id = i.task "
        "LEFT JOIN ankka_task_tree r ON r.task = t.id WHERE i.team = ?",
        (team,),
    )
    row = rows[0]
    return Spent(*(int(str(v)) for v in row))


@dataclass(frozen=True, slots=True)
class Summary:
    counts: Mapping[str, int]  # every state, 0 when none
    oldest_claim: tuple[str, datetime] | None  # (item, claimed at) of the oldest claim held
    spent: Spent
    head: int


def summary(tx: Transaction, team: str, *, creator: str | None) -> Summary:
    """``team``'s backlog by aggregate: its items by state and its oldest claim (``creator``
    not None: of the items ``creator`` added only), its budget's spend (the whole backlog's:
    one budget covers every item) and its log's last seq, read first: an event after it may
    show in the counts already (a stream's snapshot misses none), never the other way."""
    last = head(tx, team)
    mine, params = ("", ()) if creator is None else (" AND created_by = ?", (creator,))
    counts = dict.fromkeys(STATES, 0)
    for state, count in tx.rows(
        f"SELECT state, COUNT(*) FROM ankka_team_items WHERE team = ?{mine} GROUP BY state",
        (team, *params),
    ):
        counts[str(state)] = int(str(count))
    oldest = tx.rows(
        f"SELECT id, claimed_at FROM ankka_team_items WHERE team = ? AND state = 'claimed'{mine} "
        "ORDER BY claimed_at, seq LIMIT 1",
        (team, *params),
    )
    claim = (str(oldest[0][0]), datetime.fromisoformat(str(oldest[0][1]))) if oldest else None
    return Summary(counts, claim, budget_spent(tx, team), last)
