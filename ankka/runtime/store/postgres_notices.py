"""Notices between every process on one PostgreSQL store: ``NOTIFY ankka_notices`` out, one
listening connection (a thread of its own) in.

A notice is a hint, never the record: each listener re-reads the store for what a notice names,
and polls it as a backstop. So a notice may arrive twice but should not go missing: a batch
whose send fails (a pooled connection the server closed, a restart) is sent again, after a
growing pause, for :data:`RESEND_FOR` seconds; only then is it dropped, with a warning, and the
other processes learn of it from their polling. A listener whose connection broke cannot know
what it missed, so once its ``LISTEN`` holds again every listener's ``resync`` is called.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

__all__ = ["CHANNEL", "LISTENER_NAME", "RESEND_FOR", "PostgresNotices"]

log = logging.getLogger("ankka.store")

CHANNEL = "ankka_notices"
LISTENER_NAME = "ankka-notices"  # the listening connection's application_name

RESEND_FOR = 30.0  # seconds a failed batch is sent again before it is dropped
_FIRST_PAUSE, _LONGEST_PAUSE = 0.1, 2.0


class PostgresNotices:
    """The relay (:class:`~ankka.runtime.store.database.NoticeRelay`) on PostgreSQL.

    :meth:`send` never waits: payloads queue, and one batch at a time goes out in one statement
    on a worker thread (the ones that queue meanwhile go in the next), so a burst costs a round
    trip per batch and none of the sender's. A batch that fails goes out again, first and with
    whatever queued meanwhile, after a pause that doubles from 0.1 s to 2 s, until
    :data:`RESEND_FOR` seconds after its first failure. The listener reconnects with a growing
    pause when its connection breaks and calls every listener's ``resync`` once ``LISTEN``
    holds again (or holds at last, after a first connect that failed). The listening
    connection's ``application_name`` is ``ankka-notices`` (``pg_stat_activity`` shows which
    backend it is).
    """

    def __init__(self, dsn: str, pool: ConnectionPool[Any], workers: ThreadPoolExecutor) -> None:
        self._dsn = dsn
        self._pool = pool
        self._workers = workers
        self._queue: list[str] = []
        self._sending: asyncio.Future[None] | None = None
        self._failing: tuple[float, float] | None = None  # (since, next pause) while failing
        self._resend: asyncio.TimerHandle | None = None
        self._listeners: list[tuple[Callable[[str], None], Callable[[], None]]] = []
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._closed = False

    def send(self, payload: str) -> None:
        if self._closed:
            return
        self._queue.append(payload)
        if self._sending is None and self._resend is None:
            self._flush()

    def _flush(self) -> None:
        self._resend = None
        if self._closed or not self._queue:
            return
        batch, self._queue = self._queue, []
        loop = asyncio.get_running_loop()
        self._sending = sending = loop.run_in_executor(self._workers, self._notify, batch)
        sending.add_done_callback(partial(self._sent, batch))

    def _notify(self, batch: list[str]) -> None:
        with self._pool.connection() as conn:
            conn.execute(
                "SELECT pg_notify(%s, payload) FROM unnest(%s::text[]) AS payload",
                (CHANNEL, batch),
            )

    def _sent(self, batch: list[str], sending: asyncio.Future[None]) -> None:
        self._sending = None
        if self._closed:
            return
        error = None if sending.cancelled() else sending.exception()
        if error is None:
            if self._failing is not None:
                log.info("task notifications sent to other processes again")
            self._failing = None
            if self._queue:
                self._flush()
            return
        now = time.monotonic()
        since, pause = self._failing or (now, _FIRST_PAUSE)
        if now - since >= RESEND_FOR:
            log.warning(
                "%d task notification(s) not sent to other processes for %.0f s, dropped "
                "(they re-read the store on their own polling): %s",
                len(batch), now - since, error,
            )  # fmt: skip
            self._failing = None
            if self._queue:
                self._flush()
            return
        if self._failing is None:
            log.warning("task notifications not sent to other processes: %s; sending again", error)
        self._failing = (since, min(pause * 2, _LONGEST_PAUSE))
        self._queue[:0] = batch
        self._resend = asyncio.get_running_loop().call_later(pause, self._flush)

    def listen(
        self, deliver: Callable[[str], None], resync: Callable[[], None]
    ) -> Callable[[], None]:
        listener = (deliver, resync)
        self._listeners.append(listener)
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            self._thread = threading.Thread(
                target=self._listening, name="ankka-pg-listen", daemon=True
            )
            self._thread.start()

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    def _listening(self) -> None:
        pause, missed = 0.5, False
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self._dsn, autocommit=True, connect_timeout=10, application_name=LISTENER_NAME
                ) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    pause = 0.5
                    if missed:  # heard again from here on: what came meanwhile is re-read
                        missed = False
                        self._hand_over(self._resync)
                    while not self._stop.is_set():
                        for notice in conn.notifies(timeout=0.5):
                            self._hand_over(partial(self._deliver, notice.payload))
            except psycopg.Error as exc:
                if self._stop.is_set():
                    return
                missed = True
                log.warning("listening for task notifications: %s; again in %.1f s", exc, pause)
                self._stop.wait(pause)
                pause = min(pause * 2, 10.0)

    def _hand_over(self, call: Callable[[], None]) -> None:
        loop = self._loop
        if loop is None or self._stop.is_set():
            return
        try:
            loop.call_soon_threadsafe(call)
        except RuntimeError:  # the loop closed under a stopping listener
            return

    def _deliver(self, payload: str) -> None:
        for deliver, _ in list(self._listeners):
            try:
                deliver(payload)
            except Exception:
                log.exception("a task notification listener failed")

    def _resync(self) -> None:
        log.info("listening for task notifications again; listeners re-read from the store")
        for _, resync in list(self._listeners):
            try:
                resync()
            except Exception:
                log.exception("a task notification listener failed to resynchronise")

    async def close(self) -> None:
        self._closed = True
        self._stop.set()
        self._queue.clear()
        if self._resend is not None:
            self._resend.cancel()
            self._resend = None
        if self._sending is not None:
            await asyncio.gather(self._sending, return_exceptions=True)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
