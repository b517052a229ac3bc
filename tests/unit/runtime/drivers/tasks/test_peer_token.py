"""A peer called with a bearer token from a file (``ANKKA_PEERS``' ``token_file``): the file is
read for each request, so a token rewritten before it expires (a projected service-account
token) is the one sent, and a 401 is the credential's, asked again, never the child refused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ankka.runtime.drivers.tasks import remote
from ankka.runtime.drivers.tasks.peers import Peer
from ankka.runtime.drivers.tasks.remote import RemoteChildren
from ankka.runtime.store.open import Store
from tests.support.raw_server import serve


class _Peer:
    """A peer's task API that accepts one bearer token, the one it holds now."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.seen: list[str] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
            length = int(headers.get("content-length", "0"))
            if length:
                await reader.readexactly(length)
            sent = headers.get("authorization", "")
            self.seen.append(sent)
            status, body = self._answer(sent)
            data = json.dumps(body).encode()
            writer.write(
                f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(data)}\r\n\r\n".encode()
                + data
            )
            await writer.drain()

    def _answer(self, sent: str) -> tuple[str, dict[str, Any]]:
        if sent != f"bearer {self.token}":
            return "401 Unauthorized", {"error": {"kind": "unauthenticated", "message": "no"}}
        return "200 OK", {"id": "task_child", "state": "working"}


@asynccontextmanager
async def _following(token: Path, served: _Peer) -> AsyncIterator[tuple[RemoteChildren, Peer]]:
    """A follower of ``served``, on a store of its own (it reads a child's trace context)."""
    store = await Store.open(token.parent / "tasks.sqlite3")
    async with serve(served.handle) as port:
        peer = Peer(agent="researcher", url=f"http://127.0.0.1:{port}", token_file=str(token))
        children = RemoteChildren(store.tasks, {peer.agent: peer}, told=lambda _: None)
        try:
            yield children, peer
        finally:
            for client in children._clients.values():
                await client.http.aclose()
            await store.close()


async def test_a_token_rewritten_in_its_file_is_the_one_sent(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    served = _Peer("first")
    async with _following(token, served) as (children, peer):
        assert (await children._get(peer, "task_child"))["state"] == "working"
        token.write_text("second\n")  # the kubelet rewrites a projected token
        served.token = "second"
        assert (await children._get(peer, "task_child"))["state"] == "working"
    assert served.seen == ["bearer first", "bearer second"]


async def test_a_401_is_asked_again_not_the_child_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("stale")
    async with _following(token, _Peer("fresh")) as (children, peer):
        with pytest.raises(remote._Away, match="401"):
            await children._get(peer, "task_child")
        with pytest.raises(remote._Away, match="401"):
            await children._cancel(peer, "task_child")
