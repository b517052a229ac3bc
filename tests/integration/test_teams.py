"""Teams over real processes: ``ankka serve examples.newsroom:service`` with the stand-in as
the model. Members claim the backlog's items and finish them; the newsroom's standup runs
to its end with its speakers and its reason; the routes' contract (201, 200, 409)."""

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

STANDIN = json.loads((Path(__file__).parents[2] / "examples/newsroom-standin.json").read_text())
SUMMARY = {"type": "summary", "instructions": "Summarise sqlite."}
DRAFT = {"type": "draft", "instructions": "Write up sqlite.", "depends_on": ["sqlite"]}


def serve_newsroom(standin: Server, store: str, *, lease: float | None = None) -> Server:
    command = ankka_command("serve", "examples.newsroom:service", "--port", "0", "--store", store)
    if lease is not None:
        command += ["--lease-seconds", str(lease)]
    return start(command, env=model_env(standin.url))


def put_item(server: Server, item: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.put(f"{server.url}/v1/teams/newsroom/items/{item}", json=body, timeout=30)


def wait_item(server: Server, item: str, seconds: float = 60) -> dict[str, Any]:
    url = f"{server.url}/v1/teams/newsroom/items/{item}"
    answer = httpx.get(url, params={"wait": seconds}, timeout=seconds + 10)
    assert answer.status_code == 200, answer.text
    record: dict[str, Any] = answer.json()
    return record


def test_the_example_script_runs_the_backlog_in_dependency_order_then_the_standup(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin(STANDIN)  # the whole example script: the backlog, then the standup
    server = serve_newsroom(model, f"sqlite:///{tmp_path / 'store.sqlite3'}")
    servers.append(server)
    assert put_item(server, "sqlite", SUMMARY).status_code == 201
    draft = put_item(server, "draft-1", DRAFT)
    assert draft.status_code == 201, draft.text
    assert draft.json()["state"] in ("waiting", "ready", "claimed")
    summary = wait_item(server, "sqlite")
    assert summary["state"] == "completed", summary
    assert summary["claimed_by"]["agent"] == "researcher"
    assert summary["claimed_by"]["instance"].startswith("team.newsroom.")
    assert summary["result"] == STANDIN[1]["tool_calls"][0]["arguments"]
    written = wait_item(server, "draft-1")
    assert written["state"] == "completed", written
    assert written["claimed_by"]["agent"] == "writer"
    assert set(written["result"]) == {"title", "body"}
    assert summary["reason"] is None and set(written) >= {"id", "type", "state", "result"}
    # The draft's model was shown the summary it depends on.
    writer_request = model_requests(model)[2]["body"]["messages"]
    assert "SQLite is an embedded database" in writer_request[1]["content"]
    listing = httpx.get(f"{server.url}/v1/teams/newsroom/items", timeout=30).json()
    assert [i["id"] for i in listing["items"]] == ["sqlite", "draft-1"]
    assert listing["counts"] == {"completed": 2}
    task = httpx.get(f"{server.url}/v1/tasks/{written['task']}", timeout=30).json()
    assert task["state"] == "completed" and task["agent"] == "writer"
    standup = httpx.post(
        f"{server.url}/v1/conversations/standup/sessions/monday",
        json={"message": "Good morning."},
        timeout=120,
    ).json()
    assert [t["speaker"] for t in standup["turns"]] == ["editor", "researcher", "writer"]
    assert standup["ended"]["reason"] == "max_turns"


def test_an_item_sent_again_is_the_same_item_and_a_different_body_is_refused(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin([])
    server = serve_newsroom(model, f"sqlite:///{tmp_path / 'store.sqlite3'}")
    servers.append(server)
    body = {"type": "draft", "instructions": "Write up nothing yet.", "depends_on": []}
    first = put_item(server, "d", body)
    assert first.status_code == 201, first.text
    assert put_item(server, "d", body).status_code == 200
    again = put_item(server, "d", {**body, "instructions": "Something else."})
    assert again.status_code == 409, again.text
    assert "different body" in again.json()["error"]["message"]
    unknown = put_item(server, "x", {"type": "poem", "instructions": "A poem."})
    assert unknown.status_code == 422 and "poem" in unknown.json()["error"]["message"]
    missing = put_item(server, "y", {**body, "depends_on": ["nowhere"]})
    assert missing.status_code == 422 and "nowhere" in missing.json()["error"]["message"]
    no_team = httpx.get(f"{server.url}/v1/teams/sports/items/d", timeout=30)
    assert no_team.status_code == 404 and "sports" in no_team.json()["error"]["message"]
    reserved = httpx.put(
        f"{server.url}/v1/agents/writer/tasks/team:newsroom:d",
        json={"type": "draft", "instructions": "x"},
        timeout=30,
    )
    assert reserved.status_code == 422, reserved.text


def test_the_standup_runs_round_robin_to_its_turn_limit_with_each_speaker(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin(STANDIN[3:])
    server = serve_newsroom(model, f"sqlite:///{tmp_path / 'store.sqlite3'}")
    servers.append(server)
    answer = httpx.post(
        f"{server.url}/v1/conversations/standup/sessions/monday",
        json={"message": "Good morning: what is everyone doing today?"},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    run = answer.json()
    assert [t["speaker"] for t in run["turns"]] == ["editor", "researcher", "writer"]
    assert [t["text"] for t in run["turns"]] == [t["text"] for t in STANDIN[3:]]
    assert run["ended"]["reason"] == "max_turns"
    assert run["skipped"] == []
    # The researcher was shown the editor's turn as someone else's, named.
    second = model_requests(model)[1]["body"]["messages"]
    assert "[editor] Today I review the sqlite draft." in second[-1]["content"]
    messages = httpx.get(
        f"{server.url}/v1/sessions/conversation:standup:monday/messages", timeout=30
    ).json()["messages"]
    assert [(m["role"], m.get("agent")) for m in messages] == [
        ("user", "standup"),
        ("assistant", "editor"),
        ("assistant", "researcher"),
        ("assistant", "writer"),
    ]


def test_cancelling_items_stops_their_tasks_and_cancels_what_waits_on_them(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    slow = {**STANDIN[0], "delay_ms": 3000}
    model = standin([slow, STANDIN[1]])
    server = serve_newsroom(model, f"sqlite:///{tmp_path / 'store.sqlite3'}")
    servers.append(server)
    assert put_item(server, "sqlite", SUMMARY).status_code == 201
    assert put_item(server, "draft-1", DRAFT).status_code == 201
    assert put_item(server, "draft-2", {**DRAFT, "instructions": "Again."}).status_code == 201
    url = f"{server.url}/v1/teams/newsroom/items"
    first = httpx.post(f"{url}/draft-2/cancel", timeout=30).json()
    assert (first["state"], first["reason"]) == ("cancelled", "cancelled")  # never started
    eventually(lambda: model_requests(model) != [], what="the summary's first call", timeout=60)
    httpx.post(f"{url}/sqlite/cancel", timeout=30)  # in an iteration: stops at its end
    summary = wait_item(server, "sqlite")
    assert summary["state"] == "cancelled", summary
    draft = wait_item(server, "draft-1")
    assert draft["state"] == "cancelled"
    assert draft["reason"] == "it depends on 'sqlite', which was cancelled"
    assert len(model_requests(model)) == 1  # nothing was asked after the cancel


def test_an_item_whose_dependency_failed_is_cancelled(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin([])  # the stand-in refuses every call (418): the summary's task fails
    server = serve_newsroom(model, f"sqlite:///{tmp_path / 'store.sqlite3'}")
    servers.append(server)
    assert put_item(server, "sqlite", SUMMARY).status_code == 201
    assert put_item(server, "draft-1", DRAFT).status_code == 201
    assert wait_item(server, "sqlite")["state"] == "failed"
    draft = wait_item(server, "draft-1")
    assert (draft["state"], draft["reason"]) == (
        "cancelled",
        "it depends on 'sqlite', which was failed",
    )
    assert draft["claimed_by"] is None or draft["claims"] == 0


def test_items_of_two_callers_are_worked_by_the_same_member_and_each_callers_own(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin(STANDIN[:2] * 2)
    tokens = tmp_path / "tokens"
    tokens.write_text("alice alice-token-0123456789\nbob bob-token-0123456789ab\n")
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    command = ankka_command("serve", "examples.newsroom:service", "--port", "0", "--store", store)
    server = start([*command, "--token-file", str(tokens)], env=model_env(model.url))
    servers.append(server)
    url = f"{server.url}/v1/teams/newsroom/items"
    alice = {"authorization": "Bearer alice-token-0123456789"}
    bob = {"authorization": "Bearer bob-token-0123456789ab"}
    assert httpx.put(f"{url}/a", json=SUMMARY, headers=alice, timeout=30).status_code == 201
    assert httpx.put(f"{url}/b", json=SUMMARY, headers=bob, timeout=30).status_code == 201
    done = {}
    for item, who in (("a", alice), ("b", bob)):
        answer = httpx.get(f"{url}/{item}", params={"wait": 60}, headers=who, timeout=70)
        done[item] = answer.json()
    assert {i: r["state"] for i, r in done.items()} == {"a": "completed", "b": "completed"}
    assert done["a"]["claimed_by"] == done["b"]["claimed_by"]  # one member instance, in turn
    assert (done["a"]["created_by"], done["b"]["created_by"]) == ("alice", "bob")
    refused = httpx.get(f"{url}/a", headers=bob, timeout=30)
    assert refused.status_code == 403, refused.text
    listed = httpx.get(url, headers=bob, timeout=30).json()
    assert [i["id"] for i in listed["items"]] == ["b"]
    task = httpx.get(f"{server.url}/v1/tasks/{done['a']['task']}", headers=bob, timeout=30)
    assert task.status_code == 403  # the item's task is its creator's too


def test_an_items_priority_is_given_with_it_and_changed_while_it_waits(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin([{**STANDIN[0], "delay_ms": 10000}])  # the summary's call: slow
    server = serve_newsroom(model, f"sqlite:///{tmp_path / 'store.sqlite3'}")
    servers.append(server)
    assert put_item(server, "sqlite", SUMMARY).status_code == 201
    draft = put_item(server, "draft-1", {**DRAFT, "priority": 7})
    assert draft.status_code == 201, draft.text
    assert (draft.json()["state"], draft.json()["priority"]) == ("waiting", 7)
    assert put_item(server, "draft-1", {**DRAFT, "priority": 7}).status_code == 200
    assert put_item(server, "draft-1", {**DRAFT, "priority": 8}).status_code == 409
    url = f"{server.url}/v1/teams/newsroom/items"
    moved = httpx.post(f"{url}/draft-1/priority", json={"priority": -2}, timeout=30)
    assert moved.status_code == 200, moved.text
    assert moved.json()["priority"] == -2
    listed = httpx.get(url, timeout=30).json()["items"]
    assert [(i["id"], i["priority"]) for i in listed] == [("sqlite", 0), ("draft-1", -2)]
    too_high = put_item(server, "d2", {**DRAFT, "priority": 10**10})
    assert too_high.status_code == 422 and "priority" in too_high.text
    nowhere = httpx.post(f"{url}/nowhere/priority", json={"priority": 1}, timeout=30)
    assert nowhere.status_code == 404
