"""The console tells the truth (issue 32, item 7, in part): recency, pending approvals on their
session, and the decision shown after it is taken.

A real runtime (``examples.refunds``, the console on) on the stand-in: the sessions list is in
order of last activity, not of id; a session whose only turn waits for a person is shown with
its request and the form to decide it (it was "Not found"); deciding from the console lands on
the session, which confirms the decision and lists it with who took it and when.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.processes import REPO, Server

pytestmark = pytest.mark.integration

REFUND: list[dict[str, Any]] = json.loads((REPO / "examples" / "refunds-standin.json").read_text())
SMALL = {"text": "Nothing to refund."}


def _order(page: str) -> list[str]:
    return re.findall(r'<tr data-session="([^"]+)">', page)


def test_sessions_are_listed_by_last_activity_and_a_waiting_one_shows_its_request(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    model = standin([SMALL, SMALL, SMALL, *REFUND])
    server = serve(model.url, target="examples.refunds:service", env={"ANKKA_CONSOLE": "on"})

    def ask(session: str, message: str) -> httpx.Response:
        return httpx.post(
            f"{server.url}/v1/agents/refunds/sessions/{session}",
            json={"message": message},
            timeout=60,
        )

    for session in ("b-first", "a-second", "b-first"):  # b-first is the latest again
        assert ask(session, "Hello.").status_code == 200
    assert _order(httpx.get(f"{server.url}/console").text) == ["b-first", "a-second"]

    waiting = ask("w", "Refund order A-1042, 250 euros.")
    assert waiting.status_code == 202, waiting.text
    approval = waiting.json()["approvals"][0]
    assert _order(httpx.get(f"{server.url}/console").text)[0] == "w"
    browser = httpx.Client(base_url=server.url, timeout=60)  # keeps the page's cookie
    page = browser.get("/console/sessions/w")
    assert page.status_code == 200, page.text  # it was "Not found"
    assert "Waiting for a decision" in page.text
    assert f'data-approval="{approval["id"]}"' in page.text
    token = re.search(r'name="form_token" value="([^"]+)"', page.text)
    assert token is not None

    decided = browser.post(
        f"/console/approvals/{approval['id']}",
        data={
            "decision": "approve",
            "digest": approval["digest"],
            "session": "w",
            "form_token": token.group(1),
        },
        headers={"Origin": server.url},
    )
    assert decided.status_code == 303, decided.text
    assert decided.headers["location"] == f"/console/sessions/w?decided={approval['id']}"
    landed = httpx.get(f"{server.url}{decided.headers['location']}")
    assert landed.status_code == 200
    assert 'id="confirmation"' in landed.text
    assert f'data-decided="{approval["id"]}" data-decision="approved"' in landed.text
    row = re.search(rf'<tr data-decided="{approval["id"]}".*?</tr>', landed.text)
    assert row is not None
    assert "<td>local</td>" in row.group(0)  # who, as the API records it too
    assert re.search(r"<td>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00</td>", row.group(0))  # when
    assert "Waiting for a decision" not in landed.text


def test_a_tasks_session_counts_its_iterations_and_tokens_as_the_task_does(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    script = json.loads((REPO / "examples" / "tasks-standin.json").read_text())
    server = serve(
        standin(script).url, target="examples.tasks:service", env={"ANKKA_CONSOLE": "on"}
    )
    body = {"type": "summary", "instructions": "Summarise ankka."}
    put = httpx.put(f"{server.url}/v1/agents/researcher/tasks/t1", json=body, timeout=30)
    assert put.status_code == 201, put.text
    task = httpx.get(f"{server.url}/v1/tasks/t1", params={"wait": 60}, timeout=90).json()
    assert task["state"] == "completed", task
    summary = httpx.get(f"{server.url}/v1/sessions/task:t1").json()
    assert summary["turns"] == task["iterations"]["used"] > 0  # were 0
    assert summary["usage"] == task["usage"]  # no judged guardrails here: the same tokens
    page = httpx.get(f"{server.url}/console/sessions/task:t1").text
    assert f"{task['iterations']['used']} turn(s)" in page
    shown = httpx.get(f"{server.url}/console/tasks/t1").text
    times = re.search(r'<p class="muted" id="times">(.*?)</p>', shown)
    assert times is not None
    stamps = re.findall(r'<time datetime="([^"]+)">', times.group(1))
    assert stamps == [task["created_at"], task["updated_at"]]  # the record's own times
    listed = httpx.get(f"{server.url}/console/tasks").text
    assert f'<time datetime="{task["updated_at"]}">' in listed


def test_a_tasks_timeline_is_drawn_from_its_journal_and_links_its_trace(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    script = json.loads((REPO / "examples" / "tasks-standin.json").read_text())
    env = {
        "ANKKA_CONSOLE": "on",
        "OTEL_TRACES_EXPORTER": "console",  # traced (the task records its context), no collector
        "ANKKA_TRACE_UI_URL": "http://jaeger.example:16686",
    }
    server = serve(standin(script).url, target="examples.tasks:service", env=env)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    body = {"type": "summary", "instructions": "Summarise ankka."}
    headers = {"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    put = httpx.put(
        f"{server.url}/v1/agents/researcher/tasks/t1", json=body, headers=headers, timeout=30
    )
    assert put.status_code == 201, put.text
    task = httpx.get(f"{server.url}/v1/tasks/t1", params={"wait": 60}, timeout=90).json()
    assert task["state"] == "completed", task
    shown = httpx.get(f"{server.url}/console/tasks/t1").text
    timeline = shown[shown.index('<table id="waterfall">') :]
    rows = re.findall(r'<tr data-depth="(\d)"><td[^>]*>([^<]*)</td>', timeline)
    iterations = [name for depth, name in rows if depth == "0"]
    assert iterations == [f"t1#{n}" for n in range(1, task["iterations"]["used"] + 1)]
    inside = [name for depth, name in rows if depth == "1"]
    assert inside.count("chat standin") == task["iterations"]["used"]
    assert "execute_tool complete_task" in inside
    link = re.search(r'<a id="trace-link" href="([^"]+)">', shown)
    assert link is not None and link.group(1) == f"http://jaeger.example:16686/trace/{trace_id}"
