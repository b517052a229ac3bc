"""The lead plans: ``ankka serve tests.integration.lead_services:service`` with the stand-in as
the model. The planner's task adds an item to its team's backlog through its backlog tool
and waits in ``hold``; the runtime is SIGKILLed there (after the add's commit, before the
next model call) and started again. The backlog holds the item once, the member finished it,
and the stand-in was asked no call twice. With the add's result struck from the journal
before the restart (the window between the add's commit and its result's), the add runs
again, finds the item it made (its id derived from the task and the call) and adds nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, model_env
from tests.integration.tasks_crash import asked_keys, model_requests, recorded_keys
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

ITEM = "p1:1.0"  # the first call of the planner's task p1's first iteration
ADD = {
    "type": "summary",
    "instructions": "Summarise sqlite.",
    "priority": 2,
}
SCRIPT: list[dict[str, Any]] = [
    {  # the planner: add an item, then hold
        "when": "user",
        "tool_calls": [
            {"name": "backlog_add_item", "arguments": ADD},
            {"name": "hold", "arguments": {}},
        ],
        "usage": {"input_tokens": 30, "output_tokens": 6},
    },
    {  # the researcher, working the item
        "when": "user",
        "tool_calls": [{"name": "lookup", "arguments": {"topic": "sqlite"}}],
        "usage": {"input_tokens": 10, "output_tokens": 2},
    },
    {
        "when": "tool",
        "tool_calls": [
            {"name": "complete_task", "arguments": {"title": "sqlite", "points": ["one file"]}}
        ],
        "usage": {"input_tokens": 20, "output_tokens": 4},
    },
    {  # the planner again, after the restart
        "when": "tool",
        "tool_calls": [{"name": "complete_task", "arguments": {"note": "planned"}}],
        "usage": {"input_tokens": 40, "output_tokens": 3},
    },
]


def serve_desk(standin: Server, store: str, hold: Path) -> Server:
    command = ankka_command(
        "serve", "tests.integration.lead_services:service", "--port", "0", "--store", store
    )
    return start(command, env={**model_env(standin.url), "HOLD_FILE": str(hold)})


def start_planning(
    model: Server, tmp_path: Path, gates: tuple[str, ...], instructions: str
) -> tuple[Server, Path, Path]:
    """``ankka serve`` on a new SQLite store with the hold files of ``gates`` in place, and
    the planner given the task ``p1``: the server, the store's path and the hold file."""
    path, hold = tmp_path / "store.sqlite3", tmp_path / "hold"
    for gate in gates:
        Path(f"{hold}{gate}").touch()
    server = serve_desk(model, f"sqlite:///{path}", hold)
    made = httpx.put(
        f"{server.url}/v1/agents/planner/tasks/p1",
        json={"type": "plan", "instructions": instructions},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    return server, path, hold


def listing(server: Server) -> list[dict[str, Any]]:
    answer = httpx.get(f"{server.url}/v1/teams/desk/items", timeout=30)
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def strike_the_last_result(path: Path, tool: str = "backlog_add_item") -> None:
    """As if the runtime died after ``tool``'s commit (an add's, a message's) and before its
    result was recorded: p1's last record, that result, is struck from the journal."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT seq, kind, body FROM events WHERE session = 'task:p1' ORDER BY seq"
        ).fetchall()
        seq, kind, body = rows[-1]
        assert kind == "tool_result" and tool in body, rows[-1]
        db.execute("DELETE FROM events WHERE session = 'task:p1' AND seq = ?", (seq,))


@pytest.mark.parametrize("result_recorded", [True, False], ids=["recorded", "struck"])
def test_a_leads_item_is_added_once_across_a_kill_and_no_call_is_asked_twice(
    standin: Callable[[Script], Server],
    servers: list[Server],
    tmp_path: Path,
    result_recorded: bool,
) -> None:
    model = standin(SCRIPT)
    first, path, hold = start_planning(model, tmp_path, ("",), "Plan a summary of sqlite.")
    servers.append(first)
    store = f"sqlite:///{path}"
    eventually(
        lambda: [(i["id"], i["state"]) for i in listing(first)] == [(ITEM, "completed")],
        what="the planner's item added and finished, the planner held",
        timeout=90,
    )
    first.process.kill()  # SIGKILL: after the add's commit, before the planner's next call
    first.process.wait()
    assert len(model_requests(model)) == 3
    if not result_recorded:
        strike_the_last_result(path)
    recorded = recorded_keys(store)
    before = len(model_requests(model))
    hold.unlink()
    second = serve_desk(model, store, hold)
    servers.append(second)
    done = httpx.get(f"{second.url}/v1/tasks/p1", params={"wait": 60}, timeout=70).json()
    assert done["state"] == "completed", done
    items = listing(second)
    assert [i["id"] for i in items] == [ITEM]  # once
    item = items[0]
    assert (item["state"], item["priority"], item["claims"]) == ("completed", 2, 1)
    assert item["claimed_by"]["agent"] == "researcher"
    assert item["created_by"] == "local"  # the lead's task's creator
    asked = asked_keys(model_requests(model))
    assert len(asked) == len(SCRIPT) and len(set(asked)) == len(asked)
    again = sorted(set(asked_keys(model_requests(model)[before:])) & recorded)
    assert again == [], f"recorded calls asked again after the kill: {again}"
    messages = httpx.get(f"{second.url}/v1/sessions/task:p1/messages", timeout=30).json()
    results = [m for m in messages["messages"] if m.get("role") == "tool"]
    added = json.loads(next(r for r in results if r["name"] == "backlog_add_item")["content"])
    assert (added["id"], added["added"]) == (ITEM, result_recorded)


def test_a_leads_refused_calls_are_error_results_naming_what_was_wrong(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    calls = [
        {"name": "backlog_add_item", "arguments": {"type": "poem", "instructions": "A poem."}},
        {"name": "backlog_add_item", "arguments": {**ADD, "depends_on": ["nowhere"]}},
        {"name": "backlog_add_item", "arguments": {**ADD, "team": "sports"}},
        {"name": "backlog_cancel_item", "arguments": {"item": "nowhere"}},
        {"name": "backlog_prioritise_item", "arguments": {"item": "nowhere", "priority": 1}},
        {"name": "backlog_prioritise_item", "arguments": {"item": "x", "priority": "high"}},
    ]
    model = standin(
        [
            {"when": "user", "tool_calls": calls},
            {"when": "tool", "tool_calls": [{"name": "complete_task", "arguments": {"note": "-"}}]},
        ]
    )
    server = serve_desk(model, f"sqlite:///{tmp_path / 'store.sqlite3'}", tmp_path / "hold")
    servers.append(server)
    made = httpx.put(
        f"{server.url}/v1/agents/planner/tasks/p2",
        json={"type": "plan", "instructions": "Plan badly."},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    done = httpx.get(f"{server.url}/v1/tasks/p2", params={"wait": 60}, timeout=70).json()
    assert done["state"] == "completed", done
    assert listing(server) == []
    offered = {t["function"]["name"] for t in model_requests(model)[0]["body"]["tools"]}
    assert {"backlog_add_item", "backlog_cancel_item", "backlog_prioritise_item"} <= offered
    messages = httpx.get(f"{server.url}/v1/sessions/task:p2/messages", timeout=30).json()
    results = [m for m in messages["messages"] if m.get("role") == "tool"]
    assert [r["is_error"] for r in results[:6]] == [True] * 6
    said = [r["content"] for r in results[:6]]
    assert "nothing was added" in said[0] and "'poem'" in said[0]
    assert "'nowhere'" in said[1] and "'sports'" in said[2] and "you lead desk" in said[2]
    assert "nothing was cancelled" in said[3] and "'nowhere'" in said[3]
    assert "no priority was changed" in said[4] and "priority" in said[5]


def told_then_restarted(
    first: Server, model: Server, path: Path, hold: Path, servers: list[Server]
) -> None:
    """Release the planner's first iteration (gate ``.a``: its last result carries what it
    is told), SIGKILL ``first`` once its second answer is recorded (the hold of gate ``.b``
    running: before its next model call), and start the runtime again (into ``servers``),
    until p1 completes."""
    Path(f"{hold}.a").unlink()
    eventually(
        lambda: assistant_answers(path, "task:p1") == 2,
        what="the planner's second answer recorded, its hold running",
        timeout=60,
    )
    first.process.kill()
    first.process.wait()
    Path(f"{hold}.b").unlink()
    second = serve_desk(model, f"sqlite:///{path}", hold)
    servers.append(second)
    done = httpx.get(f"{second.url}/v1/tasks/p1", params={"wait": 60}, timeout=70).json()
    assert done["state"] == "completed", done


def assistant_answers(path: Path, session: str) -> int:
    with sqlite3.connect(path) as db:
        found = db.execute(
            "SELECT COUNT(*) FROM events WHERE session = ? AND kind = 'assistant_message'",
            (session,),
        ).fetchone()
    return int(found[0])


def test_the_lead_hears_its_items_end_once_at_its_next_iteration_across_a_restart(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    planner = SCRIPT[0]["tool_calls"]
    script = [
        {**SCRIPT[0], "tool_calls": [planner[0], {"name": "hold", "arguments": {"gate": ".a"}}]},
        SCRIPT[1],
        SCRIPT[2],
        {"when": "tool", "tool_calls": [{"name": "hold", "arguments": {"gate": ".b"}}]},
        SCRIPT[3],
    ]
    model = standin(script)
    first, path, hold = start_planning(model, tmp_path, (".a", ".b"), "Plan a summary of sqlite.")
    servers.append(first)
    eventually(
        lambda: [(i["id"], i["state"]) for i in listing(first)] == [(ITEM, "completed")],
        what="the planner's item finished while the planner is held",
        timeout=90,
    )
    told_then_restarted(first, model, path, hold, servers)
    requests = [r["body"]["messages"] for r in model_requests(model)]
    assert len(requests) == len(script)
    told, after = requests[3], requests[4]
    news = told[-1]["content"]
    assert told[-1]["role"] == "tool" and "Backlog news" in news
    assert f"item '{ITEM}' of team 'desk' (summary) completed by researcher" in news
    assert '"points": ["one file"]' in news
    assert after[: len(told)] == told  # nothing sent was rewritten
    shown = [m for m in after if "Backlog news" in str(m.get("content"))]
    assert shown == [told[-1]]  # told once: not again after the restart
