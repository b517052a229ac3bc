"""Team messages served: ``ankka serve tests.integration.lead_services:service`` (the lead
``planner`` over the member ``researcher``), the stand-in as the model.

- The researcher, working the planner's item, sends the planner a question with
  ``team_send_message``; the planner, held in its ``hold`` tool meanwhile, is told it with the
  last result of that iteration (its next model request), once: after a SIGKILL and a restart
  the request that follows repeats what was sent byte for byte and tells it no more.
- The planner sends the researcher a note, then holds; the runtime is SIGKILLed there and
  started again (with the send's result kept, or struck from the journal, as if the process
  died between the message's commit and its result's): the channel holds the message once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script
from tests.integration.tasks_crash import model_requests
from tests.integration.test_team_lead import (
    ADD,
    ITEM,
    listing,
    serve_desk,
    start_planning,
    strike_the_last_result,
    told_then_restarted,
)
from tests.integration.test_team_lead_access import PLATFORM, TOKENS, _serve
from tests.support.eventually import eventually
from tests.support.processes import Server

pytestmark = pytest.mark.integration

QUESTION = {"to": "planner", "kind": "question", "text": "Which sqlite version counts?"}
NOTE = {"to": "researcher", "kind": "note", "text": "Prefer the 3.45 docs."}
SENT_BY_RESEARCHER = f"team:desk:{ITEM}:1.0"  # the researcher's task, iteration 1, call 0


def _send(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": "team_send_message", "arguments": arguments}


def _channel(server: Server) -> list[dict[str, Any]]:
    answer = httpx.get(f"{server.url}/v1/teams/desk/messages", timeout=30)
    assert answer.status_code == 200, answer.text
    messages: list[dict[str, Any]] = answer.json()["messages"]
    return messages


def test_a_members_message_reaches_the_lead_at_its_next_iteration_once(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    script = [
        {  # the planner: add the item, then hold in .a
            "when": "user",
            "tool_calls": [
                {"name": "backlog_add_item", "arguments": ADD},
                {"name": "hold", "arguments": {"gate": ".a"}},
            ],
        },
        {  # the researcher asks the planner, and looks it up
            "when": "user",
            "tool_calls": [_send(QUESTION), {"name": "lookup", "arguments": {"topic": "sqlite"}}],
        },
        {
            "when": "tool",
            "tool_calls": [
                {"name": "complete_task", "arguments": {"title": "sqlite", "points": ["one"]}}
            ],
        },
        {"when": "tool", "tool_calls": [{"name": "hold", "arguments": {"gate": ".b"}}]},
        {"when": "tool", "tool_calls": [{"name": "complete_task", "arguments": {"note": "ok"}}]},
    ]
    model = standin(script)
    first, path, hold = start_planning(model, tmp_path, (".a", ".b"), "Plan a summary of sqlite.")
    servers.append(first)
    eventually(
        lambda: [(i["id"], i["state"]) for i in listing(first)] == [(ITEM, "completed")],
        what="the researcher's item finished (its question sent) while the planner is held",
        timeout=90,
    )
    sent = _channel(first)
    assert [(m["id"], m["sender"], m["sender_task"], m["to"], m["kind"]) for m in sent] == [
        (SENT_BY_RESEARCHER, "researcher", f"team:desk:{ITEM}", "planner", "question")
    ]
    offered = {t["function"]["name"] for t in model_requests(model)[1]["body"]["tools"]}
    assert "team_send_message" in offered  # a member is offered it
    # The planner's iteration ends (its last result tells it), and it is killed after that
    # was recorded, before its next model call.
    told_then_restarted(first, model, path, hold, servers)
    requests = [r["body"]["messages"] for r in model_requests(model)]
    assert len(requests) == len(script)
    researchers = requests[2]
    assert "Team messages" not in json.dumps(researchers)  # nothing was sent to it
    told, after = requests[3], requests[4]
    news = told[-1]["content"]
    assert told[-1]["role"] == "tool"
    line = (
        f"- [question] from researcher (team 'desk', message '{SENT_BY_RESEARCHER}'): "
        "Which sqlite version counts?"
    )
    assert "Team messages (sent to you; answer with team_send_message):\n" + line in news
    assert "Backlog news" in news  # with its items' news, in the same message
    assert after[: len(told)] == told  # nothing sent was rewritten
    shown = [m for m in after if "Which sqlite version counts?" in str(m.get("content"))]
    assert shown == [told[-1]]  # told once: not again after the restart


@pytest.mark.parametrize("result_recorded", [True, False], ids=["recorded", "struck"])
def test_a_message_is_sent_once_across_a_kill(
    standin: Callable[[Script], Server],
    servers: list[Server],
    tmp_path: Path,
    result_recorded: bool,
) -> None:
    model = standin(
        [
            {"when": "user", "tool_calls": [_send(NOTE), {"name": "hold", "arguments": {}}]},
            {"when": "tool", "tool_calls": [{"name": "complete_task", "arguments": {"note": "-"}}]},
        ]
    )
    first, path, hold = start_planning(model, tmp_path, ("",), "Tell the researcher.")
    servers.append(first)
    eventually(lambda: len(_channel(first)) == 1, what="the planner's note sent", timeout=60)
    first.process.kill()  # SIGKILL: in the hold, after the send's commit
    first.process.wait()
    if not result_recorded:
        strike_the_last_result(path, "team_send_message")
    hold.unlink()
    second = serve_desk(model, f"sqlite:///{path}", hold)
    servers.append(second)
    done = httpx.get(f"{second.url}/v1/tasks/p1", params={"wait": 60}, timeout=70).json()
    assert done["state"] == "completed", done
    sent = _channel(second)
    assert [(m["id"], m["text"]) for m in sent] == [("p1:1.0", NOTE["text"])]  # once
    messages = httpx.get(f"{second.url}/v1/sessions/task:p1/messages", timeout=30).json()
    results = [m for m in messages["messages"] if m.get("role") == "tool"]
    answered = json.loads(next(r for r in results if r["name"] == "team_send_message")["content"])
    assert answered == {"id": "p1:1.0", "team": "desk", "to": "researcher", "sent": result_recorded}
    assert len(model_requests(model)) == 2  # no call asked twice


def test_the_message_routes_authorise_validate_and_page(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    """(``tests.integration.lead_access_services``: alice, bob, carol whom the lead's access
    lets write, the platform; the desk's agents are the planner and the clerk.)"""
    server = _serve(standin([]), tmp_path, tmp_path / "hold")
    servers.append(server)

    def call(who: str, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {TOKENS[who]}"}
        return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kw)

    route = "/v1/teams/desk/messages"
    note = {"to": "clerk", "kind": "note", "text": "Alice's note.", "id": "a1"}
    made = call("alice", "POST", route, json=note)
    assert made.status_code == 201, made.text
    shown = made.json()
    assert (shown["id"], shown["sender"], shown["sender_task"], shown["created_by"]) == (
        "a1", "alice", None, "alice",
    )  # fmt: skip
    assert call("alice", "POST", route, json=note).status_code == 200  # the same: not twice
    other = call("alice", "POST", route, json={**note, "text": "Something else."})
    assert other.status_code == 409 and "'a1'" in other.text, other.text
    given = call("bob", "POST", route, json={"to": "everyone", "kind": "blocker", "text": "Stuck."})
    assert given.status_code == 201 and given.json()["id"].startswith("m-"), given.text
    for body, named in [
        ({**note, "id": "a2", "to": "stranger"}, "'stranger' is not an agent of team 'desk'"),
        ({**note, "id": "a3", "kind": "gossip"}, "kind"),
        ({**note, "id": "a4", "text": "x" * 2001}, "2000"),
        ({**note, "id": "bad id!"}, "'bad id!' is not a valid id"),
        ({"to": "clerk", "kind": "note"}, "text"),
    ]:
        refused = call("alice", "POST", route, json=body)
        assert refused.status_code == 422 and named in refused.text, (body, refused.text)
    assert call("alice", "POST", "/v1/teams/nowhere/messages", json=note).status_code == 404
    assert call("alice", "GET", "/v1/teams/nowhere/messages").status_code == 404
    assert httpx.get(f"{server.url}{route}", timeout=30).status_code == 401  # no token

    def ids(who: str) -> list[str]:
        listed = call(who, "GET", route)
        assert listed.status_code == 200, listed.text
        return [m["id"] for m in listed.json()["messages"]]

    bobs = given.json()["id"]
    assert ids("alice") == ["a1"] and ids("bob") == [bobs]  # each sees only its own
    assert ids("carol") == ["a1", bobs] == ids(PLATFORM)  # the lead's access; the platform
    for k in range(3):
        more = {"to": "everyone", "kind": "note", "text": f"Number {k}.", "id": f"p{k}"}
        assert call(PLATFORM, "POST", route, json=more).status_code == 201
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = call(PLATFORM, "GET", route, params=params).json()
        assert len(page["messages"]) <= 2
        seen += [m["id"] for m in page["messages"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == ["a1", bobs, "p0", "p1", "p2"]  # each once, in the order sent
    for params in ({"limit": 0}, {"limit": 501}, {"cursor": "not-a-cursor"}):
        refused = call(PLATFORM, "GET", route, params=params)
        assert refused.status_code == 422, (params, refused.text)
    assert "cursor" in call(PLATFORM, "GET", route, params={"cursor": "x"}).text
