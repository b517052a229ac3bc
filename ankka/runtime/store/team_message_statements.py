"""A team's messages: each function is one transaction's work (docs/teams.md, "Team messages").

A team's channel is the table ``ankka_team_messages``: one row per message, in the order sent
(``seq``, per team), each from a sender (a member or the lead, with the task that sent it; or
a caller of the HTTP API) to one agent of the team or to everyone, of a kind
(:data:`KINDS`) with a bounded text. A message's id names it for good: the same message sent
again under its id is found, not sent twice (a lead's or member's tool call derives the id
from its task, iteration and place, so a call run again after a restart sends nothing new);
a different one under it is refused. ``ankka_team_message_told`` records which agent was told
which message, by which of its tasks and when, written in the commit that records what told
it, so an agent is told each message once. A message sent is also recorded in the team's
event log (:mod:`.team_event_statements`) by the transaction that sends it. The statements
are written once, with ``?`` placeholders, for SQLite and PostgreSQL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from ankka._kernel.errors import RequestError
from ankka.runtime.declare.teams import EVERYONE
from ankka.runtime.records.tasks import Conflict
from ankka.runtime.store import team_event_statements as events
from ankka.runtime.store.database import Transaction

__all__ = [
    "EVERYONE",
    "KINDS",
    "MAX_MESSAGES",
    "MAX_TEXT",
    "SCHEMA",
    "Kind",
    "Message",
    "MessageBody",
    "check_body",
    "get",
    "page",
    "put",
    "told",
    "unread",
]

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ankka_team_messages (
    team TEXT NOT NULL,
    id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    sender TEXT NOT NULL,
    sender_task TEXT,
    recipient TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    digest TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (team, id)
)""",
    "CREATE INDEX IF NOT EXISTS ankka_team_messages_by_seq ON ankka_team_messages (team, seq)",
    """CREATE TABLE IF NOT EXISTS ankka_team_message_told (
    team TEXT NOT NULL,
    message TEXT NOT NULL,
    agent TEXT NOT NULL,
    task TEXT NOT NULL,
    told TEXT NOT NULL,
    PRIMARY KEY (team, message, agent)
)""",
    *events.SCHEMA,  # every message sent is recorded in the team's log
)

Kind = Literal["note", "question", "answer", "blocker"]
KINDS: tuple[Kind, ...] = get_args(Kind)
"""What a message is: a note (for information), a question (an answer is expected), an
answer (to a question), a blocker (the sender cannot go on without something)."""
MAX_TEXT = 2_000  # characters of a message's text: messages are short
MAX_MESSAGES = 100_000  # per team: its channel's most


@dataclass(frozen=True, slots=True)
class MessageBody:
    """What the sender said: the part that must match when a message's id is used again."""

    sender: str  # the agent that sent it, or the caller (over HTTP)
    sender_task: str | None  # the task whose tool call sent it; None over HTTP
    recipient: str  # an agent of the team, or EVERYONE
    kind: str
    text: str

    def digest(self) -> str:
        canonical = json.dumps(
            [self.sender, self.sender_task, self.recipient, self.kind, self.text],
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Message:
    team: str
    id: str
    seq: int
    body: MessageBody
    created_by: str  # whom it was sent for: the caller, or the sending task's creator
    created_at: datetime

    def as_dict(self) -> dict[str, object]:
        """The message as the routes show it (docs/http-api.md, "Team messages")."""
        body = self.body
        return {
            "id": self.id,
            "team": self.team,
            "sender": body.sender,
            "sender_task": body.sender_task,
            "to": body.recipient,
            "kind": body.kind,
            "text": body.text,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
        }


def check_body(body: MessageBody) -> MessageBody:
    """``body``, when its kind is one of :data:`KINDS` and its text within :data:`MAX_TEXT`."""
    if body.kind not in KINDS:
        raise RequestError(
            f"kind {body.kind[:40]!r} is not a message kind; the kinds are {', '.join(KINDS)}"
        )
    if not body.text.strip():
        raise RequestError("a message's text is empty; say something")
    if len(body.text) > MAX_TEXT:
        raise RequestError(
            f"a message's text is at most {MAX_TEXT} characters (this one has "
            f"{len(body.text)}); send a short message"
        )
    return body


_COLUMNS = "id, seq, sender, sender_task, recipient, kind, text, created_by, created_at"


def _message(team: str, row: Sequence[object]) -> Message:
    return Message(
        team=team,
        id=str(row[0]),
        seq=int(str(row[1])),
        body=MessageBody(
            str(row[2]),
            None if row[3] is None else str(row[3]),
            str(row[4]),
            str(row[5]),
            str(row[6]),
        ),
        created_by=str(row[7]),
        created_at=datetime.fromisoformat(str(row[8])),
    )


def get(tx: Transaction, team: str, message: str) -> Message | None:
    rows = tx.rows(
        f"SELECT {_COLUMNS} FROM ankka_team_messages WHERE team = ? AND id = ?", (team, message)
    )
    return _message(team, rows[0]) if rows else None


def put(
    tx: Transaction,
    team: str,
    message: str,
    body: MessageBody,
    *,
    created_by: str,
    now: datetime,
) -> tuple[Message, bool]:
    """Send ``message`` on ``team``'s channel (or find it, when the same one was sent under
    its id before: False); a different message under the id is refused (409)."""
    check_body(body)
    digest = body.digest()
    found = tx.rows(
        "SELECT digest FROM ankka_team_messages WHERE team = ? AND id = ?", (team, message)
    )
    if found:
        if str(found[0][0]) != digest:
            raise Conflict(
                f"message {message!r} of team {team!r} was already sent with a different "
                "sender, recipient, kind or text; a message id names one message for good"
            )
        again = get(tx, team, message)
        assert again is not None
        return again, False
    last = tx.rows("SELECT MAX(seq) FROM ankka_team_messages WHERE team = ?", (team,))
    seq = int(str(last[0][0])) if last and last[0][0] is not None else 0
    if seq >= MAX_MESSAGES:
        raise RequestError(f"team {team!r}'s channel holds {MAX_MESSAGES} messages, its most")
    tx.rows(
        f"INSERT INTO ankka_team_messages (team, {_COLUMNS}, digest) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            team, message, seq + 1, body.sender, body.sender_task, body.recipient, body.kind,
            body.text, created_by, now.isoformat(), digest,
        ),
    )  # fmt: skip
    made = get(tx, team, message)
    assert made is not None
    events.append(
        tx, team, events.MESSAGE_EVENT, item=message, created_by=created_by, now=now,
        data=made.as_dict(),
    )  # fmt: skip
    return made, True


def page(
    tx: Transaction, team: str, *, after: int, limit: int, creator: str | None
) -> list[Message]:
    """At most ``limit`` of ``team``'s messages after ``seq`` ``after``, in the order sent;
    ``creator`` not None: only the messages sent for that creator (a caller who may read no
    one else's)."""
    mine, params = ("", ()) if creator is None else (" AND created_by = ?", (creator,))
    rows = tx.rows(
        f"SELECT {_COLUMNS} FROM ankka_team_messages WHERE team = ? AND seq > ?{mine} "
        "ORDER BY seq LIMIT ?",
        (team, after, *params, limit),
    )
    return [_message(team, row) for row in rows]


def unread(
    tx: Transaction,
    teams: Sequence[str],
    agent: str,
    *,
    creator: str | None,
    limit: int,
) -> list[Message]:
    """The messages of ``teams`` sent to ``agent`` (by name, or to everyone by another) that
    it has not been told, in the order sent (at most ``limit``: the rest the next time);
    ``creator`` not None: only those sent for that creator."""
    if not teams:
        return []
    marks = ", ".join("?" for _ in teams)
    mine, params = ("", ()) if creator is None else (" AND m.created_by = ?", (creator,))
    rows = tx.rows(
        f"SELECT m.team, {', '.join(f'm.{c.strip()}' for c in _COLUMNS.split(','))} "
        f"FROM ankka_team_messages m WHERE m.team IN ({marks}) "
        "AND (m.recipient = ? OR (m.recipient = ? AND (m.sender_task IS NULL OR m.sender <> ?)))"
        f"{mine} AND NOT EXISTS (SELECT 1 FROM ankka_team_message_told t WHERE t.team = m.team "
        "AND t.message = m.id AND t.agent = ?) ORDER BY m.created_at, m.team, m.seq LIMIT ?",
        (*teams, agent, EVERYONE, agent, *params, agent, limit),
    )
    return [_message(str(row[0]), row[1:]) for row in rows]


def told(
    tx: Transaction, agent: str, task: str, messages: Sequence[Message], now: datetime
) -> None:
    """``agent`` was told ``messages`` by its task ``task`` (in the transaction that records
    what told it)."""
    for message in messages:
        tx.rows(
            "INSERT INTO ankka_team_message_told (team, message, agent, task, told) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (team, message, agent) DO NOTHING",
            (message.team, message.id, agent, task, now.isoformat()),
        )
