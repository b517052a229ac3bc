"""The console's pure parts (views, charts, pages) and who may reach it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import httpx

from ankka.runtime.declare.agents import Service
from ankka.runtime.drivers.request import SessionSummary
from ankka.runtime.records.accounting import SessionUsage
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ModelCall,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.records.registry import Record
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.records.tasks import TaskRecord, TaskSpec, TaskState
from ankka.runtime.serve.console.access import is_loopback
from ankka.runtime.serve.console.charts import Bar, budget_bar, stacked_bars
from ankka.runtime.serve.console.listing import listing
from ankka.runtime.serve.console.pages import session_page
from ankka.runtime.serve.console.tasks_pages import task_page, tasks_page
from ankka.runtime.serve.console.views import session_view
from ankka.runtime.serve.http import create_app
from ankka.runtime.serve.identity import Identify
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store


def _call(agent: str, model: str, tokens: int) -> ModelCall:
    return ModelCall("default", model, agent, 12.0, Usage(tokens, 1))


MESSAGES: list[Message] = [
    UserMessage("<b>hi</b>", "a", "t1"),
    AssistantMessage(None, (ToolCall("c1", "look", '{"q": 1}'),), "a", "t1", _call("a", "m", 5)),
    ToolResult("c1", "look", "found", False, "a", "t1"),
    AssistantMessage("done", (), "a", "t1", _call("a", "m", 7), Usage(12, 2)),
    UserMessage("again", "b", "t2"),
    AssistantMessage("ok", (), "b", "t2", _call("b", "n", 3), Usage(3, 1)),
]
SUMMARY = SessionSummary("s", 6, 0, SessionUsage(turns=2, written=Usage(15, 3)))


def test_a_sessions_messages_are_grouped_by_turn_with_tokens_per_agent_and_model() -> None:
    view = session_view("s", MESSAGES, SUMMARY)
    assert [t.turn for t in view.turns] == ["t1", "t2"]
    assert [c.name for c in view.turns[0].tool_calls] == ["look"]
    assert view.turns[0].usage == Usage(12, 2)
    assert [(u.agent, u.model, u.calls, u.usage) for u in view.by_agent_model] == [
        ("a", "m", 2, Usage(12, 2)),
        ("b", "n", 1, Usage(3, 1)),
    ]


def test_the_page_escapes_what_was_said_and_shows_cost_as_unknown() -> None:
    page = session_page(session_view("s", MESSAGES, SUMMARY))
    assert "<b>hi</b>" not in page
    assert "&lt;b&gt;hi&lt;/b&gt;" in page
    assert 'data-tool="look"' in page
    assert "unknown" in page
    assert "$" not in page


def test_the_chart_draws_one_bar_per_turn_scaled_to_the_tallest() -> None:
    svg = stacked_bars(
        [Bar("1", (10, 5)), Bar("2", (20, 10))],
        series=("input", "output"),
        colours=("#00f", "#f80"),
        title="tokens <per> turn",
    )
    assert svg.count('<g class="bar"') == 2
    assert 'data-total="15"' in svg
    assert 'data-total="30"' in svg
    assert "tokens &lt;per&gt; turn" in svg
    assert "<svg" in svg
    assert "nothing yet" in stacked_bars([], series=(), colours=(), title="t")


def test_only_loopback_addresses_count_as_loopback() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert not is_loopback("10.0.0.5")
    assert not is_loopback("testclient")
    assert not is_loopback(None)


async def test_a_caller_off_loopback_is_refused(tmp_path: Path) -> None:
    store = await journal_store(str(tmp_path / "s.sqlite3"))
    async with store, runtime_for(Service("x"), store=store, providers={}) as runtime:
        app = create_app(runtime, console=True)
        for client, status in ((("10.1.2.3", 5000), 403), (("127.0.0.1", 5000), 200)):
            transport = httpx.ASGITransport(app=app, client=client)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                assert (await http.get("/console")).status_code == status
                assert (await http.get("/console/static/console.js")).status_code == status


async def test_off_loopback_a_checked_caller_sees_only_what_the_policy_lets_it_read(
    tmp_path: Path,
) -> None:
    store = await journal_store(str(tmp_path / "s.sqlite3"))
    tokens = {"admin-token": "ankka://platform/console", "shop-token": "ankka://service/a/shop"}
    async with store, runtime_for(Service("x"), store=store, providers={}) as runtime:
        for session, creator in (
            ("shops-own", "ankka://service/a/shop"),
            ("someone-elses", "b/web"),
        ):
            opened: list[Record] = [
                SessionOpened(creator, "x"),
                UserMessage(f"said in {session}", "x", "t1"),
            ]
            await runtime.context.journal.append(session, opened, expected=0)
        checked = create_app(
            runtime, console=True, identify=Identify(tls=False, tokens=tokens, trust=False)
        )
        trusting = create_app(
            runtime, console=True, identify=Identify(tls=False, tokens=None, trust=True)
        )
        far = ("10.1.2.3", 5000)
        cases = [
            (checked, {"Authorization": "Bearer admin-token"}, 200),  # the platform's identity
            (checked, {"Authorization": "Bearer shop-token"}, 200),  # a service: its own only
            (checked, {}, 401),  # unidentified: refused before the console
            (trusting, {}, 403),  # --trust-network identifies nobody
        ]
        pages = {}
        for app, headers, status in cases:
            transport = httpx.ASGITransport(app=app, client=far)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                answer = await http.get("/console", headers=headers)
                assert answer.status_code == status, (headers, answer.text[:200])
                pages[headers.get("Authorization")] = answer.text
                if headers.get("Authorization") == "Bearer shop-token":
                    theirs = await http.get("/console/sessions/someone-elses", headers=headers)
                    assert theirs.status_code == 403
                    assert "a/shop" in theirs.text and "said in" not in theirs.text
                    mine = await http.get("/console/sessions/shops-own", headers=headers)
                    assert mine.status_code == 200 and "said in shops-own" in mine.text
        assert "someone-elses" in pages["Bearer admin-token"]
        assert "shops-own" in pages["Bearer shop-token"]
        assert "someone-elses" not in pages["Bearer shop-token"]
        assert "Showing" not in pages["Bearer shop-token"], "no count of others' sessions"


def test_the_budget_bar_fills_the_share_used_and_never_past_the_whole() -> None:
    half = budget_bar(5, 10, title="iterations")
    assert 'data-used="5" data-budget="10"' in half
    assert "5 of 10 iterations" in half
    full = budget_bar(12, 10, title="iterations")
    assert 'width="432.0"' in full  # the whole track (480 less both margins), not more


ALL_TASKS = listing("/console/tasks", {}, ())


def _task(state: TaskState, **changes: object) -> TaskRecord:
    spec = TaskSpec(agent="r", type="summary", instructions="<i>do</i>")
    return replace(TaskRecord("t<1>", spec, state, budget=5, iterations_used=2), **changes)  # type: ignore[arg-type]


def test_a_working_task_is_followed_live_and_a_finished_one_is_not() -> None:
    working = task_page(_task(TaskState.IN_PROGRESS))
    assert 'data-events="/v1/tasks/t&lt;1&gt;/notifications"' in working
    assert 'data-used="2" data-budget="5"' in working
    assert "&lt;i&gt;do&lt;/i&gt;" in working
    done = task_page(_task(TaskState.FAILED, reason="no <source>"))
    assert "data-events" not in done
    assert "no &lt;source&gt;" in done
    assert 'data-state="failed"' in tasks_page([_task(TaskState.FAILED)], ALL_TASKS, cursor=None)


def test_a_kubectl_applied_task_is_shown_by_its_namespace_and_name() -> None:
    spec = TaskSpec(agent="r", type="summary", instructions="do", name="shop/summary-1")
    named = TaskRecord("5f1c-uid", spec, TaskState.IN_PROGRESS, budget=5)
    page = task_page(named)
    assert "<h1>Task shop/summary-1</h1>" in page and "id 5f1c-uid" in page
    listed = tasks_page([named], ALL_TASKS, cursor=None)
    assert '<a href="/console/tasks/5f1c-uid">shop/summary-1</a>' in listed
    # The name is for people: the same task, handed again without it, is the same task.
    assert spec.digest() == replace(spec, name=None).digest()
    assert TaskSpec.from_dict(spec.as_dict()) == spec
