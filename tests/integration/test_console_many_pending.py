"""More than 500 pending approvals (issue 29): the console shows every one. A session's page
shows each of its pending requests though 500 older ones of other sessions wait, and a refused
form's page shows the newest page of pending ones, whose "older" links reach each pending
approval once; the approvals stream's snapshot holds the oldest 500 and the listing's cursor of
the rest (``ankka serve`` on SQLite, the stand-in asking 100 approvals a turn)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ankka.runtime.serve.console.listing import PER_PAGE
from tests.integration.test_listings_access import TARGET, _calls
from tests.support.processes import Server

pytestmark = pytest.mark.integration

TURNS, CALLS = 6, 100  # 600 pending; the newest session's 100 come after 500 older ones


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr data-approval="([^"]+)"', page)


def _ask(server: Server) -> dict[str, list[dict[str, Any]]]:
    """Each session's turn, answered 202 with its pending approvals: those, by session."""
    asked: dict[str, list[dict[str, Any]]] = {}
    for t in range(TURNS):
        answer = httpx.post(
            f"{server.url}/v1/agents/refunds/sessions/s-{t}",
            json={"message": "refund these"},
            timeout=120,
        )
        assert answer.status_code == 202, answer.text
        asked[f"s-{t}"] = answer.json()["approvals"]
    return asked


def test_every_pending_approval_past_500_is_shown_on_its_session_and_reached_by_the_pages(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    model = standin([_calls("s", t, CALLS) for t in range(TURNS)])
    server = serve(model.url, target=TARGET, env={"ANKKA_CONSOLE": "on"})
    asked = _ask(server)
    every = {a["id"] for approvals in asked.values() for a in approvals}
    assert len(every) == TURNS * CALLS
    newest = asked[f"s-{TURNS - 1}"]

    browser = httpx.Client(base_url=server.url, timeout=60)  # keeps the page's cookie
    session = browser.get(f"/console/sessions/s-{TURNS - 1}")
    assert session.status_code == 200, session.text
    assert sorted(_rows(session.text)) == sorted(a["id"] for a in newest)

    token = re.search(r'name="form_token" value="([^"]+)"', session.text)
    assert token is not None
    refused = browser.post(
        f"/console/approvals/{newest[0]['id']}",
        data={"decision": "maybe", "digest": newest[0]["digest"], "form_token": token.group(1)},
        headers={"Origin": server.url},
    )
    assert refused.status_code == 400, refused.text
    page, seen = refused.text, []
    assert len(_rows(page)) == PER_PAGE
    for _ in range(TURNS * CALLS // PER_PAGE + 2):
        seen += _rows(page)
        older = re.search(r'<a rel="next" href="([^"]+)">older</a>', page)
        if older is None:
            break
        link = html.unescape(older.group(1))
        assert link.startswith("/console/approvals?") and "state=pending" in link, link
        answer = browser.get(link)
        assert answer.status_code == 200, answer.text
        page = answer.text
    assert len(seen) == len(every) and set(seen) == every


def test_the_approvals_stream_snapshot_holds_500_and_the_cursor_of_the_rest(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    model = standin([_calls("s", t, CALLS) for t in range(TURNS)])
    server = serve(model.url, target=TARGET)
    every = {a["id"] for approvals in _ask(server).values() for a in approvals}
    with httpx.stream(
        "GET", f"{server.url}/v1/approvals/notifications", params={"wait": 1}, timeout=60
    ) as stream:
        lines = iter(stream.iter_lines())
        assert next(lines) == "event: snapshot"
        data = next(lines)
    snapshot = json.loads(data.removeprefix("data: "))
    shown = [a["id"] for a in snapshot["approvals"]]
    assert len(shown) == 500 and snapshot["next"] is not None
    rest = httpx.get(
        f"{server.url}/v1/approvals",
        params={"state": "pending", "cursor": snapshot["next"]},
        timeout=60,
    )
    assert rest.status_code == 200, rest.text
    assert rest.json()["next"] is None
    later = [a["id"] for a in rest.json()["approvals"]]
    assert len(later) == TURNS * CALLS - 500
    assert set(shown) | set(later) == every and not set(shown) & set(later)
