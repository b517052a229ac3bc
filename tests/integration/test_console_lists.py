"""The console's lists are filtered and paged, and every row carries its time (issue 32
item 7: filters, paging, timestamps everywhere).

A real runtime (tests/integration/client_services.py: the weather and refunds agents and the
researcher's tasks, the console on) on the stand-in: 51 sessions of one agent and one of
another, waiting for a person. Filtering by agent or by "waiting" shows exactly those; 51
sessions are two pages (50 newest first, then the oldest), linked by cursor ("older", and
"newest" back) with the filter kept; every row and every turn shows when, as the API's own
times; a query a page does not take is a 400 naming what it takes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.processes import Server

pytestmark = pytest.mark.integration

WEATHER = {"text": "It is -3 °C with light snow in Helsinki."}
REFUND = {"tool_calls": [{"name": "refund", "arguments": {"order": "A-1042", "amount": 250.0}}]}
TASK = [
    {"tool_calls": [{"name": "lookup", "arguments": {"topic": "ankka"}}]},
    {"tool_calls": [{"name": "complete_task", "arguments": {"title": "t", "points": ["p"]}}]},
]
MANY = 51  # one more than a page


def _sessions(page: str) -> list[str]:
    return re.findall(r'<tr data-session="([^"]+)">', page)


def test_the_session_list_filters_by_agent_and_waiting_pages_by_cursor_and_shows_times(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    model = standin([WEATHER] * MANY + [REFUND])
    server = serve(
        model.url,
        target="tests.integration.client_services:service",
        env={"ANKKA_CONSOLE": "on"},
    )
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for n in range(MANY):
            asked = http.post(f"/v1/agents/weather/sessions/w-{n:02}", json={"message": "Hi?"})
            assert asked.status_code == 200, asked.text
        waiting = http.post("/v1/agents/refunds/sessions/r-0", json={"message": "Refund A-1042."})
        assert waiting.status_code == 202, waiting.text

        assert _sessions(http.get("/console", params={"agent": "refunds"}).text) == ["r-0"]
        assert _sessions(http.get("/console", params={"state": "waiting"}).text) == ["r-0"]

        first = http.get("/console", params={"agent": "weather"}).text
        newest = [f"w-{n:02}" for n in range(MANY - 1, 0, -1)]
        assert _sessions(first) == newest  # 50, newest first
        older = re.search(r'<a rel="next" href="([^"]+)">', first)
        assert older is not None
        link = older.group(1).replace("&amp;", "&")
        assert link.startswith("/console?agent=weather&cursor=")  # the filter kept
        second = http.get(link).text
        assert _sessions(second) == ["w-00"]
        assert '<a rel="first" href="/console?agent=weather">newest</a>' in second
        assert 'rel="next"' not in second
        # The filter form shows what is chosen.
        assert '<option value="weather" selected>' in second

        # Every row: when it was last active, the API's own time.
        summary = http.get("/v1/sessions/w-00").json()
        assert summary["created_at"] <= summary["updated_at"]
        row = re.search(r'<tr data-session="w-00">.*?</tr>', second)
        assert row is not None
        assert f'<time datetime="{summary["updated_at"]}">' in row.group(0)
        # Every turn on a session's page: when it began.
        shown = http.get("/console/sessions/w-00").text
        turn = re.search(r'<section class="turn" data-turn="[^"]+">(.*?)</h3>', shown)
        assert turn is not None and "<time datetime=" in turn.group(1)

        for query, named in (
            ({"agent": "nobody"}, "?agent= is one of refunds, researcher, weather"),
            ({"cursor": "0"}, "?cursor= is not a cursor this console gave"),
            ({"page": "2"}, "this page takes ?agent=, ?state=, ?cursor=; not ?page="),
        ):
            refused = http.get("/console", params=query)
            assert refused.status_code == 400, query
            assert named in refused.text, refused.text


def test_the_task_and_approval_lists_filter_by_state(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    model = standin([REFUND, *TASK, {"text": "Not refunded."}])
    server = serve(
        model.url,
        target="tests.integration.client_services:service",
        env={"ANKKA_CONSOLE": "on"},
    )
    with httpx.Client(base_url=server.url, timeout=60) as http:
        waiting = http.post("/v1/agents/refunds/sessions/r-0", json={"message": "Refund A-1042."})
        assert waiting.status_code == 202, waiting.text
        approval = waiting.json()["approvals"][0]
        body = {"type": "summary", "instructions": "Summarise ankka."}
        assert http.put("/v1/agents/researcher/tasks/t-1", json=body).status_code == 201
        done = http.get("/v1/tasks/t-1", params={"wait": 60}, timeout=90).json()
        assert done["state"] == "completed", done

        tasks = http.get("/console/tasks", params={"state": "completed"}).text
        assert re.findall(r'<tr data-task="([^"]+)"', tasks) == ["t-1"]
        none = http.get("/console/tasks", params={"state": "failed"}).text
        assert re.findall(r'<tr data-task="([^"]+)"', none) == []
        assert http.get("/console/tasks", params={"state": "lost"}).status_code == 400

        pending = http.get("/console/approvals").text  # pending by default
        assert f'data-approval="{approval["id"]}"' in pending
        assert re.search(r'<tr data-approval="[^"]+".*?<time datetime=', pending, re.S)
        decided = http.post(
            f"/v1/approvals/{approval['id']}",
            json={"decision": "refuse", "digest": approval["digest"]},
        )
        assert decided.status_code == 200, decided.text
        assert f'data-approval="{approval["id"]}"' not in http.get("/console/approvals").text
        refused = http.get("/console/approvals", params={"state": "refused"}).text
        assert f'data-approval="{approval["id"]}" data-state="refused"' in refused
        everything = http.get("/console/approvals", params={"state": ""}).text
        assert f'data-approval="{approval["id"]}"' in everything
