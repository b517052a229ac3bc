"""A moderated conversation's run, streamed (docs/http-api.md, "Teams and conversations").

``POST /v1/conversations/{conversation}/sessions/{session}`` asked with ``Accept:
text/event-stream`` answers server-sent events instead of the one JSON answer at the end: a
``turn`` event (``{"speaker", "text"}``) for each spoken turn as it is recorded, a
``skipped`` event (``{"speaker", "reason", "detail"}``) for each skipped one, and last an
``ended`` event (``{"reason", "detail", "usage"}``), or ``error`` if the run failed. A failure
before the run starts (no such conversation, a caller refused, a bad session id) is answered
as the JSON route answers it. Bounded by the conversation's own ``deadline`` (every turn of
the run is; the stream gives it :data:`GRACE` more to record its end, then ends with an
``error`` and cuts the run, which records why: ``stream_deadline_exceeded``), with a comment
every :data:`~.tasks_http.KEEP_ALIVE` seconds while no turn comes.
A caller who leaves stops the run where it stands, as a restart would: the same message sent
again goes on from its records (:mod:`ankka.runtime.drivers.teams.runs`); the run records that
its caller left (a different message then ends it ``interrupted`` saying so). A stream the
server's shutdown cuts (``shutdown()``: :func:`~ankka._kernel.drain.cut_by_shutdown`) is not
told as its caller leaving.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import Response

from ankka._kernel.errors import TurnFailed
from ankka.runtime.declare.teams import Spoken
from ankka.runtime.drivers.teams.conversation import Conversations, CutCause, Outcome
from ankka.runtime.records.conversations import (
    CALLER_LEFT,
    STREAM_DEADLINE_EXCEEDED,
    TurnSkipped,
)
from ankka.runtime.serve.api import EventStream, error_json, events
from ankka.runtime.serve.tasks_http import KEEP_ALIVE, sse

__all__ = ["CONVERSATION_EVENTS", "GRACE", "stream_run", "streamed", "wants_events"]

GRACE = KEEP_ALIVE  # past the conversation's deadline, for the run to record its end
CONVERSATION_EVENTS = ("turn", "skipped", "ended", "error")
_DONE = object()


class StreamTooLong(TurnFailed):
    """The run did not end within its deadline and the grace: the stream gives up on it."""

    kind = STREAM_DEADLINE_EXCEEDED  # the error the caller is sent, and the cut's cause
    status = 504


def wants_events(accept: str | None) -> bool:
    """Whether an ``Accept`` header asks for server-sent events."""
    return accept is not None and any(
        part.split(";")[0].strip().lower() == "text/event-stream" for part in accept.split(",")
    )


def streamed() -> dict[str, Any]:
    """The stream's part of the route's documented ``200``."""
    described = events(
        "with Accept: text/event-stream, a turn (or skipped) event per turn as it is "
        "recorded, then ended",
        *CONVERSATION_EVENTS,
    )
    content: dict[str, Any] = described["content"]
    return content


def ended_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "reason": outcome.reason.value,
        "detail": outcome.detail,
        "usage": outcome.usage.as_dict(),
    }


def _event(item: object) -> bytes | None:
    if isinstance(item, Spoken):
        return sse("turn", {"speaker": item.speaker, "text": item.text})
    if isinstance(item, TurnSkipped):
        shown = {"speaker": item.speaker, "reason": item.reason, "detail": item.detail}
        return sse("skipped", shown)
    return None


async def stream_run(
    conversations: Conversations,
    name: str,
    session: str,
    message: str,
    *,
    caller: str,
    shutdown: Callable[[], bool] = lambda: False,
) -> Response:
    """Run the conversation, its turns sent as they are recorded; ``shutdown()``: whether the
    server's shutdown cut the stream (else a stream cut short is its caller leaving)."""
    declared = conversations.conversation(name)  # 404 as JSON, before anything runs
    queue: asyncio.Queue[object] = asyncio.Queue()
    cut = CutCause()
    task = asyncio.create_task(
        conversations.run(
            name, session, message, caller=caller, heard=queue.put_nowait, cut_cause=cut
        )
    )
    task.add_done_callback(lambda _: queue.put_nowait(_DONE))
    try:
        first = await queue.get()  # the run started (or failed before it could)
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.wait({task})
        raise
    if first is _DONE:
        failure = task.exception()
        if failure is not None:
            raise failure
    loop = asyncio.get_running_loop()
    until = loop.time() + declared.deadline + GRACE

    async def body() -> AsyncIterator[bytes]:
        item = first
        try:
            while True:
                if item is _DONE:
                    failure = task.exception()
                    if failure is None:
                        yield sse("ended", ended_json(task.result()))
                    else:
                        yield sse("error", error_json(failure)[1])
                    return
                chunk = _event(item)
                if chunk is not None:
                    yield chunk
                item = None
                while item is None:
                    left = until - loop.time()
                    if left <= 0:
                        cut.cause = STREAM_DEADLINE_EXCEEDED  # told before it is cancelled
                        late = StreamTooLong(
                            f"conversation {name!r} did not end within its deadline of "
                            f"{declared.deadline:g} s (and {GRACE:g} s more): the stream ends"
                        )
                        yield sse("error", error_json(late)[1])
                        return
                    try:
                        async with asyncio.timeout(min(KEEP_ALIVE, left)):
                            item = await queue.get()
                    except TimeoutError:
                        yield b": keep-alive\n\n"
        except BaseException:  # cut short: its caller left, or the server's shutdown cut it
            if not shutdown() and cut.cause is None:
                cut.cause = CALLER_LEFT
            raise
        finally:
            if not task.done():
                task.cancel()
                # Waited for, not awaited: this body cancelled again (the caller gone, the
                # scope cancelled) must not cancel the run again while it records how it stopped.
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({task})
                if task.done() and not task.cancelled():
                    task.exception()  # retrieved: a failure as it stops is not the stream's to tell

    return EventStream(body(), headers={"cache-control": "no-cache"})
