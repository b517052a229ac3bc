"""Push notifications: configs per task, events made into a durable outbox, delivered at
least once, in order, retried with backoff.

An event is made when a task's A2A state or status message changes (what
:meth:`TaskView.signature` covers): the outbox row and the config's new ``seen`` signature
commit together, so a restart neither loses an event nor makes it twice, and the event's
number (``{task}:{config}:{seq}``, in the event's ``metadata.eventId`` and the
``X-A2A-Event-Id`` header) is stable across retries and restarts. A config's events go out one
after the other: the next waits until the one before is delivered (a 2xx) or abandoned (after
:data:`ATTEMPTS` tries, the pauses doubling from 0.5 s to a minute). A state the task passed
through while no process was running (it changed twice during a restart) is not made up
afterwards: events are made for the states this runtime sees.

Webhook URLs are ``http``/``https``; one naming a loopback, private or link-local address is
refused (server-side request forgery) unless the runtime allows them (``ankka serve
--a2a-push-private``, on by default on loopback, where the laptop's own receiver lives). The
token and credentials a config carries are sent and never shown back.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx2
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError
from google.protobuf import json_format

from ankka._kernel.clock import Clock
from ankka._kernel.errors import StoreError
from ankka._kernel.ids import new_id
from ankka.runtime.serve.a2a.index import A2AIndex, OutboxRow, PushConfig
from ankka.runtime.serve.a2a.wire import TaskView, artifact_event, status_event

__all__ = ["ATTEMPTS", "PushDesk"]

log = logging.getLogger("ankka.a2a.push")

ATTEMPTS = 12
TICK = 0.5
TIMEOUT = 10.0
MAX_URL = 2048
MAX_CONFIGS = 16  # per task

Views = Callable[[str], Awaitable[TaskView | None]]


def _backoff(attempts: int) -> float:
    return min(0.5 * float(2**attempts), 60.0)


def check_url(url: str, *, allow_private: bool) -> None:
    if len(url) > MAX_URL:
        raise InvalidParamsError(message=f"the webhook URL is longer than {MAX_URL} characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidParamsError(message="the webhook URL is an http:// or https:// URL")
    if allow_private:
        return
    host = parts.hostname
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host == "localhost" or host.endswith(".localhost"):
            raise InvalidParamsError(message="the webhook URL names this machine") from None
        return
    if address.is_private or address.is_loopback or address.is_link_local:
        raise InvalidParamsError(
            message="the webhook URL names a private or loopback address; this runtime does not "
            "call those (ankka serve --a2a-push-private allows it)"
        )


def shown(config: PushConfig) -> pb.TaskPushNotificationConfig:
    """A config as it is shown back: without its token and credentials."""
    out = pb.TaskPushNotificationConfig(id=config.id, task_id=config.task, url=config.url)
    if config.scheme:
        out.authentication.scheme = config.scheme
    return out


class PushDesk:
    """Push configs and the outbox's producer and deliverer (owned while entered)."""

    def __init__(
        self,
        index: A2AIndex,
        clock: Clock,
        *,
        enabled: bool = True,
        allow_private: bool = False,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.index = index
        self.clock = clock
        self.enabled = enabled
        self.allow_private = allow_private
        self.views: Views | None = None
        self._transport = transport
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._client: httpx2.AsyncClient | None = None

    def poke(self, _task: str | None = None) -> None:
        self._wake.set()

    # -- configs ----------------------------------------------------------------------------

    async def create(
        self, given: pb.TaskPushNotificationConfig, caller: str
    ) -> pb.TaskPushNotificationConfig:
        check_url(given.url, allow_private=self.allow_private)
        existing = await self.index.pushes(given.task_id)
        config_id = given.id or new_id("push")
        if len(config_id) > 128:
            raise InvalidParamsError(message="a push config id is at most 128 characters")
        if len(existing) >= MAX_CONFIGS and all(c.id != config_id for c in existing):
            raise InvalidParamsError(message=f"a task has at most {MAX_CONFIGS} push configs")
        auth = given.authentication
        config = PushConfig(
            given.task_id, config_id, given.url, given.token[:4096], auth.scheme[:64],
            auth.credentials[:4096], caller, "", False,
        )  # fmt: skip
        await self.index.put_push(config, self.clock.now())
        self.poke()
        return shown(config)

    async def get(self, task: str, config: str) -> pb.TaskPushNotificationConfig | None:
        found = next((c for c in await self.index.pushes(task) if c.id == config), None)
        return shown(found) if found is not None else None

    async def list(self, task: str) -> list[pb.TaskPushNotificationConfig]:
        return [shown(c) for c in await self.index.pushes(task)]

    async def delete(self, task: str, config: str) -> None:
        await self.index.delete_push(task, config)

    # -- the loop ----------------------------------------------------------------------------

    async def __aenter__(self) -> PushDesk:
        if self.enabled:
            self._loop = asyncio.create_task(self._run(), name="ankka-a2a-push")
        return self

    def _http(self) -> httpx2.AsyncClient:
        """The webhooks' client, made at the first delivery: its transport imports httpcore2,
        which a runtime nobody asked for push notifications never needs."""
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=TIMEOUT, transport=self._transport)
        return self._client

    async def __aexit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        if self._client is not None:
            await self._client.aclose()

    async def _run(self) -> None:
        while True:
            try:
                await self.produce()
                while await self.deliver():
                    await self.produce()  # the next events of a config go out at once
            except StoreError as exc:  # an outage says what it is in one line
                log.warning("push notifications: %s; trying again", exc)
            except Exception:
                log.exception("push notifications: a round failed; trying again")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK):
                    await self._wake.wait()

    async def produce(self) -> int:
        """Make an event for every open config whose task changed; how many were made."""
        if self.views is None:
            return 0
        made = 0
        views: dict[str, TaskView | None] = {}
        for config in await self.index.open_pushes():
            if config.task not in views:
                views[config.task] = await self.views(config.task)
            view = views[config.task]
            if view is None or view.signature() == config.seen:
                continue
            bodies = []
            if view.result is not None:
                bodies.append({"artifactUpdate": json_format.MessageToDict(artifact_event(view))})
            bodies.append({"statusUpdate": json_format.MessageToDict(status_event(view))})
            now = self.clock.now().timestamp()
            seq = await self.index.enqueue(config, view.signature(), view.final, bodies, now)
            made += 0 if seq is None else len(bodies)
        return made

    async def deliver(self) -> int:
        """Send each config's next event that is due; how many were delivered."""
        now = self.clock.now().timestamp()
        sent = 0
        for row in await self.index.heads(now):
            if await self._send(row):
                sent += 1
        return sent

    async def _send(self, row: OutboxRow) -> bool:
        config = next((c for c in await self.index.pushes(row.task) if c.id == row.config), None)
        if config is None or not self.enabled:
            return False
        event_id = f"{row.task}:{row.config}:{row.seq}"
        body: dict[str, Any] = {k: v for k, v in row.body.items() if not k.startswith("_")}
        for value in body.values():
            if isinstance(value, dict):
                value.setdefault("metadata", {})["eventId"] = event_id
        headers = {"Content-Type": "application/json", "X-A2A-Event-Id": event_id}
        if config.token:
            headers["X-A2A-Notification-Token"] = config.token
        if config.scheme and config.credentials:
            headers["Authorization"] = f"{config.scheme} {config.credentials}"
        try:
            answer = await self._http().post(config.url, json=body, headers=headers)
            ok = 200 <= answer.status_code < 300
            why = f"answered {answer.status_code}"
        except httpx2.HTTPError as exc:
            ok, why = False, type(exc).__name__
        if ok:
            await self.index.delivered(row)
            return True
        abandon = row.attempts + 1 >= ATTEMPTS
        when = self.clock.now().timestamp() + _backoff(row.attempts)
        await self.index.failed(row, when, abandon=abandon)
        level = logging.WARNING if abandon else logging.INFO
        log.log(level, "push event %s to task %s's webhook %s%s", event_id, row.task, why,
                ": abandoned" if abandon else "; it will be tried again")  # fmt: skip
        return False
