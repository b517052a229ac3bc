"""Leases: one holder at a time works a shared thing, until its lease runs out by itself.

One rule for every lease of the runtime, written once: a lease is taken when it is free, when
it has run out, or when the taker already holds it (which renews it); it runs out at
``lease_until`` (seconds since the epoch, by the taker's clock), so a process that died
holding one never blocks the thing for longer than the lease. The leases are tables of the
store's one database (the journal's SQLite file or PostgreSQL database, through its
transactions), as columns ``lease_owner`` and ``lease_until`` of the leased row:

- a task **instance**'s owner (``ankka_instances``): :func:`claim`, :func:`renew` (every
  lease of an owner at once), :func:`hold` (in the transaction of each write of the instance's
  worker: the write is its owner's or none) and :func:`release`;
- a **session**'s compactor (``ankka_session_leases``): :func:`take_session` and
  :func:`drop_session` (:class:`ankka.runtime.store.session_leases.StoreLeases` over them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ankka.runtime.store.database import Row, Transaction

__all__ = [
    "SESSION_SCHEMA",
    "claim",
    "drop_session",
    "hold",
    "release",
    "renew",
    "take_session",
]

# Free, run out, or already the taker's; parameters: (taker, now).
_TAKEABLE = "(lease_owner IS NULL OR lease_owner = ? OR lease_until < ?)"


def claim(tx: Transaction, agent: str, instance: str, owner: str, until: float, now: float) -> bool:
    """Take the instance's lease if it is free, expired, or already ``owner``'s."""
    found = tx.rows(
        "UPDATE ankka_instances SET lease_owner = ?, lease_until = ? WHERE agent = ? "
        f"AND id = ? AND state = 'active' AND {_TAKEABLE} RETURNING id",
        (owner, until, agent, instance, owner, now),
    )
    return bool(found)


def renew(tx: Transaction, owner: str, until: float) -> list[tuple[str, str]]:
    """Renew every instance lease ``owner`` holds; the instances it still holds."""
    rows = tx.rows(
        "UPDATE ankka_instances SET lease_until = ? WHERE lease_owner = ? RETURNING agent, id",
        (until, owner),
    )
    return [(r[0], r[1]) for r in rows]


def hold(tx: Transaction, agent: str, instance: str, owner: str, until: float) -> Row | None:
    """Renew ``owner``'s lease of the instance only if it holds it still (no one has taken it
    since, whether or not it ran out meanwhile), locking the instance's row to the end of the
    transaction, so a claim made meanwhile waits for it and sees the lease renewed: the
    instance's row (agent, id, state, own, created_at, lease_owner, lease_until), or None when
    ``owner`` holds it no more."""
    found = tx.rows(
        "UPDATE ankka_instances SET lease_until = ? WHERE agent = ? AND id = ? "
        "AND lease_owner = ? RETURNING agent, id, state, own, created_at, lease_owner, "
        "lease_until",
        (until, agent, instance, owner),
    )
    return found[0] if found else None


def release(tx: Transaction, agent: str, instance: str, owner: str) -> None:
    tx.rows(
        "UPDATE ankka_instances SET lease_owner = NULL, lease_until = NULL "
        "WHERE agent = ? AND id = ? AND lease_owner = ?",
        (agent, instance, owner),
    )


SESSION_SCHEMA = """CREATE TABLE IF NOT EXISTS ankka_session_leases (
    session TEXT PRIMARY KEY,
    lease_owner TEXT,
    lease_until DOUBLE PRECISION
)"""


def take_session(tx: Transaction, session: str, owner: str, until: float, now: float) -> bool:
    """Take (or renew) the session's lease until ``until``; False when another holds it."""
    tx.rows(
        "INSERT INTO ankka_session_leases (session, lease_owner, lease_until) "
        "VALUES (?, NULL, NULL) ON CONFLICT (session) DO NOTHING",
        (session,),
    )
    found = tx.rows(
        "UPDATE ankka_session_leases SET lease_owner = ?, lease_until = ? "
        f"WHERE session = ? AND {_TAKEABLE} RETURNING session",
        (owner, until, session, owner, now),
    )
    return bool(found)


def drop_session(tx: Transaction, session: str, owner: str) -> None:
    tx.rows(
        "DELETE FROM ankka_session_leases WHERE session = ? AND lease_owner = ?",
        (session, owner),
    )
