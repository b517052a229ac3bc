"""A lead's backlog tools act for its task's creator, checked as the routes check a caller:
``ankka serve tests.integration.lead_access_services:service`` with ``--token-file`` (alice,
bob, carol, the platform) and an ``--access-file`` whose lead's access lets carol write, the
stand-in as the model. alice adds two items over HTTP (the second waits on the first, which
the clerk holds claimed). bob, whom the policy keeps from alice's items, gives the lead a task
whose model tries to cancel, re-prioritise and depend on alice's waiting item: each call is an
error result naming this task's creator, and the item is as it was. carol's task does the same
and it is done.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, model_env
from tests.integration.tasks_crash import model_requests
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

TOKENS = {
    "alice": "alice-token-0123456789",
    "bob": "bob-token-0123456789ab",
    "carol": "carol-token-0123456789",
    "ankka://platform/admin": "admin-token-01234567",
}
PLATFORM = "ankka://platform/admin"
NOTE = {"type": "note", "instructions": "Note the plan."}
ALICES = {"type": "note", "instructions": "Alice's own note."}


def _planner(*calls: dict[str, Any]) -> list[dict[str, Any]]:
    """A planner's task: ``calls`` in one answer, then complete_task."""
    done = {"name": "complete_task", "arguments": {"note": "planned"}}
    return [{"when": "user", "tool_calls": list(calls)}, {"when": "tool", "tool_calls": [done]}]


def _cancel(item: str) -> dict[str, Any]:
    return {"name": "backlog_cancel_item", "arguments": {"item": item}}


def _prioritise(item: str, priority: int) -> dict[str, Any]:
    return {"name": "backlog_prioritise_item", "arguments": {"item": item, "priority": priority}}


def _add(depends_on: str) -> dict[str, Any]:
    return {"name": "backlog_add_item", "arguments": {**NOTE, "depends_on": [depends_on]}}


SCRIPT: list[dict[str, Any]] = [
    {"when": "user", "tool_calls": [{"name": "hold", "arguments": {}}]},  # the clerk, on a0
    *_planner(_cancel("a1"), _prioritise("a1", 9), _add("a1"), _add("zz")),  # bob's task
    *_planner(_prioritise("a1", 7), _cancel("a1")),  # carol's task
    {"when": "tool", "tool_calls": [{"name": "complete_task", "arguments": {"text": "ok"}}]},
]


def _serve(standin: Server, tmp_path: Path, hold: Path) -> Server:
    tokens, access = tmp_path / "tokens", tmp_path / "access.yaml"
    tokens.write_text("".join(f"{name} {token}\n" for name, token in TOKENS.items()))
    access.write_text("agents:\n  planner:\n    write: [carol]\n")
    command = ankka_command(
        "serve", "tests.integration.lead_access_services:service", "--port", "0",
        "--store", f"sqlite:///{tmp_path / 'store.sqlite3'}",
        "--token-file", str(tokens), "--access-file", str(access),
    )  # fmt: skip
    return start(command, env={**model_env(standin.url), "HOLD_FILE": str(hold)})


def _results(call: Callable[..., httpx.Response], who: str, task: str) -> list[dict[str, Any]]:
    """The tool results of ``task``'s session, as its creator ``who`` reads them."""
    messages = call(who, "GET", f"/v1/sessions/task:{task}/messages")
    assert messages.status_code == 200, messages.text
    return [m for m in messages.json()["messages"] if m.get("role") == "tool"]


def test_a_leads_tools_change_only_the_items_its_tasks_creator_may_change(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin(SCRIPT)
    hold = tmp_path / "hold"
    hold.touch()
    server = _serve(model, tmp_path, hold)
    servers.append(server)

    def call(who: str, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {TOKENS[who]}"}
        return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=70, **kw)

    def item(name: str) -> dict[str, Any]:
        found = call("alice", "GET", f"/v1/teams/desk/items/{name}")
        assert found.status_code == 200, found.text
        shown: dict[str, Any] = found.json()
        return shown

    def planned(who: str, task: str) -> None:
        made = call(
            who,
            "PUT",
            f"/v1/agents/planner/tasks/{task}",
            json={"type": "plan", "instructions": "Plan."},
        )
        assert made.status_code == 201, made.text
        done = call(who, "GET", f"/v1/tasks/{task}", params={"wait": 60}).json()
        assert done["state"] == "completed", done

    assert call("alice", "PUT", "/v1/teams/desk/items/a0", json=ALICES).status_code == 201
    waiting = call("alice", "PUT", "/v1/teams/desk/items/a1", json={**ALICES, "depends_on": ["a0"]})
    assert waiting.status_code == 201, waiting.text
    eventually(
        lambda: item("a0")["state"] == "claimed" and len(model_requests(model)) == 1,
        what="the clerk holding a0 claimed, a1 waiting on it",
        timeout=60,
    )
    assert call("bob", "GET", "/v1/teams/desk/items/a1").status_code == 403

    planned("bob", "b1")
    results = _results(call, "bob", "b1")[:4]
    assert [r["is_error"] for r in results] == [True] * 4, results
    said = [r["content"].partition("\n\n")[0] for r in results]  # not the iteration's note
    refused = "this task's creator 'bob' may not change item 'a1' of team 'desk'"
    assert said[0].startswith("nothing was cancelled: ") and refused in said[0]
    assert said[1].startswith("no priority was changed: ") and refused in said[1]
    # Depending on alice's item is answered as depending on one not on the backlog.
    assert said[2].startswith("nothing was added: ") and "not 'bob''s to read" in said[2]
    assert said[2].replace("'a1'", "'zz'").replace("b1:1.2", "b1:1.3") == said[3]
    assert "Alice's own note." not in json.dumps(said)
    shown = item("a1")
    assert (shown["state"], shown["priority"], shown["created_by"]) == ("waiting", 0, "alice")
    every = call(PLATFORM, "GET", "/v1/teams/desk/items").json()["items"]
    assert [i["id"] for i in every] == ["a0", "a1"]  # bob's adds added nothing
    route = call("bob", "POST", "/v1/teams/desk/items/a1/cancel")  # the same check
    assert route.status_code == 403 and "caller 'bob' may not change" in route.text

    planned("carol", "c1")  # the lead's access names carol
    results = _results(call, "carol", "c1")[:2]
    assert [r["is_error"] for r in results] == [False, False], results
    assert json.loads(results[0]["content"])["priority"] == 7
    shown = item("a1")
    assert (shown["state"], shown["priority"]) == ("cancelled", 7)

    hold.unlink()  # the clerk finishes a0, cancelling nothing more
    final = call("alice", "GET", "/v1/teams/desk/items/a0", params={"wait": 60}).json()
    assert final["state"] == "completed", final
