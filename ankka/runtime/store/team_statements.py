"""The backlog's transactions: each function is one transaction's work (docs/teams.md).

A team's backlog is the table ``ankka_team_items``: one row per item, its body, its state
(``waiting`` on items it depends on, ``ready``, ``claimed``, ``completed``, ``failed``,
``cancelled``), and its claim: the member agent and instance working it, the process that
holds the claim and until when (a lease, renewed by that process, :func:`renew`). An item is
worked as a task whose id is derived from the team and the item (:func:`task_id`): claiming
it creates that task for the member's instance, or, when the item came back to the backlog
after its claim ran out (:func:`expire`), assigns the same task again, whose journal session
keeps what was done, so no recorded model call is made again. ``ankka_team_claims`` keeps
every claim ever made, in order (who worked what, when); ``ankka_team_priorities`` each
item's priority (members claim the highest-priority ready item first, ties in the order
added). Every change of an item is also recorded in the team's event log
(:mod:`.team_event_statements`) by the transaction that makes it. The statements are written
once, with ``?`` placeholders, for SQLite and PostgreSQL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ankka._kernel.errors import NotFound, RequestError
from ankka.runtime.records.tasks import Conflict, InstanceState, TaskSpec, TaskState
from ankka.runtime.store import task_statements as tasks
from ankka.runtime.store import team_event_statements as events
from ankka.runtime.store.tasks import Ended, Transaction

__all__ = [
    "MAX_PRIORITY",
    "SCHEMA",
    "Claimed",
    "Grant",
    "Item",
    "ItemBody",
    "Readable",
    "cancel",
    "check_priority",
    "claim_next",
    "expire",
    "get",
    "items",
    "news",
    "put",
    "renew",
    "reprioritise",
    "settle",
    "task_id",
    "told",
]

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ankka_team_items (
    team TEXT NOT NULL,
    id TEXT NOT NULL,
    type TEXT NOT NULL,
    body TEXT NOT NULL,
    digest TEXT NOT NULL,
    state TEXT NOT NULL,
    seq BIGINT NOT NULL,
    task TEXT NOT NULL,
    assignee TEXT,
    claim_agent TEXT,
    claim_instance TEXT,
    claim_owner TEXT,
    claim_until DOUBLE PRECISION,
    claimed_at TEXT,
    claims INTEGER NOT NULL,
    result TEXT,
    reason TEXT,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (team, id)
)""",
    "CREATE INDEX IF NOT EXISTS ankka_team_items_by_state ON ankka_team_items (team, state, seq)",
    "CREATE INDEX IF NOT EXISTS ankka_team_items_by_owner ON ankka_team_items (claim_owner)",
    """CREATE TABLE IF NOT EXISTS ankka_team_item_deps (
    team TEXT NOT NULL,
    item TEXT NOT NULL,
    depends_on TEXT NOT NULL,
    PRIMARY KEY (team, item, depends_on)
)""",
    """CREATE TABLE IF NOT EXISTS ankka_team_claims (
    team TEXT NOT NULL,
    item TEXT NOT NULL,
    number INTEGER NOT NULL,
    agent TEXT NOT NULL,
    instance TEXT NOT NULL,
    owner TEXT NOT NULL,
    claimed_at TEXT NOT NULL,
    PRIMARY KEY (team, item, number)
)""",
    # Each item's priority (docs/teams.md, "Priorities"): a table of its own, so a store
    # written before priorities needs no migration (an item with no row has priority 0).
    """CREATE TABLE IF NOT EXISTS ankka_team_priorities (
    team TEXT NOT NULL,
    item TEXT NOT NULL,
    priority BIGINT NOT NULL,
    PRIMARY KEY (team, item)
)""",
    # The items a lead's task added (its backlog tools, docs/teams.md): that task hears
    # each one's end once (``told``: when it was told, NULL until then).
    """CREATE TABLE IF NOT EXISTS ankka_team_planned (
    team TEXT NOT NULL,
    item TEXT NOT NULL,
    task TEXT NOT NULL,
    told TEXT,
    PRIMARY KEY (team, item)
)""",
    "CREATE INDEX IF NOT EXISTS ankka_team_planned_by_task ON ankka_team_planned (task, told)",
    *events.SCHEMA,  # every change is recorded in the team's log
)

FINAL = ("completed", "failed", "cancelled")
TEAMS_CALLER = "ankka://platform/teams"  # who gives a team's member instances their items
_UNCLAIMED = ("ready", "waiting")
MAX_ITEMS = 10_000  # per team: the budget's sum reads them all
MAX_PRIORITY = 1_000_000_000  # either way: an item's priority is within +-this
_COLUMNS = (
    "id, type, body, state, task, claim_agent, claim_instance, claimed_at, claims, result, "
    "reason, created_by, created_at, updated_at, claim_until"
)
# An item's row with its priority (0 when it has no row of its own): what every read selects.
_SELECTED = ", ".join(f"i.{c.strip()}" for c in _COLUMNS.split(",")) + ", COALESCE(p.priority, 0)"
_FROM = "ankka_team_items i LEFT JOIN ankka_team_priorities p ON p.team = i.team AND p.item = i.id"


@dataclass(frozen=True, slots=True)
class ItemBody:
    """What the creator of an item said: the part that must match when its id is reused."""

    type: str
    instructions: str
    depends_on: tuple[str, ...] = ()
    assignee: str | None = None
    priority: int = 0  # as it was given; the item's priority now may differ (reprioritise)

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": self.type,
            "instructions": self.instructions,
            "depends_on": list(self.depends_on),
            "assignee": self.assignee,
        }
        if self.priority:  # left out at 0: a body sent before priorities has the same digest
            body["priority"] = self.priority
        return body

    def digest(self) -> str:
        canonical = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Item:
    team: str
    id: str
    body: ItemBody
    state: str
    task: str
    claimed_by: tuple[str, str] | None  # (member agent, instance)
    claimed_at: datetime | None
    claims: int
    result: Any
    reason: str | None
    created_by: str
    created_at: datetime
    updated_at: datetime
    claim_until: float | None = None
    priority: int = 0  # now: members claim the highest first (docs/teams.md)

    @property
    def final(self) -> bool:
        return self.state in FINAL


@dataclass(frozen=True, slots=True)
class Grant:
    """What the claiming member's type allows one task: iterations and tokens (None: no
    token budget of its own)."""

    iterations: int
    tokens: int | None


@dataclass(frozen=True, slots=True)
class Claimed:
    item: Item
    created: bool  # the item's task was made now (else: assigned again, its work kept)


def task_id(team: str, item: str) -> str:
    """The task that works ``item``: derived, so a claim made again finds the same one."""
    plain = f"team:{team}:{item}"
    if len(plain) <= 128:
        return plain
    return "team:d-" + hashlib.sha256(plain.encode()).hexdigest()[:40]


def _item(team: str, row: Sequence[Any]) -> Item:
    data = json.loads(row[2])
    body = ItemBody(
        str(data["type"]),
        str(data["instructions"]),
        tuple(data.get("depends_on", ())),
        data.get("assignee"),
        int(data.get("priority", 0)),
    )
    return Item(
        team=team,
        id=row[0],
        body=body,
        state=row[3],
        task=row[4],
        claimed_by=(row[5], row[6]) if row[5] is not None and row[3] not in _UNCLAIMED else None,
        claimed_at=datetime.fromisoformat(row[7]) if row[7] else None,
        claims=int(row[8]),
        result=json.loads(row[9]) if row[9] is not None else None,
        reason=row[10],
        created_by=row[11],
        created_at=datetime.fromisoformat(row[12]),
        updated_at=datetime.fromisoformat(row[13]),
        claim_until=row[14],
        priority=int(row[15]),
    )


Readable = Callable[[str], bool]
"""Whether the caller may read an item of this team that the creator it is given created."""


def get(tx: Transaction, team: str, item: str) -> Item | None:
    rows = tx.rows(f"SELECT {_SELECTED} FROM {_FROM} WHERE i.team = ? AND i.id = ?", (team, item))
    return _item(team, rows[0]) if rows else None


def items(tx: Transaction, team: str, limit: int = MAX_ITEMS) -> list[Item]:
    rows = tx.rows(
        f"SELECT {_SELECTED} FROM {_FROM} WHERE i.team = ? ORDER BY i.seq LIMIT ?",
        (team, limit),
    )
    return [_item(team, row) for row in rows]


def put(
    tx: Transaction,
    team: str,
    item: str,
    body: ItemBody,
    *,
    created_by: str,
    may_read: Readable,
    now: datetime,
    planned_by: str | None = None,
) -> tuple[Item, bool]:
    """Add ``item`` to the backlog (or find it, when the same body was sent before). Every
    item it depends on must be on the backlog already and one ``created_by`` may read
    (``may_read`` of its creator). ``planned_by``: the lead's task that adds it (it hears the
    item's end, :func:`news`)."""
    existing = get(tx, team, item)
    if existing is not None:
        if existing.body.digest() != body.digest():
            raise Conflict(
                f"item {item!r} of team {team!r} already exists with a different body (type, "
                "instructions, depends_on or assignee); an item id names one item for good"
            )
        return existing, False
    # An item its creator may not read is answered exactly as a missing one: depending on
    # it would show its result to the new item's task, and its state in the new item's.
    found = {d: _state(tx, team, d) for d in body.depends_on}
    states = {d: f[0] for d, f in found.items() if f is not None and may_read(f[1])}
    missing = sorted(set(body.depends_on) - set(states))
    if missing:
        raise RequestError(
            f"item {item!r} depends on {', '.join(map(repr, missing))}, not on team "
            f"{team!r}'s backlog or not {created_by!r}'s to read; add the items it depends "
            f"on first, or name items {created_by!r} may read"
        )
    count = tx.rows(
        "SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM ankka_team_items WHERE team = ?", (team,)
    )
    if int(count[0][0]) >= MAX_ITEMS:
        raise RequestError(f"team {team!r}'s backlog holds {MAX_ITEMS} items, its most")
    gone = [d for d, s in states.items() if s in ("failed", "cancelled")]
    state = "ready" if all(s == "completed" for s in states.values()) else "waiting"
    reason = None
    if gone:
        state, reason = "cancelled", f"it depends on {gone[0]!r}, which was {states[gone[0]]}"
    stamp = now.isoformat()
    tx.rows(
        f"INSERT INTO ankka_team_items (team, {_COLUMNS.replace(', claim_until', '')}, digest, "
        "seq, assignee) VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, NULL, 0, NULL, ?, ?, ?, ?, ?, ?, ?)",
        (
            team, item, body.type, json.dumps(body.as_dict(), ensure_ascii=False), state,
            task_id(team, item), reason, created_by, stamp, stamp, body.digest(),
            int(count[0][1]) + 1, body.assignee,
        ),
    )  # fmt: skip
    for dependency in body.depends_on:
        tx.rows(
            "INSERT INTO ankka_team_item_deps (team, item, depends_on) VALUES (?, ?, ?)",
            (team, item, dependency),
        )
    if body.priority:
        _set_priority(tx, team, item, body.priority)
    if planned_by is not None:
        tx.rows(
            "INSERT INTO ankka_team_planned (team, item, task, told) VALUES (?, ?, ?, NULL)",
            (team, item, planned_by),
        )
    made = get(tx, team, item)
    assert made is not None
    _tell(
        tx, made, "item_added", now, type=body.type, state=state, priority=body.priority,
        assignee=body.assignee, depends_on=list(body.depends_on), reason=reason,
    )  # fmt: skip
    if made.final:
        _ended(tx, made, now)
    return made, True


def _tell(tx: Transaction, item: Item, event: str, now: datetime, **data: Any) -> None:
    """Record ``event`` of ``item`` in its team's log (this transaction's change)."""
    events.append(
        tx, item.team, event, item=item.id, created_by=item.created_by, now=now, data=data
    )


def _ended(tx: Transaction, item: Item, now: datetime) -> None:
    claimed = item.claimed_by
    _tell(
        tx, item, "item_ended", now, state=item.state, reason=item.reason, task=item.task,
        claimed_by={"agent": claimed[0], "instance": claimed[1]} if claimed else None,
    )  # fmt: skip


def _set_priority(tx: Transaction, team: str, item: str, priority: int) -> None:
    check_priority(priority)
    tx.rows(
        "INSERT INTO ankka_team_priorities (team, item, priority) VALUES (?, ?, ?) "
        "ON CONFLICT (team, item) DO UPDATE SET priority = excluded.priority",
        (team, item, priority),
    )


def check_priority(priority: int) -> int:
    if not -MAX_PRIORITY <= priority <= MAX_PRIORITY:
        raise RequestError(
            f"priority {priority} is out of range: an integer from {-MAX_PRIORITY} to "
            f"{MAX_PRIORITY} (higher is claimed first; 0 by default)"
        )
    return priority


def reprioritise(tx: Transaction, team: str, item: str, priority: int, now: datetime) -> Item:
    """Give ``item`` the priority ``priority``: among the ready items a member accepts, the
    highest is claimed first. An item that has ended is refused (its priority no longer
    decides anything); one claimed keeps it for when it comes back to the backlog."""
    check_priority(priority)
    found = get(tx, team, item)
    if found is None:
        raise NotFound(f"team {team!r} has no item {item!r}")
    if found.final:
        raise Conflict(
            f"item {item!r} of team {team!r} is {found.state}: its priority no longer decides "
            "anything, so it was not changed"
        )
    _set_priority(tx, team, item, priority)
    tx.rows(
        "UPDATE ankka_team_items SET updated_at = ? WHERE team = ? AND id = ?",
        (now.isoformat(), team, item),
    )
    again = get(tx, team, item)
    assert again is not None
    _tell(tx, again, "item_reprioritised", now, priority=priority)
    return again


def _state(tx: Transaction, team: str, item: str) -> tuple[str, str] | None:
    """The item's state and creator, or None when it is not on the backlog."""
    rows = tx.rows(
        "SELECT state, created_by FROM ankka_team_items WHERE team = ? AND id = ?", (team, item)
    )
    return (str(rows[0][0]), str(rows[0][1])) if rows else None


def renew(tx: Transaction, owner: str, until: float) -> int:
    """Renew every claim ``owner`` holds; how many it holds."""
    rows = tx.rows(
        "UPDATE ankka_team_items SET claim_until = ? WHERE claim_owner = ? AND state = 'claimed' "
        "RETURNING id",
        (until, owner),
    )
    return len(rows)


def expire(tx: Transaction, team: str, now: float, stamp: datetime) -> list[Item]:
    """Return to the backlog every item whose claim ran out (its process died): its member
    instance is terminated (its task goes back to pending, its work kept) and its lease
    dropped, so no process takes that instance up again; the items as they are now."""
    rows = tx.rows(
        "SELECT id, claim_agent, claim_instance FROM ankka_team_items WHERE team = ? "
        "AND state = 'claimed' AND claim_until < ?",
        (team, now),
    )
    back: list[Item] = []
    for item, agent, instance in rows:
        found = tasks.get_instance(tx, agent, instance)
        if found is not None and found.state == InstanceState.ACTIVE:
            tasks.set_instance(tx, agent, instance, InstanceState.TERMINATED, stamp)
        tx.rows(
            "UPDATE ankka_instances SET lease_owner = NULL, lease_until = NULL "
            "WHERE agent = ? AND id = ?",
            (agent, instance),
        )
        why = "its claim ran out (the process holding it stopped renewing it)"
        again = _unclaim(tx, team, item, "ready", stamp, logged=False)
        _tell(tx, again, "item_returned", stamp, agent=agent, instance=instance, reason=why)
        back.append(again)
    return back


def _unclaim(
    tx: Transaction,
    team: str,
    item: str,
    state: str,
    stamp: datetime,
    *,
    result: str | None = None,
    reason: str | None = None,
    logged: bool = True,
) -> Item:
    """Put ``item`` in ``state`` with no claim held; recorded in the log as ``item_ended``
    (a final state) or ``item_ready``, unless the caller records what it was (``logged``
    False: an item returned after its claim ran out)."""
    tx.rows(
        "UPDATE ankka_team_items SET state = ?, claim_owner = NULL, claim_until = NULL, "
        "result = ?, reason = ?, updated_at = ? WHERE team = ? AND id = ?",
        (state, result, reason, stamp.isoformat(), team, item),
    )
    found = get(tx, team, item)
    assert found is not None
    if logged and found.final:
        _ended(tx, found, stamp)
    elif logged and state == "ready":
        _tell(tx, found, "item_ready", stamp)
    return found


def settle(tx: Transaction, team: str, stamp: datetime) -> list[Item]:
    """End every claimed item whose task has ended, as its task ended; then make ready the
    items waiting on it (all they depend on completed), or cancel them (it failed or was
    cancelled), at any depth. The items ended, in order."""
    rows = tx.rows(
        "SELECT i.id, t.state, t.result, t.reason FROM ankka_team_items i JOIN ankka_tasks t "
        "ON t.id = i.task WHERE i.team = ? AND i.state IN ('claimed', 'ready') "
        "AND t.state IN ('completed', 'failed', 'cancelled') ORDER BY i.seq",
        (team,),
    )
    ended: list[Item] = []
    for item, state, result, reason in rows:
        done = _unclaim(tx, team, item, str(state), stamp, result=result, reason=reason)
        ended += [done, *_after(tx, team, item, str(state), stamp)]
    return ended


def _after(tx: Transaction, team: str, item: str, state: str, stamp: datetime) -> list[Item]:
    """What ``item``'s end does to the items waiting on it."""
    waiting = tx.rows(
        "SELECT d.item FROM ankka_team_item_deps d JOIN ankka_team_items i ON i.team = d.team "
        "AND i.id = d.item WHERE d.team = ? AND d.depends_on = ? AND i.state = 'waiting'",
        (team, item),
    )
    ended: list[Item] = []
    for (dependant,) in waiting:
        if state != "completed":
            why = f"it depends on {item!r}, which was {state}"
            gone = _unclaim(tx, team, dependant, "cancelled", stamp, reason=why)
            ended += [gone, *_after(tx, team, dependant, "cancelled", stamp)]
            continue
        open_deps = tx.rows(
            "SELECT COUNT(*) FROM ankka_team_item_deps d JOIN ankka_team_items i ON i.team = "
            "d.team AND i.id = d.depends_on WHERE d.team = ? AND d.item = ? "
            "AND i.state <> 'completed'",
            (team, dependant),
        )
        if int(open_deps[0][0]) == 0:
            _unclaim(tx, team, dependant, "ready", stamp)
    return ended


def _remaining(
    tx: Transaction, team: str, iterations: int | None, tokens: int | None
) -> tuple[int | None, int | None, bool]:
    """What is left of the backlog's budget (None: no such budget), and whether any item's
    task still holds a grant (it may give some back when it ends): from the aggregate the
    team's summary shows (:func:`.team_event_statements.budget_spent`)."""
    spent = events.budget_spent(tx, team)
    used_iterations = spent.iterations_used + spent.iterations_reserved
    used_tokens = spent.tokens_used + spent.tokens_reserved
    left_iterations = iterations - used_iterations if iterations is not None else None
    left_tokens = tokens - used_tokens if tokens is not None else None
    return left_iterations, left_tokens, spent.live > 0


def claim_next(
    tx: Transaction,
    team: str,
    *,
    member: tuple[str, str],
    owner: str,
    until: float,
    accepts: Mapping[str, Grant],
    budget: tuple[int | None, int | None],
    now: datetime,
) -> Claimed | list[Item] | None:
    """Claim the ready item ``member`` (agent, instance) accepts of the highest priority (of
    those, the first added), under a lease until
    ``until``: its task is created (or, back on the backlog, assigned again) for that
    instance, granted at most what is left of the backlog's ``budget``. None when the
    instance holds a claim already or nothing is ready for it; the items ended instead when
    the budget is spent and no task holds any of it."""
    agent, instance = member
    held = tx.rows(
        "SELECT 1 FROM ankka_team_items WHERE claim_agent = ? AND claim_instance = ? "
        "AND state = 'claimed'",
        (agent, instance),
    )
    if held or not accepts:
        return None
    marks = ", ".join("?" for _ in accepts)
    rows = tx.rows(
        f"SELECT {_SELECTED} FROM {_FROM} WHERE i.team = ? AND i.state = 'ready' "
        f"AND i.type IN ({marks}) AND (i.assignee IS NULL OR i.assignee = ?) "
        "AND (i.claim_agent IS NULL OR i.claim_agent = ?) "
        "ORDER BY COALESCE(p.priority, 0) DESC, i.seq LIMIT 1",
        (team, *accepts, agent, agent),
    )
    if not rows:
        return None
    item = _item(team, rows[0])
    grant = accepts[item.body.type]
    existing = tasks.get(tx, item.task)
    if existing is None:
        left_iterations, left_tokens, live = _remaining(tx, team, *budget)
        if (left_iterations is not None and left_iterations < 1) or (
            left_tokens is not None and left_tokens < 1
        ):
            if live:
                return None  # a task at work may give some back
            return _exhausted(tx, team, item, now)
        iterations = grant.iterations
        if left_iterations is not None:
            iterations = min(iterations, left_iterations)
        tokens = _tokens(grant.tokens, left_tokens)
    elif existing.state != TaskState.PENDING:
        return None  # ended (settled next), or still its last instance's
    else:
        iterations, tokens = existing.budget, None
    spec = TaskSpec(agent, item.body.type, item.body.instructions, (), _deps(tx, team, item))
    # The member instance is the team's, not a caller's: made (and given each item) as the
    # platform, so items of different creators reach it; the task is the item creator's.
    tasks.put(
        tx,
        item.task,
        spec,
        instance=instance,
        budget=iterations,
        tokens=tokens,
        created_by=TEAMS_CALLER,
        may_read=tasks.read_any,
        now=now,
    )
    tx.rows("UPDATE ankka_tasks SET created_by = ? WHERE id = ?", (item.created_by, item.task))
    number = item.claims + 1
    stamp = now.isoformat()
    tx.rows(
        "UPDATE ankka_team_items SET state = 'claimed', claim_agent = ?, claim_instance = ?, "
        "claim_owner = ?, claim_until = ?, claimed_at = ?, claims = ?, updated_at = ? "
        "WHERE team = ? AND id = ?",
        (agent, instance, owner, until, stamp, number, stamp, team, item.id),
    )
    tx.rows(
        "INSERT INTO ankka_team_claims (team, item, number, agent, instance, owner, claimed_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (team, item.id, number, agent, instance, owner, stamp),
    )
    claimed = get(tx, team, item.id)
    assert claimed is not None
    _tell(
        tx, claimed, "item_claimed", now, agent=agent, instance=instance, claims=number,
        task=item.task,
    )  # fmt: skip
    return Claimed(claimed, existing is None)


def _tokens(own: int | None, left: int | None) -> int | None:
    if left is None:
        return own
    return left if own is None else min(own, left)


def _deps(tx: Transaction, team: str, item: Item) -> tuple[str, ...]:
    """The tasks of the items ``item`` depends on: their results are shown to its model."""
    return tuple(task_id(team, d) for d in item.body.depends_on)


def _exhausted(tx: Transaction, team: str, item: Item, now: datetime) -> list[Item]:
    why = f"team {team!r}'s backlog budget is spent; item {item.id!r} was not started"
    failed = _unclaim(tx, team, item.id, "failed", now, reason=why)
    return [failed, *_after(tx, team, item.id, "failed", now)]


def cancel(tx: Transaction, team: str, item: str, now: datetime) -> tuple[Item, list[Ended]]:
    """Cancel ``item``: its task, when it has one at work (at once, or at the end of the
    iteration in progress, as a task's cancel is), else the item itself; the items waiting
    on it are cancelled with it. The item as it is now, and the tasks that ended."""
    found = get(tx, team, item)
    if found is None:
        raise NotFound(f"team {team!r} has no item {item!r}")
    if found.final:
        return found, []
    record = tasks.get(tx, found.task)
    ended: list[Ended] = []
    if record is not None and not record.final:
        ended = tasks.cancel(tx, found.task, now)[1]
    else:
        _unclaim(tx, team, item, "cancelled", now, reason="cancelled")
        _after(tx, team, item, "cancelled", now)
    settle(tx, team, now)
    again = get(tx, team, item)
    assert again is not None
    if not again.final:  # its task stops at the end of the iteration in progress
        _tell(tx, again, "item_cancel_requested", now)
    return again, ended


def news(tx: Transaction, task: str, limit: int = 50) -> list[Item]:
    """The items the lead's task ``task`` added that have ended and of which it has not been
    told, in the order they ended (at most ``limit``: the rest at its next iteration)."""
    rows = tx.rows(
        f"SELECT i.team, {_SELECTED} FROM ankka_team_planned n JOIN ankka_team_items i "
        "ON i.team = n.team AND i.id = n.item LEFT JOIN ankka_team_priorities p "
        "ON p.team = i.team AND p.item = i.id WHERE n.task = ? AND n.told IS NULL "
        "AND i.state IN ('completed', 'failed', 'cancelled') ORDER BY i.updated_at, i.seq LIMIT ?",
        (task, limit),
    )
    return [_item(str(row[0]), row[1:]) for row in rows]


def told(tx: Transaction, task: str, ended: Sequence[Item], now: datetime) -> None:
    """``task`` was told of ``ended`` (in the transaction that records what told it)."""
    for item in ended:
        tx.rows(
            "UPDATE ankka_team_planned SET told = ? WHERE team = ? AND item = ? AND task = ? "
            "AND told IS NULL",
            (now.isoformat(), item.team, item.id, task),
        )


def claims(tx: Transaction, team: str) -> list[tuple[str, int, str, str, str, str]]:
    """Every claim made on the team's backlog: (item, number, agent, instance, owner, at)."""
    rows = tx.rows(
        "SELECT item, number, agent, instance, owner, claimed_at FROM ankka_team_claims "
        "WHERE team = ? ORDER BY item, number",
        (team,),
    )
    return [(r[0], int(r[1]), r[2], r[3], r[4], r[5]) for r in rows]
