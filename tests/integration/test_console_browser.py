"""The console in a real headless browser: Debian's chromium driven by Playwright.

After a scripted session (a tool call, then a second turn) the session's page, as the browser
renders it, shows the tool call, and its token counts are the API's. A task's page shows every
kind of notification its stream sends (the browser handed one of each in place of the
stream), and a moderated conversation's page each record of a run cut off and gone on with.
A screenshot is kept under ``.ci/artifacts/`` for CI. No browser is downloaded: Playwright
drives the system's ``chromium`` (scripts/system-deps.sh installs it).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx
import pytest
from playwright.sync_api import Page, sync_playwright

from ankka.runtime.serve.tasks_http import TASK_EVENTS
from tests.integration import test_conversation_tools as conversations
from tests.integration.conftest import Script
from tests.integration.test_conversation_tools import (
    Setup,
    calls,
    cut_off,
    cut_recorded,
    says,
)
from tests.integration.test_moderation import converse
from tests.support.processes import REPO, Server

pytestmark = pytest.mark.integration

ARTIFACTS = REPO / ".ci" / "artifacts"
CONSOLE_ON = {"ANKKA_CONSOLE": "on"}
SCRIPT: Script = [
    {
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Helsinki"}}],
        "usage": {"input_tokens": 96, "output_tokens": 18},
    },
    {"text": "It is -3 °C in Helsinki.", "usage": {"input_tokens": 131, "output_tokens": 16}},
    {"text": "Tomorrow looks the same.", "usage": {"input_tokens": 170, "output_tokens": 9}},
]


T = TypeVar("T")


def in_browser(work: Callable[[Page], T]) -> T:
    """Run ``work`` on a fresh page of headless chromium. Playwright's sync API runs an event
    loop of its own, so it runs in a thread of its own, away from the tests' loop."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: run scripts/system-deps.sh (apt chromium)")

    def run() -> T:
        with sync_playwright() as playwright:
            # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                return work(browser.new_page())
            finally:
                browser.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result(timeout=120)


@pytest.fixture
def console(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> tuple[str, list[dict[str, object]]]:
    """A served weather agent with its console on, after a two-turn session."""
    model = standin(SCRIPT)
    runtime = serve(model.url, target="examples.weather:service", env=CONSOLE_ON)
    answers = []
    for question in ("Weather in Helsinki?", "And tomorrow?"):
        answer = httpx.post(
            f"{runtime.url}/v1/agents/weather/sessions/walk", json={"message": question}
        )
        assert answer.status_code == 200, answer.text
        answers.append(answer.json())
    return runtime.url, answers


def _cell(page: Page, row: str, key: str) -> int:
    return int(page.locator(f"{row} [data-usage={key}]").first.inner_text())


def test_the_session_page_shows_the_tool_call_and_the_apis_token_counts(
    console: tuple[str, list[dict[str, object]]],
) -> None:
    url, answers = console
    api = httpx.get(f"{url}/v1/sessions/walk").json()

    def check(page: Page) -> None:
        page.goto(f"{url}/console/sessions/walk")
        call = page.locator('.tool-call[data-tool="get_weather"]')
        assert call.count() == 1
        assert 'get_weather({"city": "Helsinki"})' in call.inner_text()
        assert "Helsinki: " in page.locator('.tool-result[data-tool="get_weather"]').inner_text()
        for key in ("input_tokens", "output_tokens", "cache_read_tokens"):
            assert _cell(page, "#session-usage", key) == api["usage"][key]
        row = '#by-agent-model tr[data-agent="weather"][data-model="standin"]'
        assert _cell(page, row, "input_tokens") == api["usage"]["input_tokens"]
        # The chart: one bar per turn, its height the turn's input + output tokens.
        bars = page.locator("svg.chart g.bar")
        totals = [int(bars.nth(i).get_attribute("data-total") or -1) for i in range(bars.count())]
        usages = [a["usage"] for a in answers]
        assert totals == [u["input_tokens"] + u["output_tokens"] for u in usages]  # type: ignore[index]
        assert page.locator("#session-usage td").last.inner_text() == "unknown"  # cost
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "console-session.png"), full_page=True)

        page.goto(f"{url}/console")
        listed = page.locator('#sessions tr[data-session="walk"]')
        assert listed.count() == 1
        assert (
            _cell(page, '#sessions tr[data-session="walk"]', "output_tokens")
            == (api["usage"]["output_tokens"])
        )
        page.screenshot(path=str(ARTIFACTS / "console-sessions.png"), full_page=True)

    in_browser(check)


def test_the_sessions_are_filtered_through_the_form_and_every_row_and_turn_has_its_time(
    console: tuple[str, list[dict[str, object]]],
) -> None:
    url, _ = console
    api = httpx.get(f"{url}/v1/sessions/walk").json()

    def check(page: Page) -> None:
        page.goto(f"{url}/console")
        row = page.locator('#sessions tr[data-session="walk"]')
        assert row.locator("time").get_attribute("datetime") == api["updated_at"]
        page.select_option('form.filters select[name="state"]', "waiting")
        page.click('form.filters button[type="submit"]')
        page.wait_for_url(f"{url}/console?agent=&state=waiting")
        assert page.locator("#sessions").count() == 0
        assert "No session matches." in page.inner_text("body")
        page.select_option('form.filters select[name="state"]', "")
        page.select_option('form.filters select[name="agent"]', "weather")
        page.click('form.filters button[type="submit"]')
        page.wait_for_url(f"{url}/console?agent=weather&state=")
        assert page.locator("#sessions tr[data-session]").count() == 1
        page.goto(f"{url}/console/sessions/walk")
        started = page.locator("#times time").first.get_attribute("datetime")
        assert started == api["created_at"]
        turns = page.locator("section.turn h3 time")
        assert turns.count() == 2
        times = [turns.nth(i).get_attribute("datetime") or "" for i in range(2)]
        assert api["created_at"] <= times[0] <= times[1] <= api["updated_at"]

    in_browser(check)


def test_the_console_is_off_unless_enabled(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    runtime = serve(standin(SCRIPT).url, target="examples.weather:service")
    assert httpx.get(f"{runtime.url}/console").status_code == 404


def test_the_pages_fetch_nothing_but_this_server(
    console: tuple[str, list[dict[str, object]]],
) -> None:
    url, _ = console
    asked: list[str] = []

    def visit(page: Page) -> None:
        page.on("request", lambda request: asked.append(request.url))
        page.goto(f"{url}/console/sessions/walk")
        page.wait_for_load_state("networkidle")

    in_browser(visit)
    assert asked
    assert [u for u in asked if not u.startswith(url)] == []
    assert f"{url}/console/static/console.js" in asked


TASKS_SCRIPT = json.loads((REPO / "examples" / "tasks-standin.json").read_text())


def test_a_tasks_page_follows_it_live_then_shows_its_budget_tokens_and_result(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    # Each model call waits, so the task is still working when the page opens, and between its
    # two iterations long enough for the page's figures to be fetched again (every 2 s).
    slow = [{**turn, "delay_ms": 5000} for turn in TASKS_SCRIPT]
    runtime = serve(standin(slow).url, target="examples.tasks:service", env=CONSOLE_ON)
    url = runtime.url

    def check(page: Page) -> dict[str, Any]:
        page.goto(f"{url}/console/tasks")  # the browser is up before the task starts
        body = {"type": "summary", "instructions": "Summarise ankka."}
        created = httpx.put(f"{url}/v1/agents/researcher/tasks/t1", json=body, timeout=30)
        assert created.status_code == 201, created.text
        page.goto(f"{url}/console/tasks/t1")
        # Live: the notifications stream's events are listed as they come ...
        page.wait_for_selector('#progress li[data-event="snapshot"]', state="attached")
        page.wait_for_selector('#progress li:not([data-event="snapshot"])', state="attached")
        # ... the figures follow the record while it works (they stayed at 0 of 5) ...
        page.wait_for_selector('svg.budget[data-used="1"]', state="attached", timeout=30_000)
        assert page.locator("#state").get_attribute("data-state") != "completed"
        # ... and the page is rendered again by the server once the task ends.
        page.wait_for_selector('#state[data-state="completed"]', timeout=60_000)
        bar = page.locator("svg.budget")
        shown = {
            "used": int(bar.get_attribute("data-used") or -1),
            "budget": int(bar.get_attribute("data-budget") or -1),
            "input": _cell(page, "#task-usage", "input_tokens"),
            "output": _cell(page, "#task-usage", "output_tokens"),
            "result": page.locator("#result").inner_text(),
        }
        page.screenshot(path=str(ARTIFACTS / "console-task.png"), full_page=True)
        page.click("text=what was done (its session)")
        shown["tool"] = page.locator('.tool-call[data-tool="lookup"]').inner_text()
        page.goto(f"{url}/console/tasks")
        shown["listed"] = page.locator('#tasks tr[data-task="t1"]').get_attribute("data-state")
        return shown

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shown = in_browser(check)
    api = httpx.get(f"{url}/v1/tasks/t1").json()
    assert api["state"] == "completed"
    assert (shown["used"], shown["budget"]) == (
        api["iterations"]["used"],
        api["iterations"]["budget"],
    )
    assert (shown["input"], shown["output"]) == (
        api["usage"]["input_tokens"],
        api["usage"]["output_tokens"],
    )
    assert "ankka is an agent platform for Kubernetes" in shown["result"]
    assert 'lookup({"topic": "ankka"})' in shown["tool"]
    assert shown["listed"] == "completed"


REFUND_SCRIPT: Script = [
    {"tool_calls": [{"name": "refund", "arguments": {"order": "A1", "amount": 250}}]},
    {"text": "Refunded A1."},
]


def test_a_pending_call_is_approved_through_the_page_and_the_turn_resumes(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    target = "tests.integration.approval_services:service"
    runtime = serve(standin(REFUND_SCRIPT).url, target=target, env=CONSOLE_ON)
    url = runtime.url
    waiting = httpx.post(
        f"{url}/v1/agents/refunds/sessions/r1", json={"message": "refund A1"}, timeout=30
    )
    assert waiting.status_code == 202, waiting.text
    (approval,) = waiting.json()["approvals"]

    def approve(page: Page) -> str:
        page.goto(f"{url}/console/approvals")
        row = page.locator(f'#approvals tr[data-approval="{approval["id"]}"]')
        assert "refund(" in row.inner_text()
        row.locator('button[value="approve"]').click()
        # The decision lands on its session, which confirms it and shows who took it.
        page.wait_for_url(f"{url}/console/sessions/r1?decided={approval['id']}")
        assert page.locator("#confirmation").is_visible()
        decided = page.locator(f'#decisions tr[data-decided="{approval["id"]}"]')
        assert decided.get_attribute("data-decision") == "approved"
        assert "local" in decided.inner_text()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "console-approvals.png"), full_page=True)
        page.goto(f"{url}/console/approvals")
        pending = page.content()
        page.select_option('form.filters select[name="state"]', "approved")
        page.click('form.filters button[type="submit"]')
        done = page.locator(f'#approvals tr[data-approval="{approval["id"]}"]')
        assert done.get_attribute("data-state") == "approved"
        assert "approved by local" in done.inner_text()
        return pending

    after = in_browser(approve)
    assert approval["id"] not in after  # no longer pending
    listed = httpx.get(f"{url}/v1/approvals", params={"session": "r1"}).json()["approvals"]
    assert [(a["state"], a["decided_by"]) for a in listed] == [("approved", "local")]
    messages = httpx.get(f"{url}/v1/sessions/r1/messages").json()["messages"]
    assert messages[-1]["content"] == "Refunded A1."  # the turn resumed and finished


def test_a_decision_posted_from_another_site_is_refused(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    target = "tests.integration.approval_services:service"
    runtime = serve(standin(REFUND_SCRIPT).url, target=target, env=CONSOLE_ON)
    waiting = httpx.post(
        f"{runtime.url}/v1/agents/refunds/sessions/r2", json={"message": "refund A1"}, timeout=30
    )
    (approval,) = waiting.json()["approvals"]
    forged = httpx.post(
        f"{runtime.url}/console/approvals/{approval['id']}",
        data={"decision": "approve", "digest": approval["digest"]},
        headers={"Origin": "http://evil.example"},
    )
    assert forged.status_code == 403
    listed = httpx.get(f"{runtime.url}/v1/approvals", params={"session": "r2"}).json()
    assert [a["state"] for a in listed["approvals"]] == ["pending"]


# A notification of each kind a task's stream sends, as its data (``Notice.as_dict``'s own
# fields and the event's), with what its page shows of it; a kind the stream sends and the
# page does not show fails the test below.
NOTICES: dict[str, tuple[dict[str, Any], str]] = {
    "snapshot": ({"state": "in-progress"}, "now in-progress"),
    "dropped": ({"count": 2}, "2 notification(s) missed"),
    "iteration_started": ({"iteration": 1}, "iteration started 1"),
    "iteration_completed": ({"iteration": 1}, "iteration completed 1"),
    "task_delegated": ({"child": "c1", "child_agent": "writer"}, "delegated task c1 to writer"),
    "task_handed_off": ({"to": "writer", "note": "yours now"}, "handed off to writer: yours now"),
    "task_artifact": (
        {"agent": "remote", "artifact": "a1", "name": "notes", "text": "draft one"},
        "artifact notes from remote: draft one",
    ),
    "approval_requested": ({"id": "ap1", "tool": "publish"}, "approval requested for publish"),
    "approval_decided": (
        {"id": "ap1", "decision": "approved", "decided_by": "ann"},
        "approval ap1 approved by ann",
    ),
    "approval_expiring": (
        {"id": "ap1", "tool": "publish", "expires_at": "2026-12-04T06:00:00+00:00"},
        "approval for publish expires at 2026-12-04T06:00:00+00:00",
    ),
}
ENDS = ("task_completed", "task_failed", "task_cancelled")  # shown by the page rendered again


def test_a_tasks_page_shows_every_kind_of_notification_its_stream_sends(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    # The task waits on its model while the page is open; the browser is handed one of each
    # kind the stream sends (TASK_EVENTS, from the server's own list) in place of the stream.
    slow = [{**turn, "delay_ms": 60_000} for turn in TASKS_SCRIPT]
    runtime = serve(standin(slow).url, target="examples.tasks:service", env=CONSOLE_ON)
    url = runtime.url
    body = {"type": "summary", "instructions": "Summarise ankka."}
    created = httpx.put(f"{url}/v1/agents/researcher/tasks/t1", json=body, timeout=30)
    assert created.status_code == 201, created.text
    sent = [kind for kind in TASK_EVENTS if kind not in ENDS]
    stream = "retry: 600000\n\n" + "".join(
        f"event: {kind}\ndata: "
        f"{json.dumps({'event': kind, 'agent': 'researcher', **NOTICES.get(kind, ({}, ''))[0]})}"
        "\n\n"
        for kind in sent
    )

    def check(page: Page) -> list[tuple[str, str]]:
        page.route(
            f"{url}/v1/tasks/t1/notifications",
            lambda route: route.fulfill(
                status=200, headers={"content-type": "text/event-stream"}, body=stream
            ),
        )
        page.goto(f"{url}/console/tasks/t1")
        page.wait_for_selector(f'#progress li[data-event="{sent[-1]}"]', state="attached")
        items = page.locator("#progress li")
        return [
            (items.nth(i).get_attribute("data-event") or "", items.nth(i).inner_text())
            for i in range(items.count())
        ]

    shown = in_browser(check)
    assert [kind for kind, _ in shown] == sent  # every kind, once, in order
    for kind, text in shown:
        assert text == (NOTICES[kind][1] if kind in NOTICES else kind.replace("_", " ")), kind


setup = conversations.setup  # the fixture: a store, and the servers started on it


def test_a_conversations_page_shows_a_run_cut_off_why_and_gone_on_with(setup: Setup) -> None:
    slow = says("never heard", when="tool", delay_ms=20000)
    model = setup.standin(
        [calls("note", topic="sqlite"), slow, says("sqlite is one file.", when="tool"),
         says("ann here")]
    )  # fmt: skip
    server = setup.serve(model, env=CONSOLE_ON)
    url = f"{server.url}/v1/conversations/tooled/sessions/s1"
    cut_off(setup, None, url)  # the stream's caller leaves mid-turn
    assert cut_recorded(setup, "tooled") == "caller_left"
    converse(server, "tooled")  # the same message: the run goes on, and ends
    recorded = [kind for kind, _ in setup.records("tooled")]

    def check(page: Page) -> tuple[list[str], str, str]:
        page.goto(f"{server.url}/console/sessions/conversation:tooled:s1")
        run = page.locator("#conversation section.run")
        assert run.count() == 1
        marked = run.locator("[data-record]")
        kinds = [marked.nth(i).get_attribute("data-record") or "" for i in range(marked.count())]
        cut = run.locator('li[data-record="conversation_cut_off"][data-cause="caller_left"]')
        resumed = run.locator('li[data-record="conversation_resumed"]')
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "console-conversation.png"), full_page=True)
        return kinds, cut.inner_text(), resumed.inner_text()

    kinds, cut, resumed = in_browser(check)
    # Every record of the run is shown, in the order written (a tool's listing and result are
    # the speaker's work; the session's opening is not the run's).
    work = ("session_opened", "mcp_tools", "tool_result", "unwritten_calls")
    assert kinds == [kind for kind in recorded if kind not in work], recorded
    assert "conversation_cut_off" in kinds and "conversation_resumed" in kinds
    assert cut.startswith("Cut off: its stream's caller left"), cut
    assert resumed.startswith("Gone on with"), resumed
