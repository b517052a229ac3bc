"""Who compacts a session: a lease, so exactly one process summarises it at a time.

In one process (the SQLite store) the consumer's own bookkeeping already runs one compaction
per session, and :class:`LocalLeases` grants every lease. On PostgreSQL, where several pods
serve the same sessions, :class:`PostgresLeases` keeps a row per session in
``ankka_compaction_leases``: taking it succeeds when there is none, when it expired, or when
the taker already holds it; it expires by itself (the database's clock decides) so a pod
that died mid-compaction never blocks a session for longer than the lease.

A lease saves a second summariser call; it is not what keeps the journal consistent. The
write of a compaction record checks, under the session's turn lock, that no other compaction
landed since the cut was made.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

from ankka._kernel.errors import ConfigurationError, StoreError

__all__ = ["CompactionLeases", "LocalLeases", "PostgresLeases", "open_leases"]


class CompactionLeases(Protocol):
    async def acquire(self, session: str, holder: str, ttl: timedelta) -> bool:
        """Take (or renew) the lease on ``session`` for ``ttl``; ``False`` if another holds
        it."""
        ...

    async def release(self, session: str, holder: str) -> None: ...

    async def close(self) -> None: ...


class LocalLeases:
    """Every lease granted: one process, whose consumer already runs one per session."""

    async def acquire(self, session: str, holder: str, ttl: timedelta) -> bool:
        return True

    async def release(self, session: str, holder: str) -> None:
        return None

    async def close(self) -> None:
        return None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS ankka_compaction_leases (
    session TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires TIMESTAMPTZ NOT NULL
)
"""

_ACQUIRE = """
INSERT INTO ankka_compaction_leases AS lease (session, holder, expires)
VALUES (%s, %s, now() + %s)
ON CONFLICT (session) DO UPDATE SET holder = EXCLUDED.holder, expires = EXCLUDED.expires
WHERE lease.expires < now() OR lease.holder = EXCLUDED.holder
RETURNING holder
"""


class PostgresLeases:
    def __init__(self, pool: Any) -> None:
        self._pool = pool

    @classmethod
    async def open(cls, dsn: str) -> PostgresLeases:
        try:
            import psycopg
            from psycopg_pool import AsyncConnectionPool
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise ConfigurationError(
                "compaction leases on PostgreSQL need the 'postgres' extra: "
                "pip install 'ankka[postgres]'"
            ) from exc
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn, min_size=1, max_size=2, open=False, kwargs={"autocommit": True}
        )
        try:
            await pool.open(wait=True, timeout=10)
            async with pool.connection() as conn:
                await conn.execute(_SCHEMA)
        except (psycopg.Error, TimeoutError) as exc:
            await pool.close()
            raise StoreError(
                f"cannot open the compaction leases on PostgreSQL: {type(exc).__name__}"
            ) from exc
        return cls(pool)

    async def acquire(self, session: str, holder: str, ttl: timedelta) -> bool:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_ACQUIRE, (session, holder, ttl))
            return await cursor.fetchone() is not None

    async def release(self, session: str, holder: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(
                "DELETE FROM ankka_compaction_leases WHERE session = %s AND holder = %s",
                (session, holder),
            )

    async def close(self) -> None:
        await self._pool.close()


async def open_leases(store_url: str) -> CompactionLeases:
    """The leases that go with the store at ``store_url`` (``--store``)."""
    if store_url.startswith(("postgresql://", "postgres://")):
        return await PostgresLeases.open(store_url)
    return LocalLeases()
