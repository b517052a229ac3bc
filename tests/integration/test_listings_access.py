"""A listing filters by the caller's access in the store's query and pages by cursor (issue 31,
item 3), over real HTTP with ``ankka serve --token-file`` (callers alice and bob) on SQLite and
PostgreSQL: bob's volume past the old fixed windows (the API's 500 oldest approvals, the
console's 2,000) does not hide alice's, and paging through ``next`` yields each of hers exactly
once and none of bob's; the console's lists (approvals, sessions, tasks), paged through their
"older" links (``?cursor=``), show each caller each of its rows once and none of the other's."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script
from tests.support.postgres import fresh_database
from tests.support.processes import Server

pytestmark = pytest.mark.integration

Serve = Callable[..., Server]
TARGET = "tests.integration.approval_services:service"
ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789ab"
# 2,100 of bob's approvals: past the API's old window (the 500 oldest) and the console's (2,000)
BOBS_TURNS, BOBS_CALLS = 21, 100
ALICES_TURNS, ALICES_CALLS = 3, 2
BOBS_TASKS, ALICES_TASKS = 120, 3  # bob's: past two console pages of 50


def _calls(who: str, turn: int, count: int) -> dict[str, Any]:
    return {
        "tool_calls": [
            {"name": "refund", "arguments": {"order": f"{who}-{turn}-{i}", "amount": 250}}
            for i in range(count)
        ]
    }


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'listings.sqlite3'}"
        return
    dsn: str = request.getfixturevalue("postgres_server")
    yield fresh_database(dsn, "listings")


def _page(server: Server, token: str, **params: Any) -> dict[str, Any]:
    answer = httpx.get(
        f"{server.url}/v1/approvals",
        params=params,
        headers={"authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _every_page(server: Server, token: str, limit: int) -> list[dict[str, Any]]:
    """Every approval the caller is shown, page by page through ``next`` (bounded)."""
    seen: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(1000):
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        page = _page(server, token, **params)
        assert len(page["approvals"]) <= limit
        seen += page["approvals"]
        cursor = page["next"]
        if cursor is None:
            return seen
    raise AssertionError("the pages never ended")


def _console(server: Server) -> tuple[Callable[..., str], Callable[..., list[str]]]:
    """A console page as a caller is answered it, and every row of a console list as the
    caller reaches it page by page through the "older" links (bounded)."""

    def console(token: str, path: str, **params: str) -> str:
        headers = {"authorization": f"Bearer {token}"}
        answer = httpx.get(  # params {} would drop a link's own query
            f"{server.url}{path}", params=params or None, headers=headers, timeout=60
        )
        assert answer.status_code == 200, answer.text
        return answer.text

    def every_console_page(token: str, path: str, row: str, **params: str) -> list[str]:
        seen: list[str] = []
        page = console(token, path, **params)
        for _ in range(100):
            seen += re.findall(rf'<tr data-{row}="([^"]+)"', page)
            older = re.search(r'<a rel="next" href="([^"]+)">older</a>', page)
            if older is None:
                return seen
            link = html.unescape(older.group(1))
            assert "cursor=" in link and all(f"{k}={v}" in link for k, v in params.items())
            page = console(token, link)
        raise AssertionError("the console's pages never ended")

    return console, every_console_page


def test_another_callers_volume_hides_none_of_yours_and_each_page_is_yours(
    standin: Callable[[Script], Server], serve: Serve, store: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    script: list[Any] = [_calls("bob", t, BOBS_CALLS) for t in range(BOBS_TURNS)]
    script += [_calls("alice", t, ALICES_CALLS) for t in range(ALICES_TURNS)]
    model = standin(script)
    server = serve(
        model.url,
        store=store,
        target=TARGET,
        args=["--token-file", str(tokens)],
        env={"ANKKA_CONSOLE": "on"},
    )

    def turn(token: str, session: str) -> list[str]:
        answer = httpx.post(
            f"{server.url}/v1/agents/refunds/sessions/{session}",
            json={"message": "refund these"},
            headers={"authorization": f"Bearer {token}"},
            timeout=120,
        )
        assert answer.status_code == 202, answer.text
        return [a["id"] for a in answer.json()["approvals"]]

    bobs = {i for t in range(BOBS_TURNS) for i in turn(BOB, f"bob-{t}")}
    alices = {i for t in range(ALICES_TURNS) for i in turn(ALICE, f"alice-{t}")}
    assert len(bobs) == BOBS_TURNS * BOBS_CALLS and len(alices) == ALICES_TURNS * ALICES_CALLS

    # One page of the default size: all of alice's, though 600 of bob's are older.
    first = _page(server, ALICE)
    assert {a["id"] for a in first["approvals"]} == alices
    assert first["next"] is None

    # Paged two at a time: each of hers exactly once, none of bob's.
    paged = [a["id"] for a in _every_page(server, ALICE, 2)]
    assert sorted(paged) == sorted(alices)
    assert not set(paged) & bobs
    # Bob pages through his 2,100 (past one page of the most a page holds): each once.
    his = [a["id"] for a in _every_page(server, BOB, 500)]
    assert sorted(his) == sorted(bobs)
    assert {a["session"] for a in _page(server, BOB, limit=1)["approvals"]} <= {
        f"bob-{t}" for t in range(BOBS_TURNS)
    }

    # The console, through its links: alice's approvals and sessions, none of bob's.
    _, every_console_page = _console(server)
    # Through the console's links, "any" state: each of hers once, none of his; his 2,100 in
    # 42 pages of 50, each once, none of hers.
    shown = every_console_page(ALICE, "/console/approvals", "approval", state="")
    assert sorted(shown) == sorted(alices)
    his_shown = every_console_page(BOB, "/console/approvals", "approval", state="pending")
    assert sorted(his_shown) == sorted(bobs)
    sessions = every_console_page(ALICE, "/console", "session")
    assert sorted(sessions) == sorted(f"alice-{t}" for t in range(ALICES_TURNS))
    his_sessions = every_console_page(BOB, "/console", "session", state="waiting")
    assert sorted(his_sessions) == sorted(f"bob-{t}" for t in range(BOBS_TURNS))
    # A cursor the console did not give: 400 naming it, not a 500.
    for path in ("/console", "/console/tasks", "/console/approvals"):
        answer = httpx.get(
            f"{server.url}{path}",
            params={"cursor": "bm90LWEtY3Vyc29y"},
            headers={"authorization": f"Bearer {ALICE}"},
        )
        assert answer.status_code == 400, (path, answer.text)
        assert "?cursor= is not a cursor this console gave" in answer.text
    server.stop()


def test_a_cursor_the_runtime_did_not_give_and_a_limit_out_of_bounds_are_refused(
    standin: Callable[[Script], Server], serve: Serve, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\n")
    server = serve(standin([]).url, target=TARGET, args=["--token-file", str(tokens)])
    headers = {"authorization": f"Bearer {ALICE}"}
    asked = (
        ({"cursor": "not-a-cursor"}, "?cursor=", "invalid_cursor"),
        ({"limit": 501}, "?limit=", "invalid_request"),
        ({"limit": 0}, "?limit=", "invalid_request"),
    )
    for params, named, kind in asked:
        answer = httpx.get(f"{server.url}/v1/approvals", params=params, headers=headers)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["type"] == kind
        assert named in answer.json()["error"]["message"]
    server.stop()


def test_the_console_task_list_pages_by_cursor_each_callers_own_once(
    standin: Callable[[Script], Server], serve: Serve, store: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    done = {"tool_calls": [{"name": "complete_task", "arguments": {"title": "t", "points": []}}]}
    bobs = [f"bob-{n:03}" for n in range(BOBS_TASKS)]
    alices = [f"alice-{n}" for n in range(ALICES_TASKS)]
    model = standin([done] * (len(bobs) + len(alices)))
    server = serve(
        model.url,
        store=store,
        target="tests.integration.client_services:service",
        args=["--token-file", str(tokens)],
        env={"ANKKA_CONSOLE": "on"},
    )
    for token, names in ((ALICE, alices), (BOB, bobs)):  # hers the oldest
        for name in names:
            made = httpx.put(
                f"{server.url}/v1/agents/researcher/tasks/{name}",
                json={"type": "summary", "instructions": "Summarise ankka."},
                headers={"authorization": f"Bearer {token}"},
                timeout=60,
            )
            assert made.status_code == 201, made.text
    _, every_console_page = _console(server)
    # Bob's 120 are three pages of 50 through the "older" links: each once, none of alice's;
    # alice's, behind all 120 of his, on her first page, each once and none of his.
    his = every_console_page(BOB, "/console/tasks", "task", agent="researcher")
    assert sorted(his) == bobs
    hers = every_console_page(ALICE, "/console/tasks", "task")
    assert sorted(hers) == alices
    server.stop()
