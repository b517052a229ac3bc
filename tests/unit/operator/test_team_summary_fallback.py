"""The operator reads a Team from its runtime's summary, and from the items listing of a
runtime older than that route (which answers it 404, as any unknown path), saying so once.

The older runtime is a loopback HTTP server that answers as a runtime without the summary
route does: 404 ``no such endpoint`` for it, the listing for ``/items``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import httpx2
import pytest

from ankka.api.resources import TeamPhase
from ankka.operator.team_reconcile import read_backlog
from tests.support.http_reply import send_json

NO_ROUTE = {"error": {"type": "not_found", "message": "no such endpoint; see GET /openapi.json"}}
NO_TEAM = {"error": {"type": "not_found", "message": "there is no team 'x' (teams: newsroom)"}}
LISTING = {"team": "newsroom", "items": [], "counts": {"ready": 1, "completed": 2}}


class _OlderRuntime(BaseHTTPRequestHandler):
    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.asked.append(self.path)
        body: object
        if self.path == "/v1/teams/newsroom/items":
            status, body = 200, LISTING
        elif self.path == "/v1/teams/newsroom/summary":
            status, body = 404, NO_ROUTE
        else:
            status, body = 404, NO_TEAM
        send_json(self, body, status)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def older_runtime() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OlderRuntime)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _OlderRuntime.asked = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


async def test_a_runtime_without_the_summary_route_is_read_from_its_listing_said_once(
    older_runtime: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ankka.operator")
    async with httpx2.AsyncClient(timeout=10) as client:
        first = await read_backlog(client, older_runtime, "newsroom", "newsroom")
        again = await read_backlog(client, older_runtime, "newsroom", "newsroom")
    for reading in (first, again):
        assert reading.phase is TeamPhase.ACTIVE and reading.reason == "Listed"
        assert reading.counts is not None and reading.counts["completed"] == 2
        assert reading.budget is None  # a listing carries none
    said = [r.getMessage() for r in caplog.records if "no team summary route" in r.getMessage()]
    assert len(said) == 1 and older_runtime in said[0]  # once per runtime
    assert _OlderRuntime.asked == [
        "/v1/teams/newsroom/summary", "/v1/teams/newsroom/items",
    ] * 2  # fmt: skip


async def test_a_team_the_older_runtime_does_not_serve_still_fails_naming_those_it_does(
    older_runtime: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with httpx2.AsyncClient(timeout=10) as client:
        reading = await read_backlog(client, older_runtime, "sports", "newsroom")
    assert reading.phase is TeamPhase.FAILED and reading.reason == "TeamNotServed"
    assert "(teams: newsroom)" in reading.message
    assert not [r for r in caplog.records if "no team summary route" in r.getMessage()]
